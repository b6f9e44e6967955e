"""The client and `mrtr-call` run tasks against a real worker with a real Redis (the tasks extension end to end)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from mrtr_client import Client, ScriptedInputs, TaskCancelled, TaskExchange, TaskFailed, TaskPolicy
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.computation import run_uninterrupted
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.conftest import StartWorker


@pytest.fixture(scope="module")
def tasks_worker(start_worker: StartWorker, redis_server: RedisServer) -> WorkerSpec:
    env = {"MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": "client:"}
    return start_worker(tool_packs=("compute", "conformance"), env=env)[0]


@pytest.fixture
def client(tasks_worker: WorkerSpec) -> Iterator[Client]:
    with Client(f"{tasks_worker.url}/mcp", ScriptedInputs(), task_policy=TaskPolicy(max_wait=60, push=False)) as c:
        yield c


def test_a_prime_count_runs_as_a_task_and_is_exact(client: Client, tasks_worker: WorkerSpec) -> None:
    seen: list[TaskExchange] = []
    done = client.call_tool("count_primes", {"limit": 2_000_000, "segment": 100_000}, task=True, on_task=seen.append)
    assert done.structured == {"count": KNOWN_COUNTS[2_000_000]}
    assert done.task_id is not None
    assert [hop.reason for hop in done.trace.hops] == ["task"]
    assert done.trace.polls
    assert {p.instance for p in done.trace.polls} == {tasks_worker.instance_id}
    assert done.trace.polls[-1].status == "completed"
    assert seen[0].detail == "created"
    assert client.get_task(done.task_id).status == "completed"


def test_a_tasks_question_is_answered_once_by_the_input_handler(tasks_worker: WorkerSpec) -> None:
    arguments = {"samples": 20_000, "seed": 7, "ask_to_refine": True, "chunk": 5_000}
    asked: list[str] = []

    class Refine:
        """Says yes to refining, whatever key the task gave the question (keys are the server's)."""

        def capabilities(self) -> dict[str, Any]:
            return {"elicitation": {}}

        def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
            asked.append(key)
            return {"action": "accept", "content": {"refine": True}}

    inputs = Refine()
    with Client(f"{tasks_worker.url}/mcp", inputs, task_policy=TaskPolicy(max_wait=60)) as c:
        done = c.call_tool("estimate_pi", arguments, task=True)
    expected, _ = run_uninterrupted(ESTIMATE_PI, {**arguments, "samples": 40_000, "ask_to_refine": False})
    assert done.structured == expected
    assert [q.key for q in done.trace.questions] == asked
    assert len(asked) == 1
    assert [x.method for x in done.trace.task_exchanges].count("tasks/update") == 1


def test_tool_errors_and_protocol_errors_keep_their_kinds(client: Client) -> None:
    assert client.call_tool("failing_job", task=True).is_error
    with pytest.raises(TaskFailed) as failed:
        client.call_tool("protocol_error_job", task=True)
    assert isinstance(failed.value.code, int)


def test_an_interrupted_call_cancels_its_task(client: Client) -> None:
    created: list[str] = []

    def interrupt_at_first_poll(exchange: TaskExchange) -> None:
        created.append(exchange.task_id)
        if exchange.method == "tasks/get":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.call_tool("slow_compute", {"seconds": 60, "label": "ctrl-c"}, task=True, on_task=interrupt_at_first_poll)
    task_id = created[0]
    wait_until(lambda: client.get_task(task_id).status == "cancelled", timeout=10, what="the task to settle")
    with pytest.raises(TaskCancelled):
        client.wait_task(task_id)


def _cli(worker: WorkerSpec, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr_client.cli", "--url", f"{worker.url}/mcp", "--yes", *args],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_runs_a_task_shows_its_status_and_reads_it_back(tasks_worker: WorkerSpec) -> None:
    done = _cli(tasks_worker, "--task", "count_primes", "limit=1000000", "segment=100000")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("task ")
    assert f"created on {tasks_worker.instance_id}" in lines[0]
    assert any(line.split()[:2] == ["completed", tasks_worker.instance_id] for line in lines if line.startswith("  "))
    assert '"count": 78498' in done.stdout
    task_id = lines[0].split()[1]
    read = _cli(tasks_worker, "task", "get", task_id)
    assert read.returncode == 0, read.stderr
    assert "  status         completed" in read.stdout


def _answer_ctrl_c() -> None:
    """In the CLI's process, before exec: Ctrl-C as a terminal delivers it.

    A test run started in the background by a shell without job control (`scripts/test &`) inherits
    SIGINT ignored, and Python installs its KeyboardInterrupt handler only when SIGINT is not ignored.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_the_cli_cancels_the_task(tasks_worker: WorkerSpec, client: Client) -> None:
    command = [sys.executable, "-m", "mrtr_client.cli", "--url", f"{tasks_worker.url}/mcp", "--yes", "--task"]
    process = subprocess.Popen(
        [*command, "slow_compute", "seconds=60", "label=cli"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        preexec_fn=_answer_ctrl_c,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("task "), first
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    task_id = first.split()[1]
    assert process.returncode == 130
    assert f"task {task_id} cancelled" in err
    wait_until(lambda: client.get_task(task_id).status == "cancelled", timeout=10, what="the task to settle")
