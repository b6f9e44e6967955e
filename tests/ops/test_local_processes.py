"""The one lifecycle of the local cluster's processes (`mrtr_ops.local.process.ChildProcess`), on real Redis.

Redis and Sentinel start, wait until ready, stop and die the way the workers and the proxy do: a
paused process (SIGSTOP, as `RedisHA.pause_primary` leaves a primary) is woken before SIGTERM, so it
shuts down by its own handling instead of outliving the timeout and taking the SIGKILL fallback.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrtr_ops.local.process import NotReady
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.local.sentinel import SentinelServer, SentinelTiming
from mrtr_ops.waiting import wait_until

pytestmark = pytest.mark.slow  # real redis-server and redis-sentinel processes


def _state(pid: int) -> str:
    """The kernel's one-letter state of a process (`T`: stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.kill()


def _sentinel_on(primary: RedisServer, tmp_path: Path) -> SentinelServer:
    return SentinelServer(tmp_path / "sentinel").start(primary.port, 1, SentinelTiming())


@pytest.mark.parametrize("which", ["redis-server", "redis-sentinel"])
def test_a_paused_server_stops_by_its_own_sigterm_handling(which: str, primary: RedisServer, tmp_path: Path) -> None:
    server: RedisServer | SentinelServer = primary if which == "redis-server" else _sentinel_on(primary, tmp_path)
    try:
        popen = server.popen
        assert popen is not None
        popen.send_signal(signal.SIGSTOP)
        wait_until(lambda: _state(popen.pid) == "T", timeout=30, what=f"{which} to be stopped")
        server.stop()
        # 0: it handled SIGTERM and shut down; the SIGKILL fallback (a paused process never sees SIGTERM) gives -9
        assert popen.returncode == 0, server.log_path.read_text()[-2000:]
        assert not server.running
    finally:
        server.kill()


def test_stop_after_a_stop_or_a_kill_does_nothing_more(primary: RedisServer) -> None:
    assert primary.stop() == 0
    assert primary.stop() == 0
    primary.start()
    primary.kill()
    assert primary.returncode() == -signal.SIGKILL
    assert primary.stop() == -signal.SIGKILL


def test_a_restart_comes_back_on_the_same_port_as_a_new_process(primary: RedisServer) -> None:
    before = primary.pid
    primary.restart()
    assert primary.running
    assert primary.pid != before


def test_a_server_that_exits_before_it_is_ready_names_its_log(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", options=["--no-such-directive", "yes"])
    with pytest.raises(NotReady, match=r"redis-server on port \d+ exited with 1; see .*redis\.log"):
        server.start()
    assert "no-such-directive" in server.log_path.read_text()
    assert not server.running
    server.stop()  # closes the log; nothing left to signal
