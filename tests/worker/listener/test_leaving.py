"""How a worker's host serves and leaves: `/mcp` through the front door, and a drained process gone cleanly.

Real worker processes over real HTTP. The exit itself is fast by design
(`mrtr_worker.listener.draining_server`, the step pool killed, `_leave_now`); how fast
is a figure for `benchmarks/drain_time.py`, never asserted here. What is
asserted is what must not change: a drain ends the process with status 0 and
a clean log, its step pool goes with it, and every answer still says where it
was served.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.waiting import wait_until
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

EXIT_TIMEOUT = 120.0
"""Only against a hang on a saturated machine; the exit normally takes tens of milliseconds."""


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _gone(pids: list[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)


def _echo(url: str) -> httpx.Headers:
    client = McpHttp(f"{url}/mcp")
    try:
        exchange = client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    finally:
        client.close()
    assert exchange.status == 200
    assert exchange.message["result"]["structuredContent"] == {"text": "hi"}
    return exchange.headers


def test_mcp_and_host_routes_both_say_where_they_were_served(worker: WorkerSpec) -> None:
    for headers in (_echo(worker.url), httpx.get(f"{worker.url}/healthz").headers):
        assert headers[WORKER_ID_HEADER] == worker.instance_id
        assert headers[WORKER_VERSION_HEADER] == "1"
    assert httpx.get(f"{worker.url}/no/such/page").status_code == 404  # other paths still reach the host


def test_an_operator_drain_ends_the_process_cleanly_with_its_step_pool(start_worker: StartWorker) -> None:
    spec, process = start_worker(tool_packs=("demo", "compute"))
    pool = _children(process.pid)
    assert pool, "the compute pack starts a step pool"
    with httpx.Client() as keep_alive:  # an open keep-alive connection must not hold the exit up
        assert keep_alive.get(f"{spec.url}/readyz").status_code == 200
        assert keep_alive.post(f"{spec.url}/admin/drain").json()["draining"] is True
        assert process.popen is not None
        assert process.popen.wait(timeout=EXIT_TIMEOUT) == 0
    wait_until(lambda: _gone(pool), timeout=EXIT_TIMEOUT, what="the step pool's processes to be gone")
    log = process.log_path.read_text()
    assert "Finished server process" in log
    for trouble in ("Traceback", "leaked", "ERROR"):
        assert trouble not in log, log


def test_sigterm_drains_then_ends_the_process_as_a_signal_does(start_worker: StartWorker) -> None:
    spec, process = start_worker(tool_packs=("demo", "compute"))
    _echo(spec.url)
    assert process.popen is not None
    process.popen.send_signal(signal.SIGTERM)
    assert process.popen.wait(timeout=EXIT_TIMEOUT) == -signal.SIGTERM  # uvicorn re-raises the signal it caught
    log = process.log_path.read_text()
    assert "Finished server process" in log
    assert "Traceback" not in log, log
