"""The client's task loop, driven step by step with scripted replies (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from mrtr_client import (
    ProtocolViolation,
    RetryPolicy,
    RpcError,
    TaskCancelled,
    TaskFailed,
    TaskPolicy,
    TaskWaitExceeded,
)
from mrtr_client._loop import Ask, Failure, Observe, Reply, Send, Sleep, new_id_source
from mrtr_client._tasks import follow_task_loop, task_call_loop, task_request_loop
from mrtr_client.trace import CallResult, TaskExchange
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.tasks import EXTENSION_ID

TASK_ID = "tsk_0f3c9a"
STAMP = "2026-11-30T20:00:00Z"
FORM = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}


def task(status: str, **extra: Any) -> dict[str, Any]:
    """A task on the wire (`tasks/get` result), in the released extension's flat shape."""
    return {
        "resultType": "complete",
        "taskId": TASK_ID,
        "status": status,
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": 60_000,
        **extra,
    }


def created(status: str = "working", **extra: Any) -> dict[str, Any]:
    return {**task(status, **extra), "resultType": "task"}


def reply(request_id: int, result: dict[str, Any] | None = None, *, error: Any = None, worker: str = "w1") -> Reply:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    headers = {"content-type": "application/json", WORKER_ID_HEADER.lower(): worker, WORKER_VERSION_HEADER.lower(): "1"}
    return Reply(400 if error is not None else 200, headers, json.dumps(message).encode(), 2.0)


class Driver:
    """Runs a task loop: collects what it observes, checks what it sends."""

    def __init__(
        self,
        *,
        task_policy: TaskPolicy | None = None,
        policy: RetryPolicy | None = None,
        capabilities: dict[str, Any] | None = None,
        follow: str | None = None,
    ) -> None:
        tp = task_policy or TaskPolicy(default_poll_interval=0.5, push=False)  # polling; push: test_tasks_push.py
        ids = new_id_source()
        if follow is not None:
            self.loop = follow_task_loop(follow, capabilities or {}, ids, policy or RetryPolicy(), tp)
        else:
            params = {"name": "count_primes", "arguments": {"limit": 10}}
            caps = capabilities if capabilities is not None else {"elicitation": {}}
            self.loop = task_call_loop("tools/call", params, caps, ids, policy or RetryPolicy(), tp)
        self.observed: list[TaskExchange] = []
        self.sent: list[Send] = []
        self.result: CallResult | None = None
        self.step: Any = None
        self._advance(lambda: next(self.loop))

    def _advance(self, move: Any) -> None:
        try:
            self.step = move()
            while isinstance(self.step, Observe):
                self.observed.append(self.step.event)
                self.step = self.loop.send(None)
        except StopIteration as done:
            self.result = done.value
            self.step = None

    def send(self, value: Any) -> None:
        self._advance(lambda: self.loop.send(value))

    def throw(self, exc: BaseException) -> None:
        self._advance(lambda: self.loop.throw(exc))

    def expect_send(self, method: str) -> dict[str, Any]:
        assert isinstance(self.step, Send), self.step
        body: dict[str, Any] = json.loads(self.step.body)
        assert body["method"] == method, body
        assert self.step.headers["Mcp-Method"] == method
        self.sent.append(self.step)
        return body

    def expect_sleep(self) -> float:
        assert isinstance(self.step, Sleep), self.step
        seconds = self.step.seconds
        self.send(None)
        return seconds

    def answer(self, method: str, result: dict[str, Any], worker: str = "w1") -> dict[str, Any]:
        body = self.expect_send(method)
        self.send(reply(body["id"], result, worker=worker))
        return body

    def answer_error(self, method: str, error: dict[str, Any]) -> dict[str, Any]:
        body = self.expect_send(method)
        self.send(reply(body["id"], error=error))
        return body


def test_a_call_as_a_task_declares_the_extension_polls_and_returns_the_result() -> None:
    d = Driver()
    call = d.answer("tools/call", created(pollIntervalMs=200))
    caps = call["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]
    assert caps == {"elicitation": {}, "extensions": {EXTENSION_ID: {}}}
    assert d.sent[0].headers["Mcp-Name"] == "count_primes"
    assert d.expect_sleep() == pytest.approx(0.2)
    poll = d.answer("tasks/get", task("working", pollIntervalMs=200, statusMessage="slice 1 on w2"), worker="w2")
    assert poll["params"]["taskId"] == TASK_ID
    assert d.sent[-1].headers["Mcp-Name"] == TASK_ID
    assert poll["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]["extensions"] == {EXTENSION_ID: {}}
    assert "requestState" not in poll["params"]
    d.expect_sleep()
    outcome = {"resultType": "complete", "content": [{"type": "text", "text": "4"}], "structuredContent": {"count": 4}}
    d.answer("tasks/get", task("completed", result=outcome), worker="w3")
    assert d.result is not None
    assert d.result.result == outcome
    assert d.result.task_id == TASK_ID
    assert d.result.structured == {"count": 4}
    trace = d.result.trace
    assert [hop.reason for hop in trace.hops] == ["task"]
    assert [(p.status, p.instance) for p in trace.polls] == [("working", "w2"), ("completed", "w3")]
    assert trace.polls[0].snapshot is not None
    assert trace.polls[0].snapshot.status_message == "slice 1 on w2"
    assert trace.instances == ["w1", "w2", "w3"]
    assert [(x.method, x.status) for x in d.observed] == [
        ("tools/call", "working"),
        ("tasks/get", "working"),
        ("tasks/get", "completed"),
    ]
    assert len({json.loads(s.body)["id"] for s in d.sent}) == len(d.sent)


def test_a_server_that_answers_at_once_gives_the_result_without_a_task() -> None:
    d = Driver()
    d.answer("tools/call", {"resultType": "complete", "content": [{"type": "text", "text": "4"}]})
    assert d.result is not None
    assert d.result.text == "4"
    assert d.result.task_id is None
    assert d.result.trace.polls == []
    assert d.observed == []


def test_mrtr_rounds_come_first_then_the_task() -> None:
    d = Driver()
    d.answer("tools/call", {"resultType": "input_required", "inputRequests": {"name": FORM}, "requestState": "s1"})
    assert isinstance(d.step, Ask)
    d.send({"name": {"action": "accept", "content": {"name": "Alice"}}})
    retry = d.answer("tools/call", created())
    assert retry["params"]["requestState"] == "s1"
    assert retry["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]["extensions"] == {EXTENSION_ID: {}}
    d.expect_sleep()
    d.answer(
        "tasks/get",
        task("completed", result={"resultType": "complete", "content": [{"type": "text", "text": "Hello, Alice"}]}),
    )
    assert d.result is not None
    assert d.result.text == "Hello, Alice"
    assert [hop.reason for hop in d.result.trace.hops] == ["input", "task"]


@pytest.mark.parametrize(
    ("hint_ms", "expected"),
    [(250, 0.25), (None, 0.5), (0, 0.5), (10, 0.05), (600_000, 5.0)],
)
def test_the_poll_interval_is_the_servers_within_bounds(hint_ms: int | None, expected: float) -> None:
    d = Driver()
    extra: dict[str, Any] = {} if hint_ms is None else {"pollIntervalMs": hint_ms}
    d.answer("tools/call", created(**extra))
    assert d.expect_sleep() == pytest.approx(expected)


def test_the_latest_poll_interval_wins() -> None:
    d = Driver()
    d.answer("tools/call", created(pollIntervalMs=100))
    assert d.expect_sleep() == pytest.approx(0.1)
    d.answer("tasks/get", task("working", pollIntervalMs=900))
    assert d.expect_sleep() == pytest.approx(0.9)


def test_the_overall_wait_is_bounded_and_the_task_is_left_running() -> None:
    d = Driver(task_policy=TaskPolicy(max_wait=1.0, push=False))
    d.answer("tools/call", created(pollIntervalMs=400))
    d.expect_sleep()
    d.answer("tasks/get", task("working", pollIntervalMs=400))
    d.expect_sleep()
    with pytest.raises(TaskWaitExceeded) as caught:
        d.answer("tasks/get", task("working", pollIntervalMs=400))
    assert caught.value.task_id == TASK_ID
    assert caught.value.status == "working"
    assert 0.8 <= caught.value.waited_s <= 1.0
    assert [json.loads(s.body)["method"] for s in d.sent].count("tasks/cancel") == 0


def test_an_input_required_task_is_answered_once_through_the_input_handler() -> None:
    d = Driver()
    d.answer("tools/call", created(pollIntervalMs=100))
    d.expect_sleep()
    d.answer("tasks/get", task("input_required", inputRequests={"refine": FORM}))
    assert isinstance(d.step, Ask)
    assert list(d.step.requests) == ["refine"]
    d.send({"refine": {"action": "accept", "content": {"digits": 6}}})
    update = d.answer("tasks/update", {"resultType": "complete"})
    assert update["params"]["taskId"] == TASK_ID
    assert update["params"]["inputResponses"] == {"refine": {"action": "accept", "content": {"digits": 6}}}
    assert "requestState" not in update["params"]
    assert d.sent[-1].headers["Mcp-Name"] == TASK_ID
    # read again at once; the server has not read the answer yet: the key is not answered twice
    d.answer("tasks/get", task("input_required", inputRequests={"refine": FORM}))
    assert isinstance(d.step, Sleep)
    d.expect_sleep()
    d.answer("tasks/get", task("working"))
    d.expect_sleep()
    d.answer("tasks/get", task("completed", result={"resultType": "complete", "content": []}))
    assert d.result is not None
    assert [q.key for q in d.result.trace.questions] == ["refine"]
    methods = [json.loads(s.body)["method"] for s in d.sent]
    assert methods.count("tasks/update") == 1
    assert [x.detail for x in d.observed if x.method == "tasks/update"] == ["answered refine"]


def test_partial_sets_and_new_keys_are_answered_without_repeating_a_key() -> None:
    d = Driver()
    d.answer("tools/call", created(status="input_required", inputRequests={"a": FORM}))
    assert isinstance(d.step, Ask)
    assert list(d.step.requests) == ["a"]
    d.send({"a": {"action": "accept", "content": {}}})
    d.answer("tasks/update", {"resultType": "complete"})
    d.answer("tasks/get", task("input_required", inputRequests={"a": FORM, "b": FORM}))
    assert isinstance(d.step, Ask)
    assert list(d.step.requests) == ["b"]
    d.send({"b": {"action": "decline"}})
    second = d.answer("tasks/update", {"resultType": "complete"})
    assert list(second["params"]["inputResponses"]) == ["b"]
    d.answer("tasks/get", task("input_required", inputRequests={"b": FORM, "c": FORM}))
    assert isinstance(d.step, Ask)
    assert list(d.step.requests) == ["c"]
    d.send({"c": {"action": "accept", "content": {}}})
    d.answer("tasks/update", {"resultType": "complete"})
    d.answer("tasks/get", task("completed", result={"resultType": "complete", "content": []}))
    assert d.result is not None
    assert [q.key for q in d.result.trace.questions] == ["a", "b", "c"]
    assert d.result.trace.reasked == []


def test_a_tool_error_in_a_completed_task_stays_a_result() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    outcome = {"resultType": "complete", "content": [{"type": "text", "text": "boom"}], "isError": True}
    d.answer("tasks/get", task("completed", result=outcome))
    assert d.result is not None
    assert d.result.is_error
    assert d.result.text == "boom"


def test_a_failed_task_raises_its_json_rpc_error() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    with pytest.raises(TaskFailed) as caught:
        d.answer("tasks/get", task("failed", error={"code": -32603, "message": "it broke", "data": {"at": 3}}))
    assert isinstance(caught.value, RpcError)
    assert (caught.value.task_id, caught.value.code, caught.value.message) == (TASK_ID, -32603, "it broke")
    assert caught.value.data == {"at": 3}


def test_a_cancelled_task_raises_task_cancelled() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    with pytest.raises(TaskCancelled, match="cancelled: stopped by admin"):
        d.answer("tasks/get", task("cancelled", statusMessage="stopped by admin"))


def test_a_task_already_complete_at_creation_needs_no_poll() -> None:
    d = Driver()
    d.answer("tools/call", created(status="completed", result={"resultType": "complete", "content": []}))
    assert d.result is not None
    assert d.result.trace.polls == []


def test_a_task_created_complete_without_its_result_is_read_once_for_it() -> None:
    """A `CreateTaskResult` is a `Task`: it inlines no result, so a task created terminal is read with tasks/get."""
    d = Driver()
    d.answer("tools/call", created(status="completed"))
    assert d.result is None
    d.answer("tasks/get", task("completed", result={"resultType": "complete", "content": []}))
    assert d.result is not None
    assert [poll.status for poll in d.result.trace.polls] == ["completed"]


def _sent_methods(d: Driver) -> list[str]:
    return [json.loads(s.body)["method"] for s in d.sent]


def test_an_interrupt_while_waiting_cancels_the_task_then_goes_on() -> None:
    d = Driver()
    d.answer("tools/call", created())
    assert isinstance(d.step, Sleep)
    d.throw(KeyboardInterrupt())
    cancel = d.expect_send("tasks/cancel")
    assert cancel["params"]["taskId"] == TASK_ID
    assert d.sent[-1].headers["Mcp-Name"] == TASK_ID
    assert d.sent[-1].timeout == TaskPolicy().cancel_timeout
    with pytest.raises(KeyboardInterrupt):
        d.send(reply(cancel["id"], {"resultType": "complete"}))
    assert [(x.method, x.detail) for x in d.observed][-1] == ("tasks/cancel", "acknowledged")


def test_an_interrupt_during_a_poll_cancels_the_task() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    d.expect_send("tasks/get")
    d.throw(KeyboardInterrupt())
    cancel = d.expect_send("tasks/cancel")
    with pytest.raises(KeyboardInterrupt):
        d.send(reply(cancel["id"], {"resultType": "complete"}))


def test_a_failing_input_handler_cancels_the_task() -> None:
    d = Driver()
    d.answer("tools/call", created(status="input_required", inputRequests={"a": FORM}))
    assert isinstance(d.step, Ask)
    d.throw(ValueError("not a number"))
    cancel = d.expect_send("tasks/cancel")
    with pytest.raises(ValueError, match="not a number"):
        d.send(reply(cancel["id"], {"resultType": "complete"}))


def test_a_cancel_that_fails_on_the_way_out_does_not_hide_the_interrupt() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.throw(KeyboardInterrupt())
    d.expect_send("tasks/cancel")
    d.send(Failure("ConnectError", 1.0))
    d.expect_sleep()
    d.expect_send("tasks/cancel")
    with pytest.raises(KeyboardInterrupt):
        d.send(Failure("ConnectError", 1.0))
    assert d.observed[-1].method == "tasks/cancel"
    assert d.observed[-1].detail is not None
    assert "gave up" in d.observed[-1].detail


def test_an_interrupt_before_the_task_exists_cancels_nothing() -> None:
    d = Driver()
    d.expect_send("tools/call")
    with pytest.raises(KeyboardInterrupt):
        d.throw(KeyboardInterrupt())
    assert _sent_methods(d) == ["tools/call"]


def test_a_servers_refusal_of_a_poll_is_raised_without_a_cancel() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    with pytest.raises(RpcError) as caught:
        d.answer_error("tasks/get", {"code": -32602, "message": "unknown task"})
    assert caught.value.code == -32602
    assert _sent_methods(d) == ["tools/call", "tasks/get"]


def test_an_unknown_status_is_a_protocol_violation_and_the_task_is_cancelled() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    d.answer("tasks/get", task("submitted"))
    cancel = d.expect_send("tasks/cancel")
    with pytest.raises(ProtocolViolation, match="unknown status 'submitted'"):
        d.send(reply(cancel["id"], {"resultType": "complete"}))


def test_another_tasks_answer_is_a_protocol_violation() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    d.answer("tasks/get", {**task("working"), "taskId": "someone-else"})
    cancel = d.expect_send("tasks/cancel")
    with pytest.raises(ProtocolViolation, match="got someone-else"):
        d.send(reply(cancel["id"], {"resultType": "complete"}))


def test_an_undelivered_poll_is_sent_again_and_recorded() -> None:
    d = Driver()
    d.answer("tools/call", created())
    d.expect_sleep()
    d.expect_send("tasks/get")
    d.send(Failure("ReadTimeout", 5.0))
    assert d.expect_sleep() == RetryPolicy().backoff_initial
    d.answer("tasks/get", task("completed", result={"resultType": "complete", "content": []}), worker="w2")
    assert d.result is not None
    exchanges = d.result.trace.task_exchanges
    assert [(x.method, x.detail) for x in exchanges][1:] == [("tasks/get", "ReadTimeout"), ("tasks/get", None)]
    assert [p.status for p in d.result.trace.polls] == [None, "completed"]


def test_an_existing_task_is_followed_by_the_same_rules() -> None:
    d = Driver(follow=TASK_ID, capabilities={"elicitation": {}})
    first = d.answer("tasks/get", task("input_required", inputRequests={"a": FORM}))
    assert first["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]["extensions"] == {EXTENSION_ID: {}}
    assert isinstance(d.step, Ask)
    d.send({"a": {"action": "accept", "content": {}}})
    d.answer("tasks/update", {"resultType": "complete"})
    d.answer("tasks/get", task("completed", result={"resultType": "complete", "content": []}))
    assert d.result is not None
    assert d.result.task_id == TASK_ID


def test_get_and_cancel_are_single_requests_naming_the_task() -> None:
    get = task_request_loop("tasks/get", TASK_ID, {}, new_id_source(), RetryPolicy())
    send = next(get)
    assert isinstance(send, Send)
    assert send.headers["Mcp-Name"] == TASK_ID
    step = get.send(reply(json.loads(send.body)["id"], task("working", statusMessage="slice 2"), worker="w7"))
    assert isinstance(step, Observe)
    with pytest.raises(StopIteration) as done:
        get.send(None)
    snapshot = done.value.value
    assert (snapshot.status, snapshot.status_message, snapshot.instance, snapshot.ttl_ms) == (
        "working",
        "slice 2",
        "w7",
        60_000,
    )
    cancel = task_request_loop("tasks/cancel", TASK_ID, {}, new_id_source(), RetryPolicy())
    send = next(cancel)
    assert isinstance(send, Send)
    assert json.loads(send.body)["params"]["taskId"] == TASK_ID
    assert isinstance(cancel.send(reply(json.loads(send.body)["id"], {"resultType": "complete"})), Observe)
    with pytest.raises(StopIteration) as acked:
        cancel.send(None)
    assert acked.value.value is None
