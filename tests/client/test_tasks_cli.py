"""`mrtr-call --task` and `mrtr-call task get|cancel|wait` against a scripted server (no process, no network)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from mrtr_client.cli import INTERRUPTED, StatusLine, main
from mrtr_client.trace import TaskExchange, TaskSnapshot
from tests.client.scripted_server import ScriptedServer, wire_task

URL = ["--url", "http://mcp.test/mcp"]
FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "How many digits?",
        "requestedSchema": {"type": "object", "properties": {"digits": {"type": "integer"}}},
    },
}
COUNT = {
    "resultType": "complete",
    "content": [{"type": "text", "text": "148933"}],
    "structuredContent": {"limit": 2000000, "count": 148933},
    "_meta": {"mrtr-cluster.dev/compute": {"steps": 20, "slices": 2, "visited": [["w2", 1], ["w3", 2]]}},
}


def _run(server: ScriptedServer, *argv: str) -> int:
    return main([*URL, *argv], http=server.sync_http())


def test_a_task_shows_its_status_as_it_changes_and_prints_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer(
        [
            wire_task("t-1", "working", statusMessage="slice 1 on w2"),
            wire_task("t-1", "working", statusMessage="slice 1 on w2"),
            wire_task("t-1", "working", statusMessage="slice 2 on w3"),
            wire_task("t-1", "completed", result=COUNT),
        ]
    )
    assert _run(server, "--task", "count_primes", "limit=2000000") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "task t-1 created on w1 (poll every 1 ms); Ctrl-C cancels it"
    statuses = {"working", "input_required", "completed"}
    status = [line.split() for line in lines if line.startswith("  ") and line.split()[0] in statuses]
    assert [(words[0], words[1]) for words in status] == [
        ("working", "w1"),
        ("working", "w2"),
        ("working", "w3"),
        ("working", "w4"),
        ("completed", "w5"),
    ]
    assert "slice 2 on w3" in out
    assert "task t-1: 4 polls answered by w2, w3, w4, w5" in out
    assert "task t-1: 20 steps in 2 slices, run on w2 v1, w3 v2" in out
    assert json.loads(out[out.index("{") :]) == COUNT["structuredContent"]
    call = server.params("tools/call")[0]
    assert call["arguments"] == {"limit": 2000000}
    assert "io.modelcontextprotocol/tasks" in call["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]


def test_a_tasks_question_is_answered_like_a_rounds_question(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer(
        [
            wire_task("t-1", "input_required", inputRequests={"refine": FORM}),
            wire_task("t-1", "input_required", inputRequests={"refine": FORM}),
            wire_task(
                "t-1", "completed", result={"resultType": "complete", "content": [{"type": "text", "text": "3.14159"}]}
            ),
        ]
    )
    assert _run(server, "--task", "--answer", "refine.digits=6", "estimate_pi", "ask_to_refine=true") == 0
    out = capsys.readouterr().out
    assert "  [refine] How many digits?" in out
    assert "answered refine" in out
    assert out.rstrip().endswith("3.14159")
    assert server.params("tasks/update") == [
        {
            "taskId": "t-1",
            "inputResponses": {"refine": {"action": "accept", "content": {"digits": 6}}},
            "_meta": server.params("tasks/update")[0]["_meta"],
        }
    ]


def test_ctrl_c_cancels_the_task_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([wire_task("t-1", "working")])

    def interrupt() -> None:
        if server.methods.count("tasks/get") == 2:
            raise KeyboardInterrupt

    server.on_get = interrupt
    assert _run(server, "--task", "count_primes", "limit=10") == INTERRUPTED
    err = capsys.readouterr().err
    assert err.strip() == "mrtr-call: interrupted: task t-1 cancelled (acknowledged by w4)"
    assert server.methods[-1] == "tasks/cancel"
    assert server.requests[-1][1]["mcp-name"] == "t-1"


def test_a_failed_task_is_an_error_with_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([wire_task("t-1", "failed", error={"code": -32603, "message": "it broke"})])
    assert _run(server, "--task", "protocol_error_job") == 1
    assert capsys.readouterr().err.strip() == "mrtr-call: task t-1 failed: it broke (JSON-RPC -32603)"


def test_a_tool_error_in_a_task_exits_1_with_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    result = {"resultType": "complete", "content": [{"type": "text", "text": "job failed"}], "isError": True}
    server = ScriptedServer([wire_task("t-1", "completed", result=result)])
    assert _run(server, "--task", "failing_job") == 1
    assert capsys.readouterr().out.rstrip().endswith("job failed")


def test_a_wait_past_the_bound_says_how_to_go_on(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([wire_task("t-1", "working", pollIntervalMs=200)])
    assert _run(server, "--task", "--max-wait", "0.5", "count_primes") == 1
    err = capsys.readouterr().err
    assert "task t-1 still working after" in err
    assert "`mrtr-call task wait t-1`" in err
    assert "tasks/cancel" not in server.methods


def test_a_task_only_tool_called_without_task_gets_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    error = {
        "code": -32021,
        "message": "this tool needs the tasks extension",
        "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    }
    server = ScriptedServer([], call_error=error)
    assert _run(server, "failing_job") == 1
    assert capsys.readouterr().err.strip().endswith("this tool runs only as a task: add --task")


def test_a_server_that_answers_at_once_prints_the_result_without_a_status_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ScriptedServer([], call_result={"resultType": "complete", "content": [{"type": "text", "text": "4"}]})
    assert _run(server, "--task", "count_primes", "limit=10") == 0
    out = capsys.readouterr().out
    assert "task " not in out
    assert out.rstrip().endswith("4")


def test_task_get_shows_the_task(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer(
        [wire_task("t-9", "input_required", statusMessage="waiting for you", inputRequests={"refine": FORM})]
    )
    assert _run(server, "task", "get", "t-9") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "task t-9"
    assert "  status         input_required" in out
    assert "  message        waiting for you" in out
    assert "  answered by    w1" in out
    assert "  question       [refine] elicitation/create: How many digits?" in out
    assert server.requests[0][1]["mcp-name"] == "t-9"
    assert _run(server, "--json", "task", "get", "t-9") == 0
    assert json.loads(capsys.readouterr().out)["status"] == "input_required"


def test_task_cancel_cancels_by_id(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([wire_task("t-9", "working")])
    assert _run(server, "task", "cancel", "t-9") == 0
    assert capsys.readouterr().out.startswith("task t-9: cancel acknowledged")
    assert server.methods == ["tasks/cancel"]
    assert server.params("tasks/cancel")[0]["taskId"] == "t-9"


def test_task_wait_follows_an_existing_task(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([wire_task("t-9", "working"), wire_task("t-9", "completed", result=COUNT)])
    assert _run(server, "task", "wait", "t-9") == 0
    out = capsys.readouterr().out
    assert "completed" in out
    assert json.loads(out[out.index("{") :]) == COUNT["structuredContent"]


def test_an_unknown_task_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedServer([], get_error={"code": -32602, "message": "Unknown task: t-0"})
    assert _run(server, "task", "get", "t-0") == 1
    assert capsys.readouterr().err.strip() == "mrtr-call: Unknown task: t-0 (JSON-RPC -32602)"


@pytest.mark.parametrize("task_id", ["-UUEw6WVb-5LZlnJhP1gcZ-c_VR2Rhaf", "-hJ2k", "--json-args"])
def test_a_task_id_that_starts_with_a_dash_is_an_id_not_an_option(
    task_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ids are base64url: one in 64 starts with `-` (CI met one); argparse alone rejected it."""
    server = ScriptedServer([wire_task(task_id, "working")])
    assert _run(server, "task", "get", task_id, "--json") == 0
    assert json.loads(capsys.readouterr().out)["taskId"] == task_id
    assert _run(server, "task", "cancel", task_id) == 0
    assert server.params("tasks/cancel")[0]["taskId"] == task_id
    assert server.requests[-1][1]["mcp-name"] == task_id


def test_task_commands_need_an_id() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["task", "get"])
    assert caught.value.code == 2


def _ticks() -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += 0.5


def _exchange(status: str, instance: str, message: str | None = None) -> TaskExchange:
    snapshot = TaskSnapshot("t-1", status, message, None, None, None, None, {}, None, None, instance)
    return TaskExchange("tasks/get", "t-1", instance, "1", 200, 1.0, 0.0, snapshot)


def test_on_a_terminal_the_status_line_is_rewritten_in_place_and_closed_before_a_question() -> None:
    out = io.StringIO()
    clock = _ticks()
    line = StatusLine(out, live=True, clock=lambda: next(clock))
    line(_exchange("working", "w2"))
    line(_exchange("working", "w3", "slice 2 on w3"))
    line(_exchange("input_required", "w1"))
    line(_exchange("completed", "w2"))
    text = out.getvalue()
    assert text.count("\r\x1b[K") == 4
    assert text.count("\n") == 2  # after input_required (a prompt follows) and after the terminal status
    assert "slice 2 on w3" in text
    first_line = text.split("\n")[0]
    assert "input_required  w1" in first_line
    assert first_line.endswith("1.5 s")
