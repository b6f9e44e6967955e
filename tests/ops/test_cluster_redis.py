"""The local cluster's task store: one Redis next to the workers, its URL in every worker's environment.

Checked on real processes: what each worker process was started with (`/proc/PID/environ`),
Redis answering through `redis-cli`, a restart on the same data, and `scripts/cluster`'s
command line with Redis, with `--no-redis`, and on a machine without `redis-server`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mrtr_client import Client, TaskExchange
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.local.redis import REDIS_URL_VARIABLE, ping
from mrtr_ops.waiting import wait_until
from mrtr_protocol.tasks import EXTENSION_ID
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.ops.conftest import MakeCluster
from tests.support.wire import McpHttp

pytestmark = pytest.mark.slow  # starts clusters and Redis servers


def environ(pid: int) -> dict[str, str]:
    """The environment a process was started with, as the kernel keeps it."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def redis_cli(port: int, *command: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *command], capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()


def worker_urls(cluster: LocalCluster) -> dict[str, str | None]:
    return {i: environ(h.process.pid).get(REDIS_URL_VARIABLE) for i, h in cluster.workers.items()}


@pytest.fixture(scope="module")
def cluster(make_cluster: MakeCluster) -> LocalCluster:
    return make_cluster(workers=2)


def test_redis_runs_in_the_work_dir_and_every_worker_gets_its_url(cluster: LocalCluster) -> None:
    assert cluster.redis is not None
    assert cluster.redis.running
    assert cluster.redis.directory == cluster.config.work_dir / "redis"
    assert redis_cli(cluster.redis.port, "PING") == "PONG"
    assert redis_cli(cluster.redis.port, "CONFIG", "GET", "appendonly").splitlines() == ["appendonly", "yes"]
    assert cluster.redis_url == f"redis://127.0.0.1:{cluster.redis.port}/0"
    assert worker_urls(cluster) == dict.fromkeys(cluster.workers, cluster.redis_url)


def advertised(worker_url: str) -> bool:
    """Whether the worker itself (not through the proxy) offers the tasks extension in `server/discover`."""
    mcp = McpHttp(f"{worker_url}/mcp")
    try:
        capabilities = mcp.call("server/discover", {}).result["capabilities"]
    finally:
        mcp.close()
    return EXTENSION_ID in capabilities.get("extensions", {})


def test_every_worker_offers_tasks_on_the_clusters_redis(cluster: LocalCluster) -> None:
    assert all(advertised(handle.url) for handle in cluster.workers.values())


def test_a_task_completes_exactly_across_a_redis_restart(cluster: LocalCluster) -> None:
    """Redis restarted (SIGTERM, the same data) right after the task was created: the task finishes, exactly."""
    redis = cluster.redis
    assert redis is not None
    restarted: list[int | None] = []

    def restart_once(exchange: TaskExchange) -> None:
        if not restarted:
            restarted.append(redis.pid)
            redis.restart()

    limit = 2_000_000
    with Client(cluster.mcp_url) as client:
        done = client.call_tool("count_primes", {"limit": limit}, task=True, on_task=restart_once)
    assert restarted
    assert restarted[0] != redis.pid
    assert done.structured == {"count": KNOWN_COUNTS[limit]}


def test_added_and_restarted_workers_get_the_url_too(cluster: LocalCluster) -> None:
    added = cluster.add_worker(2)
    assert environ(added.process.pid)[REDIS_URL_VARIABLE] == cluster.redis_url
    cluster.kill_worker(added.instance_id)
    restarted = cluster.restart_worker(added.instance_id)
    assert environ(restarted.process.pid)[REDIS_URL_VARIABLE] == cluster.redis_url
    cluster.drain_worker(added.instance_id)


def test_redis_restarts_on_the_same_port_and_data(cluster: LocalCluster) -> None:
    redis = cluster.redis
    assert redis is not None
    redis_cli(redis.port, "SET", "test:restart", "kept")
    before = redis.pid
    redis.restart()
    assert redis.pid != before
    assert redis_cli(redis.port, "GET", "test:restart") == "kept"
    redis.kill()
    assert not ping(redis.port)
    redis.start()
    assert redis_cli(redis.port, "PING") == "PONG"
    assert worker_urls(cluster) == dict.fromkeys(cluster.workers, cluster.redis_url)  # the workers never changed


def test_without_redis_the_workers_get_no_url(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(workers=1, redis=False)
    assert cluster.redis is None
    assert cluster.redis_url is None
    assert worker_urls(cluster) == dict.fromkeys(cluster.workers, None)
    assert not (cluster.config.work_dir / "redis").exists()
    assert not any(advertised(handle.url) for handle in cluster.workers.values())


class CliRun:
    """`python -m mrtr_ops.local` (what `scripts/cluster` runs), started and waited for until its URL file appears."""

    def __init__(self, work_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.work_dir = work_dir
        self.output = work_dir / "output.txt"
        url_file = work_dir / "url"
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mrtr_ops.local", "--port", "0", "--workers", "1",
                 "--work-dir", str(work_dir), "--url-file", str(url_file), *args],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            )  # fmt: skip
        wait_until(
            lambda: url_file.exists() or self.process.poll() is not None, timeout=60, what="the cluster to come up"
        )
        assert url_file.exists(), self.text()

    def text(self) -> str:
        return self.output.read_text()

    def stop(self) -> int:
        """SIGTERM, as Ctrl-C would; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


RunCli = Callable[..., CliRun]


@pytest.fixture
def run_cli(tmp_path: Path) -> Iterator[RunCli]:
    started: list[CliRun] = []

    def run(*args: str, env: dict[str, str] | None = None) -> CliRun:
        work_dir = tmp_path / f"run{len(started)}"
        work_dir.mkdir()
        started.append(CliRun(work_dir, *args, env=env))
        return started[-1]

    yield run
    for cli in started:
        if cli.process.poll() is None:
            cli.stop()


def _redis_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("redis: ")]
    return line


def test_the_command_line_says_where_redis_runs_and_stops_it(run_cli: RunCli) -> None:
    run = run_cli()
    line = _redis_line(run.text())
    url = line.split()[1]
    port = int(url.removeprefix("redis://127.0.0.1:").removesuffix("/0"))
    assert ping(port)
    assert str(run.work_dir / "redis") in line
    assert run.stop() == 0
    assert not ping(port)


def test_no_redis_on_the_command_line(run_cli: RunCli) -> None:
    run = run_cli("--no-redis")
    assert _redis_line(run.text()).startswith("redis: none")
    assert not (run.work_dir / "redis").exists()
    assert run.stop() == 0


def test_without_redis_server_the_cluster_starts_without_redis_and_says_so(run_cli: RunCli) -> None:
    """A PATH without redis-server is a machine without it (the workers run from this interpreter, not PATH)."""
    assert shutil.which("redis-server") is not None
    run = run_cli(env={"PATH": str(Path(sys.executable).parent)})
    text = run.text()
    assert "redis-server is not installed" in text
    assert "WITHOUT Redis" in text
    assert _redis_line(text).startswith("redis: none")
    assert run.stop() == 0
