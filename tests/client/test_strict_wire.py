"""The client reads what a server answers as strictly as the wire says it MUST be (issue 21 section 1).

A result without `resultType` that only a 2026-07-28 server sends (discovery, a listen's completion, the
tasks extension's answers, a task's inlined tool result: what made the official tasks client settle
every task `failed`) is a protocol error, not a guess; one a server of an earlier version may send (a
tool call, a prompt, a resource, a list) MUST be read as complete, as the official conformance suite
checks. So is a result without the parts its method requires a protocol error, a question of a kind the
request did not declare, a task without a member the extension requires, a listen stream that does not
begin with its acknowledgement, and a reply that does not answer the request it came for. Each case is
one row: the scripted answer and the words of the `ProtocolViolation` it must raise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mrtr_client import Client, ProtocolViolation, RetryPolicy, TaskPolicy
from mrtr_client._loop import Reply, Send, mrtr_loop, new_id_source
from mrtr_client._stream import KeepAlive, Message, Opened
from mrtr_client._tasks import follow_task_loop, task_call_loop
from mrtr_protocol.tasks import LISTEN_TASK_IDS, SUBSCRIPTION_ID_META_KEY, SUBSCRIPTIONS_ACKNOWLEDGED
from tests.client.scripted_server import wire_task

FORM = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}
URL = {"method": "elicitation/create", "params": {"mode": "url", "message": "Open it", "url": "https://x.example"}}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}}
ROOTS = {"method": "roots/list"}
TOOL_RESULT = {"resultType": "complete", "content": [{"type": "text", "text": "4"}]}
CACHEABLE = {"ttlMs": 0, "cacheScope": "public"}


def _reply(message: dict[str, Any], status: int = 200) -> Reply:
    return Reply(status, {"content-type": "application/json"}, json.dumps(message).encode(), 1.0)


def _answer(loop: Any, result: dict[str, Any]) -> Any:
    """Send the loop's first request the scripted result; what the loop does next."""
    send = next(loop)
    assert isinstance(send, Send)
    return loop.send(_reply({"jsonrpc": "2.0", "id": send.request_id, "result": result}))


def _loop(method: str, capabilities: dict[str, Any] | None = None) -> Any:
    params = {"name": "t", "arguments": {}} if method != "resources/read" else {"uri": "x://y"}
    caps = {"elicitation": {}} if capabilities is None else capabilities
    return mrtr_loop(method, params, caps, new_id_source(), RetryPolicy())


def _asking(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"resultType": "input_required", "inputRequests": {f"q{n}": r for n, r in enumerate(requests)}}


# --- results of the MRTR loop: tools/call, prompts/get, resources/read and every other request ---------------

MALFORMED: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, str]] = [
    ("no resultType on discovery", "server/discover",
     {"supportedVersions": ["2026-07-28"], "capabilities": {}, **CACHEABLE}, None,
     "server/discover result without resultType: only a 2026-07-28 server sends it, and such a server MUST"),
    ("no resultType, and no content either", "tools/call", {"isError": False}, None, "content must be an array"),
    ("resultType not a string", "tools/call", {"resultType": 1, "content": []}, None, "resultType 1, not a string"),
    ("unknown resultType", "tools/call", {"resultType": "later"}, None, "unknown resultType 'later'"),
    ("a task nobody accepted", "tools/call", {"resultType": "task"}, None, "unknown resultType 'task'"),
    ("tool result without content", "tools/call", {"resultType": "complete"}, None,
     "tools/call result: content must be an array (missing)"),
    ("isError not a boolean", "tools/call", {**TOOL_RESULT, "isError": "yes"}, None, "isError must be a boolean"),
    ("prompt without messages", "prompts/get", {"resultType": "complete"}, None, "messages must be an array"),
    ("resource without contents", "resources/read", {"resultType": "complete", **CACHEABLE}, None,
     "contents must be an array"),
    ("resource without ttlMs", "resources/read", {"resultType": "complete", "contents": [], "cacheScope": "public"},
     None, "ttlMs must be an integer (missing)"),
    ("resource without cacheScope", "resources/read", {"resultType": "complete", "contents": [], "ttlMs": 0}, None,
     "cacheScope must be a string"),
    ("discovery without versions", "server/discover", {"resultType": "complete", "capabilities": {}, **CACHEABLE},
     None, "supportedVersions must be an array"),
    ("tool list without tools", "tools/list", {"resultType": "complete", **CACHEABLE}, None, "tools must be an array"),
    ("input_required from a list", "tools/list", {"resultType": "input_required", "requestState": "s"}, None,
     "tools/list answered input_required, which only tools/call, prompts/get and resources/read may return"),
    ("input_required with nothing", "tools/call", {"resultType": "input_required"}, None,
     "input_required without inputRequests or requestState"),
    ("requestState not a string", "tools/call", {"resultType": "input_required", "requestState": 5}, None,
     "requestState is int, not a string"),
    ("inputRequests not an object", "tools/call",
     {"resultType": "input_required", "requestState": "s", "inputRequests": ["q"]}, None,
     "inputRequests is not an object"),
    ("an input request of another kind", "tools/call", _asking({"method": "tools/call", "params": {}}), None,
     "input request 'q0' has method 'tools/call'; only elicitation/create, sampling/createMessage, roots/list"),
    ("an input request that is not an object", "tools/call",
     {"resultType": "input_required", "inputRequests": {"q": "name?"}}, None, "input request 'q' is not an object"),
    ("sampling not declared", "tools/call", _asking(SAMPLE), None,
     "input request 'q0' needs sampling, which this request did not declare in its clientCapabilities"),
    ("roots not declared", "prompts/get", _asking(ROOTS), None, "needs roots, which this request did not declare"),
    ("URL mode not declared", "tools/call", _asking(URL), {"elicitation": {}}, "needs elicitation.url"),
    ("form mode not declared", "resources/read", _asking(FORM), {"elicitation": {"url": {}}},
     "needs elicitation.form"),
    ("no elicitation at all", "tools/call", _asking(FORM), {}, "needs elicitation.form"),
    ("an elicitation without a message", "tools/call",
     _asking({"method": "elicitation/create", "params": {"requestedSchema": {}}}), None, "has no message"),
    ("a form without its schema", "tools/call",
     _asking({"method": "elicitation/create", "params": {"message": "?"}}), None, "has no requestedSchema object"),
    ("a URL request without its URL", "tools/call",
     _asking({"method": "elicitation/create", "params": {"mode": "url", "message": "?"}}), {"elicitation": {"url": {}}},
     "URL-mode elicitation 'q0' has no url"),
    ("an input request without params", "tools/call", _asking({"method": "sampling/createMessage"}),
     {"sampling": {}}, "has no params object"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "method", "result", "capabilities", "problem"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_result_is_a_protocol_violation(
    case: str, method: str, result: dict[str, Any], capabilities: dict[str, Any] | None, problem: str
) -> None:
    with pytest.raises(ProtocolViolation) as caught:
        _answer(_loop(method, capabilities), result)
    assert problem in str(caught.value)


WELL_FORMED: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    ("a tool result", "tools/call", {**TOOL_RESULT, "isError": True}, None),
    ("a tool result without resultType: complete", "tools/call", {"content": []}, None),
    ("a prompt without resultType: complete", "prompts/get", {"messages": []}, None),
    ("a resource without resultType: complete", "resources/read", {"contents": [], **CACHEABLE}, None),
    ("a list without resultType: complete", "tools/list", {"tools": [], **CACHEABLE}, None),
    ("a cacheable resource", "resources/read", {"resultType": "complete", "contents": [], **CACHEABLE}, None),
    ("a form: elicitation {} declares it, no mode means form", "tools/call", _asking(FORM), {"elicitation": {}}),
    ("a form declared by name", "tools/call", _asking(FORM), {"elicitation": {"form": {}}}),
    ("URL mode declared", "tools/call", _asking(URL), {"elicitation": {"url": {}}}),
    ("roots without params", "tools/call", _asking(ROOTS), {"roots": {}}),
    ("an empty requestState beside a question", "tools/call", {**_asking(FORM), "requestState": ""}, None),
    ("a method the client knows no shape for", "vendor/thing", {"resultType": "complete"}, None),
]


@pytest.mark.parametrize(("case", "method", "result", "capabilities"), WELL_FORMED, ids=[w[0] for w in WELL_FORMED])
def test_a_well_formed_result_is_read(
    case: str, method: str, result: dict[str, Any], capabilities: dict[str, Any] | None
) -> None:
    loop = _loop(method, capabilities)
    if result.get("resultType") == "input_required":
        assert type(_answer(loop, result)).__name__ == "Ask"  # the question goes to the input handler
        return
    with pytest.raises(StopIteration) as done:  # complete: the loop ends with the result
        _answer(loop, result)
    assert done.value.value.result == result


REPLIES: list[tuple[str, dict[str, Any], str]] = [
    ("a result for another request", {"jsonrpc": "2.0", "id": 99, "result": TOOL_RESULT},
     "result for request 99 in answer to request 1"),
    ("an error for another request", {"jsonrpc": "2.0", "id": 99, "error": {"code": -32602, "message": "m"}},
     "error for request 99 in answer to request 1"),
    ("not JSON-RPC 2.0", {"id": 1, "result": TOOL_RESULT}, "not JSON-RPC 2.0"),
    ("a result and an error", {"jsonrpc": "2.0", "id": 1, "result": TOOL_RESULT, "error": {"code": 1, "message": ""}},
     "has both a result and an error"),
    ("an error without a code", {"jsonrpc": "2.0", "id": 1, "error": {"message": "m"}},
     "error without an integer code"),
    ("an error with a text code", {"jsonrpc": "2.0", "id": 1, "error": {"code": "-32602", "message": "m"}},
     "error without an integer code"),
    ("an error without a message", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602}}, "error without a message"),
    ("an error that is not an object", {"jsonrpc": "2.0", "id": 1, "error": "bad"}, "error is not an object"),
]  # fmt: skip


def test_a_request_from_the_server_on_the_response_stream_is_a_protocol_violation() -> None:
    """The server asks through input_required; it MUST NOT send a JSON-RPC request on a stream."""
    loop = _loop("tools/call")
    send = next(loop)
    asking = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {"message": "?"}}
    final = {"jsonrpc": "2.0", "id": send.request_id, "result": TOOL_RESULT}
    body = f"data: {json.dumps(asking)}\n\ndata: {json.dumps(final)}\n\n".encode()
    with pytest.raises(ProtocolViolation, match="sent a request \\('elicitation/create'\\) on the response stream"):
        loop.send(Reply(200, {"content-type": "text/event-stream"}, body, 1.0))


@pytest.mark.parametrize(("case", "message", "problem"), REPLIES, ids=[r[0] for r in REPLIES])
def test_a_reply_that_does_not_answer_the_request_is_a_protocol_violation(
    case: str, message: dict[str, Any], problem: str
) -> None:
    loop = _loop("tools/call")
    send = next(loop)
    assert send.request_id == 1
    with pytest.raises(ProtocolViolation, match=problem):
        loop.send(_reply(message, 400 if "error" in message else 200))


# --- the tasks extension: creation, tasks/get, tasks/update, tasks/cancel ---------------------------------------


def _task(status: str, **extra: Any) -> dict[str, Any]:
    return wire_task("t-1", status, **extra)


TASK_READS: list[tuple[str, dict[str, Any], str]] = [
    ("tasks/get without resultType", {k: v for k, v in _task("working").items() if k != "resultType"},
     "tasks/get result without resultType"),
    ("tasks/get answering a task", _task("working", result_type="task"),
     "tasks/get result has resultType 'task'; it can only be 'complete'"),
    ("an inlined result without resultType (issue 21)", _task("completed", result={"content": []}),
     "task t-1 completed: tools/call result without resultType: only a 2026-07-28 server sends it"),
    ("an inlined result that is not complete", _task("completed", result={"resultType": "input_required"}),
     "task t-1 completed: tools/call result has resultType 'input_required'"),
    ("an inlined result without content", _task("completed", result={"resultType": "complete"}),
     "task t-1 completed: tools/call result: content must be an array"),
    ("completed without a result", _task("completed"), "task t-1 completed: result is not an object"),
    ("input_required without its requests", _task("input_required"),
     "task t-1 is input_required without an inputRequests object"),
    ("an undeclared question", _task("input_required", inputRequests={"s": SAMPLE}),
     "task t-1: input request 's' needs sampling, which this request did not declare"),
    ("failed without its error", _task("failed"), "task t-1 failed: error is not an object"),
    ("failed with an error without a code", _task("failed", error={"message": "broke"}),
     "task t-1 failed: error without an integer code"),
    ("no createdAt", {k: v for k, v in _task("working").items() if k != "createdAt"},
     "task t-1: createdAt must be a string"),
    ("no lastUpdatedAt", {k: v for k, v in _task("working").items() if k != "lastUpdatedAt"},
     "lastUpdatedAt must be a string"),
    ("no ttlMs", {k: v for k, v in _task("working").items() if k != "ttlMs"},
     "task t-1: ttlMs must be an integer or null ('missing')"),
    ("ttlMs as text", _task("working", ttlMs="1h"), "ttlMs must be an integer or null ('1h')"),
    ("pollIntervalMs as text", _task("working", pollIntervalMs="soon"), "pollIntervalMs must be an integer"),
    ("statusMessage not text", _task("working", statusMessage=3), "statusMessage must be a string"),
    ("an unknown status", _task("paused"), "task t-1 has unknown status 'paused'"),
]  # fmt: skip


def _following(*, capabilities: dict[str, Any] | None = None) -> Any:
    policy = TaskPolicy(push=False, default_poll_interval=0.01, min_poll_interval=0.01)
    return follow_task_loop("t-1", capabilities or {"elicitation": {}}, new_id_source(), RetryPolicy(), policy)


def _until_raised(loop: Any, step: Any, frames: list[dict[str, Any]] | None = None) -> None:
    """Drive a task loop on: stream reads get the next scripted frame, the cancel on the way out an empty ack,
    anything else nothing, until the loop raises."""
    while True:
        kind = type(step).__name__
        if kind == "ReadStream" and frames:
            step = loop.send(_frame(frames.pop(0)))
        elif kind == "Send":
            assert json.loads(step.body)["method"] == "tasks/cancel", step  # a failure while following cancels
            step = loop.send(_reply({"jsonrpc": "2.0", "id": step.request_id, "result": {"resultType": "complete"}}))
        else:
            step = loop.send(None)


@pytest.mark.parametrize(("case", "result", "problem"), TASK_READS, ids=[t[0] for t in TASK_READS])
def test_a_malformed_task_read_is_a_protocol_violation_and_the_task_is_cancelled(
    case: str, result: dict[str, Any], problem: str
) -> None:
    loop = _following()
    with pytest.raises(ProtocolViolation) as caught:
        _until_raised(loop, _answer(loop, result))
    assert problem in str(caught.value)


CREATIONS: list[tuple[str, dict[str, Any], str]] = [
    ("a creation without ttlMs", {k: v for k, v in _task("working", result_type="task").items() if k != "ttlMs"},
     "task t-1: ttlMs must be an integer or null"),
    ("a creation without taskId", {k: v for k, v in _task("working", result_type="task").items() if k != "taskId"},
     "task without a taskId"),
    ("a creation inlining a result without resultType", _task("completed", result_type="task", result={"content": []}),
     "task t-1 completed: tools/call result without resultType"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "result", "problem"), CREATIONS, ids=[c[0] for c in CREATIONS])
def test_a_malformed_creation_is_a_protocol_violation(case: str, result: dict[str, Any], problem: str) -> None:
    loop = task_call_loop("tools/call", {"name": "t"}, {}, new_id_source(), RetryPolicy(), TaskPolicy(push=False))
    with pytest.raises(ProtocolViolation, match=problem):
        _answer(loop, result)


# --- push: the listen's acknowledgement, its pushes and its completion ------------------------------------------


def _listen_loop() -> Any:
    """A task followed by push whose first poll says working: the loop is about to open a listen."""
    loop = follow_task_loop("t-1", {}, new_id_source(), RetryPolicy(), TaskPolicy(push=True))
    step = _answer(loop, _task("working"))
    while type(step).__name__ != "OpenStream":
        step = loop.send(None)
    return loop, step


def _frame(message: dict[str, Any]) -> Message:
    return Message({"jsonrpc": "2.0", **message}, 1.0)


ACK = {"method": SUBSCRIPTIONS_ACKNOWLEDGED, "params": {"notifications": {LISTEN_TASK_IDS: ["t-1"]}}}
PUSHES: list[tuple[str, list[dict[str, Any]], str]] = [
    ("a stream that does not begin with its acknowledgement", [{"method": "notifications/tasks", "params": {}}],
     "listen stream began with notifications/tasks, not notifications/subscriptions/acknowledged"),
    ("an acknowledgement without notifications", [{"method": SUBSCRIPTIONS_ACKNOWLEDGED, "params": {}}],
     "notifications/subscriptions/acknowledged without a params.notifications object"),
    ("an acknowledgement with taskIds not a list",
     [{"method": SUBSCRIPTIONS_ACKNOWLEDGED, "params": {"notifications": {LISTEN_TASK_IDS: "t-1"}}}],
     "taskIds must be an array of strings"),
    ("a push inlining a result without resultType (issue 21)",
     [ACK, {"method": "notifications/tasks", "params": _task("completed", result={"content": []})}],
     "task t-1 completed: tools/call result without resultType"),
    ("a completion without resultType", [ACK, {"id": "LISTEN", "result": {"_meta": {}}}],
     "subscriptions/listen result without resultType"),
    ("a completion without its subscription id", [ACK, {"id": "LISTEN", "result": {"resultType": "complete"}}],
     "subscriptions/listen result: _meta must be an object (missing)"),
    ("a completion naming no subscription",
     [ACK, {"id": "LISTEN", "result": {"resultType": "complete", "_meta": {}}}],
     f"_meta has no {SUBSCRIPTION_ID_META_KEY}"),
    ("a listen ended by a malformed error", [ACK, {"id": "LISTEN", "error": {"code": "x"}}],
     "error without an integer code"),
    ("a request on the listen stream", [ACK, {"id": 5, "method": "roots/list"}],
     "the server sent a request ('roots/list') on a listen stream; it MUST NOT"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "frames", "problem"), PUSHES, ids=[p[0] for p in PUSHES])
def test_a_malformed_listen_stream_is_a_protocol_violation(
    case: str, frames: list[dict[str, Any]], problem: str
) -> None:
    loop, opening = _listen_loop()
    script = [json.loads(json.dumps(f).replace('"LISTEN"', str(opening.request_id))) for f in frames]
    with pytest.raises(ProtocolViolation) as caught:
        _until_raised(loop, loop.send(Opened("s", {}, 1.0)), script)
    assert problem in str(caught.value)


def test_a_keep_alive_before_the_acknowledgement_is_no_message() -> None:
    """The acknowledgement MUST be the first message; a comment line (a ping) is not one."""
    loop, _ = _listen_loop()
    step = loop.send(Opened("s", {}, 1.0))
    step = loop.send(KeepAlive(1.0))
    assert type(step).__name__ == "ReadStream"
    step = loop.send(_frame(ACK))
    while type(step).__name__ == "Observe":
        assert step.event.detail == "listening"
        step = loop.send(None)
    assert type(step).__name__ == "ReadStream"  # listening: waiting for the task's pushes


def test_a_well_formed_completion_ends_the_stream_and_the_task_is_polled() -> None:
    loop, opening = _listen_loop()
    meta = {SUBSCRIPTION_ID_META_KEY: opening.request_id}
    frames = [ACK, {"id": opening.request_id, "result": {"resultType": "complete", "_meta": meta}}]
    step = loop.send(Opened("s", {}, 1.0))
    kinds = []
    while type(step).__name__ != "Send":
        kinds.append(type(step).__name__)
        step = loop.send(_frame(frames.pop(0)) if kinds[-1] == "ReadStream" else None)
    assert json.loads(step.body)["method"] == "tasks/get"
    assert "CloseStream" in kinds


# --- the public API: every method that reads a result -----------------------------------------------------------

Call = Callable[[Client], Any]
API: list[tuple[str, Call, dict[str, Any], str | None]] = [
    ("call_tool", lambda c: c.call_tool("echo", {"text": "x"}), {"content": []}, None),
    ("get_prompt", lambda c: c.get_prompt("p"), {"messages": []}, None),
    ("read_resource", lambda c: c.read_resource("x://y"), {"contents": [], **CACHEABLE}, None),
    ("list_tools", lambda c: c.list_tools(), {"tools": [], **CACHEABLE}, None),
    ("server/discover", lambda c: c.request("server/discover"),
     {"supportedVersions": [], "capabilities": {}, **CACHEABLE}, "server/discover result without resultType"),
    ("get_task", lambda c: c.get_task("t-1"), {k: v for k, v in _task("working").items() if k != "resultType"},
     "tasks/get result without resultType"),
    ("cancel_task", lambda c: c.cancel_task("t-1"), {}, "tasks/cancel result without resultType"),
    ("wait_task, a completed task", lambda c: c.wait_task("t-1"), _task("completed", result={"content": []}),
     "task t-1 completed: tools/call result without resultType"),
]  # fmt: skip
"""Each method of the client, given a result without resultType: read as complete where an earlier-version
server may answer (`problem` None), refused where only a 2026-07-28 server does."""


@pytest.mark.parametrize(("case", "call", "result", "problem"), API, ids=[a[0] for a in API])
def test_every_method_of_the_client_reads_a_result_without_result_type_as_the_wire_says(
    case: str, call: Call, result: dict[str, Any], problem: str | None
) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["method"] == "tasks/cancel" and case != "cancel_task":  # the cancel on the way out
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": {"resultType": "complete"}})
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})

    http = httpx.Client(transport=httpx.MockTransport(handle))
    client = Client("http://mcp.test/mcp", http=http, task_policy=TaskPolicy(push=False))
    with client:
        if problem is None:
            assert call(client) is not None
            return
        with pytest.raises(ProtocolViolation) as caught:
            call(client)
    assert problem in str(caught.value)
