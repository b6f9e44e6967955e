"""`McpUser` against real servers: one on the official MCP Python SDK (not ours), run distributed, and our cluster.

The SDK server asks one elicitation question through MRTR (`greet`) and answers `add_up` at once; a
headless master with one worker drives it from `sdk_mcp_locustfile.py`, which ends the run once the
master has counted every call (no clock). Our cluster (two versions, short slices) is driven in
Locust's library mode (`mcp_user_library.py`, as a checking tool would), with a hand-back, a task and a
question. Both runs carry a call whose check is wrong: it must be a Locust failure with its message.
Two SDK servers behind our proxy (each seals with its own key) show a JSON-RPC error named by its code.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.process import LOOPBACK, ManagedProcess, free_port
from mrtr_ops.waiting import wait_until
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # real servers and Locust processes
LOCUSTFILE = Path(__file__).with_name("sdk_mcp_locustfile.py")
RUN_TIME_BOUND = 240
"""`--run-time`: ends a run that never counted every call (the test then fails on `stopped by itself`)."""
PROCESS_WAIT = RUN_TIME_BOUND + 180


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


@contextmanager
def _sdk_servers(log_dir: Path, count: int) -> Iterator[list[str]]:
    """SDK servers on uvicorn, each its own process; ready once each accepts a connection (no `/readyz`)."""
    started: list[tuple[subprocess.Popen[bytes], int]] = []
    argv = [sys.executable, "-m", "uvicorn", "tests.loadtest.sdk_mrtr_server:app", "--host", LOOPBACK]
    try:
        for n in range(count):
            port = free_port()
            with (log_dir / f"sdk-{n}.log").open("wb") as log:
                process = subprocess.Popen([*argv, "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            started.append((process, port))
        for _, port in started:
            wait_until(partial(_accepts, port), timeout=60, what=f"the SDK server on {port}")
        yield [f"http://{LOOPBACK}:{port}" for _, port in started]
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=15)


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _sdk_servers(tmp_path_factory.mktemp("sdk"), 1) as [url]:
        yield url


def _locust(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A Locust process on the SDK locustfile."""
    args = ["-f", str(LOCUSTFILE), *args]
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "locust", *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def distributed(sdk_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A headless master and one worker process against the SDK server: the master's stats and both logs."""
    out = tmp_path_factory.mktemp("distributed")
    port = free_port()
    worker = _locust(["--worker", "--master-host", LOOPBACK, "--master-port", str(port)], out / "worker.log")
    master = _locust(
        [
            *("--headless", "--master", "--expect-workers", "1", "--expect-workers-max-wait", "120"),
            *("--master-bind-host", LOOPBACK, "--master-bind-port", str(port), "-u", "2", "-r", "2"),
            *("--run-time", str(RUN_TIME_BOUND), "--host", sdk_server, "--json-file", str(out / "stats")),
        ],
        out / "master.log",
    )
    try:
        master.wait(timeout=PROCESS_WAIT)
        worker.wait(timeout=60)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.wait()
    stats = {(e["method"], e["name"]): e for e in json.loads((out / "stats.json").read_text())}
    return {"code": master.returncode, "log": (out / "master.log").read_text(), "stats": stats}


def test_a_distributed_run_reports_each_call_and_round_by_name(distributed: dict[str, Any]) -> None:
    log, stats = distributed["log"], distributed["stats"]
    assert "1 workers connected" in log
    assert "every call seen 3 times: stopping" in log, log[-3000:]
    for name in ("greet", "greet by default", "add_up", "add_up wrong check"):
        assert stats[("call", name)]["num_requests"] >= 3
    for name in ("greet", "greet by default", "add_up"):  # answered from the table, from the form's defaults
        assert stats[("call", name)]["num_failures"] == 0
    greets = stats[("call", "greet")]["num_requests"] + stats[("call", "greet by default")]["num_requests"]
    assert stats[("round", "round:input_required")]["num_requests"] == greets  # one question per greeting
    assert stats[("round", "round:input_required")]["num_failures"] == 0
    calls = sum(e["num_requests"] for (kind, _), e in stats.items() if kind == "call")
    assert stats[("round", "round:complete")]["num_requests"] == calls
    assert {kind for kind, _ in stats} == {"call", "round"}


def test_a_wrong_check_is_a_failure_with_its_message(distributed: dict[str, Any]) -> None:
    wrong = distributed["stats"][("call", "add_up wrong check")]
    assert wrong["num_failures"] == wrong["num_requests"] >= 3
    assert distributed["code"] == 1  # Locust's exit code when a run had failures
    failure = 'failure of add_up wrong check: CallFailed(\'structuredContent {"total": 3} != expected {"total": 4}\')'
    assert failure in distributed["log"]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Our cluster (versions 1 and 2, slices of at most 200 ms) driven in library mode until it saw enough."""
    config = ClusterConfig(
        workers=2,
        port=0,
        work_dir=tmp_path_factory.mktemp("cluster"),
        worker_env={"MRTR_WORKER_MAX_SLICE_MS": "200", "MRTR_WORKER_MIN_SLICE_MS": "50"},
        versions=(1, 2),
    )
    with LocalCluster(config) as cluster:
        run = subprocess.run(
            [sys.executable, "-m", "tests.loadtest.mcp_user_library", cluster.url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=PROCESS_WAIT,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_library_mode_on_our_cluster_sees_hand_backs_tasks_and_questions(cluster_run: dict[str, Any]) -> None:
    assert cluster_run["enough"], "the run ended before it saw a hand-back, a task and a question"
    stats = {(s["type"], s["name"]): s for s in cluster_run["stats"]}
    for name in ("count_primes", "task primes", "estimate_pi"):
        assert stats[("call", name)]["failures"] == 0, cluster_run["errors"]
    assert stats[("round", "round:hand_back")]["requests"] >= 1
    task_calls = stats[("call", "task primes")]["requests"] + stats[("call", "task pi")]["requests"]
    assert stats[("task", "task:create")]["requests"] == task_calls
    assert stats[("task", "task:update")]["requests"] >= 1  # "task pi" answered its question with tasks/update
    calls = cluster_run["calls"]
    tasks = [c for c in calls if c["name"] == "task primes" and c["error"] is None]
    assert tasks
    assert all(c["task_id"] and c["rounds"][0] == "task:create" for c in tasks)
    assert all(c["answer"] == {"count": 1_270_607} for c in tasks)
    asked = [c for c in calls if c["name"] == "estimate_pi"]
    assert asked
    assert all(c["questions"] == ["refine"] and c["rounds"].count("round:input_required") == 1 for c in asked)
    assert all(c["answer"]["samples"] == 20_000 for c in asked)  # "refine": no, from the call's answers
    assert all(c["instances"] for c in calls)  # each call names where it was answered (`X-Worker-Id`)
    assert {where for c in calls for where in c["instances"]} == {"w1", "w2"}


def test_library_mode_names_a_wrong_check(cluster_run: dict[str, Any]) -> None:
    wrong = [c for c in cluster_run["calls"] if c["name"] == "wrong"]
    assert wrong
    assert all(c["error"] == "text '{\"count\": 78498}' != expected 'no such text'" for c in wrong)
    [error] = [e for e in cluster_run["errors"] if e["name"] == "wrong"]
    assert "no such text" in error["error"]
    assert error["count"] == len(wrong)


def test_a_state_refused_by_another_instance_is_a_failure_named_by_its_code(tmp_path: Path) -> None:
    """Two SDK servers (each seals with a key of its own, python-sdk#3032) behind our proxy, one user: every
    `greet` has its answer round sent to the other server, which refuses the state with a JSON-RPC error."""
    port, admin_port = free_port(), free_port()
    with _sdk_servers(tmp_path, 2) as backends:
        proxy = ManagedProcess(
            name="lb",
            argv=[sys.executable, "-m", "mrtr_lb", "--backends", ",".join(backends)],
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")},
                **{"MRTR_LB_HEALTH_CHECK": "tcp", "MRTR_LB_PORT": str(port), "MRTR_LB_ADMIN_PORT": str(admin_port)},
            },
            log_path=tmp_path / "lb.log",
            ready_url=f"http://{LOOPBACK}:{admin_port}/lb/healthz",
        ).start()
        try:
            proxy.wait_ready(timeout=60)
            run = _locust(
                [
                    *("--headless", "-u", "1", "-r", "1", "--run-time", str(RUN_TIME_BOUND)),
                    *("--host", f"http://{LOOPBACK}:{port}", "--json-file", str(tmp_path / "stats")),
                ],
                tmp_path / "locust.log",
            )
            run.wait(timeout=PROCESS_WAIT)
        finally:
            proxy.stop()
    log = (tmp_path / "locust.log").read_text()
    assert "every call seen 3 times: stopping" in log, log[-3000:]
    stats = {(e["method"], e["name"]): e for e in json.loads((tmp_path / "stats.json").read_text())}
    for name in ("greet", "greet by default"):
        assert stats[("call", name)]["num_failures"] == stats[("call", name)]["num_requests"] >= 3
    assert stats[("call", "add_up")]["num_failures"] == 0  # one round: nothing to carry to another server
    assert "failure of greet: JSON-RPC error -32602: Invalid or expired requestState" in log
    assert stats[("round", "round:error")]["num_requests"] >= stats[("call", "greet")]["num_requests"]


def test_library_mode_names_a_tool_error(cluster_run: dict[str, Any]) -> None:
    unknown = [c for c in cluster_run["calls"] if c["name"] == "unknown"]
    assert unknown
    assert all(c["error"] == "tool error: Unknown tool: no_such_tool" and c["code"] is None for c in unknown)
    bad = [c for c in cluster_run["calls"] if c["name"] == "bad arguments"]
    assert bad
    assert all(c["error"].startswith("tool error: Error executing tool count_primes") for c in bad)
