"""`McpUser` against real servers: one on the official MCP Python SDK (not ours), run distributed, and our cluster.

The SDK server asks one elicitation question through MRTR (`greet`) and answers `add_up` at once; a
headless master with one worker drives it from `sdk_mcp_locustfile.py`, which ends the run once the
master has counted every call (no clock). Our cluster (two versions, short slices) is driven in
Locust's library mode (`mcp_user_library.py`, as a checking tool would), with a hand-back, a task and a
question. Both runs carry a call whose check is wrong: it must be a Locust failure with its message.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.process import LOOPBACK, free_port
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


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The SDK server on uvicorn in its own process; ready once it accepts a connection (it has no `/readyz`)."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "tests.loadtest.sdk_mrtr_server:app", "--host", LOOPBACK]
    with (tmp_path_factory.mktemp("sdk") / "server.log").open("wb") as log:
        server = subprocess.Popen([*argv, "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(partial(_accepts, port), timeout=60, what=f"the SDK server on {port}")
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.terminate()
        server.wait(timeout=15)


def _locust(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "locust", *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def distributed(sdk_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A headless master and one worker process against the SDK server: the master's stats and both logs."""
    out = tmp_path_factory.mktemp("distributed")
    port = free_port()
    common = ["-f", str(LOCUSTFILE)]
    worker = _locust([*common, "--worker", "--master-host", LOOPBACK, "--master-port", str(port)], out / "worker.log")
    master = _locust(
        [
            *common,
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
    assert stats[("task", "task:create")]["requests"] == stats[("call", "task primes")]["requests"]
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
