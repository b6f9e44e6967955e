"""`McpUser`: a Locust user for any MCP server that speaks the 2026-07-28 wire (MRTR rounds, tasks).

Subclass it in a locustfile as you would Locust's `FastHttpUser`:

    from mrtr_locust import McpCall, McpUser

    class SdkServerUser(McpUser):
        calls = [
            McpCall("add_up", {"numbers": [1, 2, 3]}, weight=3, check=structured_is({"total": 6})),
            McpCall("greet", answers={"my_module:ask_name": {"name": "Ada"}}),
            McpCall("slow_report", task=True),
        ]

`locust -f that.py --host http://127.0.0.1:8000` (the MCP path, `/mcp` by default, is `mcp_path`).
Each task picks a call by weight and drives it to its end through `mrtr_client.Client`: every
`input_required` round answered (`answer_input`, else the call's `answers` by key, else the request's
schema defaults, a canned sampling answer, empty roots), a hand-back retried with its state, a task
followed (polled or pushed, answered, cancelled on stop). Locust's statistics get one `call` entry per
call (named by tool) and one entry per exchange, named by kind (`round:input_required`,
`round:hand_back`, `round:complete`, `round:error`, `task:create`, `task:poll`, `task:update`...).
A failed check, a JSON-RPC error (`JSON-RPC error <code>: ...`), a tool result with `isError`, or a
call that broke on the way is a failure of the `call` entry.

From plain data, in Locust's library mode (`locust.env.Environment(user_classes=[cls])`):
`McpUser.for_calls([McpCall.from_mapping(c) for c in scenario["call"]], host=..., on_record=records.append)`;
`on_record` gets an `McpCallRecord` per call (tool, arguments, rounds, answer, instances seen, error).
"""

from __future__ import annotations

import logging
import random
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx
from locust import User, task

from mrtr_client import CallResult, Client, RetryPolicy, RpcError, default_form_content, sampling_answer
from mrtr_locust.mcp_calls import SAMPLED_TEXT, TASK_PUSH, McpCall, McpCallRecord, check_calls, round_name
from mrtr_locust.recorder import RecordingTransport
from mrtr_locust.target import MissingHost, run_host
from mrtr_protocol import events
from mrtr_protocol.rounds import COMPLETE
from mrtr_protocol.tasks import TASK_RESULT_TYPE
from mrtr_protocol.wire import METHOD_HEADER

HTTP_TIMEOUT = httpx.Timeout(60.0, connect=5.0)


class CallFailed(Exception):
    """A call's failure as Locust shows it: the message is the failure's name in the statistics."""


class ExchangeTransport(RecordingTransport):
    """Notes each exchange's MCP method beside the recorder's hop, and a tool call that became a task."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        super().__init__(inner)
        self.methods: list[str] = []
        self.created_task: set[int] = set()
        """Indexes of the exchanges whose reply was a `CreateTaskResult`."""

    def clear(self) -> None:
        super().clear()
        self.methods.clear()
        self.created_task.clear()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.methods.append(request.headers.get(METHOD_HEADER, ""))
        response = super().handle_request(request)
        if self.hops[-1].reason == COMPLETE and _is_task_creation(response):
            self.created_task.add(len(self.hops) - 1)
        return response


class CallInputs:
    """Answers the current call's input requests: the user's callback, the call's table, the schema's defaults."""

    def __init__(self, user: McpUser) -> None:
        self._user = user
        self.call: McpCall | None = None
        self.asked: list[str] = []
        self.asked_at: set[int] = set()
        """Indexes of the exchanges that asked questions (so an `input_required` with none is a hand-back)."""

    def capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}

    def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        assert self.call is not None, "an input request outside a call"
        self.asked.append(key)
        transport = self._user.transport
        if transport is not None and transport.hops:
            self.asked_at.add(len(transport.hops) - 1)
        given = self._user.answer_input(self.call, key, request)
        if given is not None:
            return dict(given)
        method, params = request.get("method"), request.get("params") or {}
        if method == "elicitation/create":
            scripted = self.call.answers.get(key)
            if isinstance(scripted, str):
                return {"action": scripted}
            if params.get("mode") == "url":
                return {"action": "decline"}  # no browser behind a load test
            content = scripted if scripted is not None else default_form_content(params.get("requestedSchema") or {})
            return {"action": "accept", "content": dict(content)}
        if method == "sampling/createMessage":
            return sampling_answer(SAMPLED_TEXT)
        if method == "roots/list":
            return {"roots": []}
        raise CallFailed(f"cannot answer input request {key!r} ({method})")


class McpUser(User):
    """A Locust user for any MCP server: weighted `calls`, every round driven, each call and round reported.

    Class attributes: `calls` (a sequence of `McpCall`), `mcp_path` (added to `--host`), `headers`,
    `bearer_token`, `retry_policy` (the client's; None for its default). Override `answer_input` to
    answer input requests yourself and `recorded` to see each call's `McpCallRecord`.
    """

    abstract = True
    calls: ClassVar[Sequence[McpCall]] = ()
    mcp_path: ClassVar[str] = "/mcp"
    headers: ClassVar[Mapping[str, str]] = {}
    bearer_token: ClassVar[str | None] = None
    retry_policy: ClassVar[RetryPolicy | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_calls(type(self).__name__, self.calls)
        self.inputs = CallInputs(self)
        self.transport: ExchangeTransport | None = None
        self._client: Client | None = None
        self._url: str | None = None
        self._weights = [call.weight for call in self.calls]
        # httpx logs every request at INFO: thousands of lines a minute that drown Locust's own output.
        logging.getLogger("httpx").setLevel(logging.WARNING)

    @classmethod
    def for_calls(
        cls,
        calls: Sequence[McpCall],
        *,
        host: str | None = None,
        mcp_path: str = "/mcp",
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        retry_policy: RetryPolicy | None = None,
        on_record: Callable[[McpCallRecord], None] | None = None,
        name: str = "ScenarioUser",
    ) -> type[McpUser]:
        """A concrete subclass from plain data (library mode, a scenario file); `on_record` sees every call."""
        check_calls(name, calls)

        def recorded(self: McpUser, record: McpCallRecord) -> None:
            if on_record is not None:
                on_record(record)

        attributes = {
            "abstract": False,
            "calls": tuple(calls),
            "host": host,
            "mcp_path": mcp_path,
            "headers": dict(headers or {}),
            "bearer_token": bearer_token,
            "retry_policy": retry_policy,
            "recorded": recorded,
        }
        return types.new_class(name, (cls,), exec_body=lambda namespace: namespace.update(attributes))

    def answer_input(self, call: McpCall, key: str, request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The answer (`InputResponse`) to one input request, or None for the call's table and the defaults."""
        return None

    def recorded(self, record: McpCallRecord) -> None:
        """Called after every call with what it did (nothing by default)."""

    def on_stop(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._url = None

    def _mcp(self) -> Client:
        """The client for this run's host (a new one when a new run changed the host; see `target`)."""
        host = run_host(self)
        if not host:
            raise MissingHost()
        url = host.rstrip("/") + self.mcp_path
        if self._client is None or url != self._url:
            self.on_stop()
            self.transport = ExchangeTransport(httpx.HTTPTransport())
            http = httpx.Client(transport=self.transport, timeout=HTTP_TIMEOUT)
            self._client = Client(
                url, self.inputs, policy=self.retry_policy, headers=self.headers, token=self.bearer_token, http=http
            )
            self._url = url
        return self._client

    @task
    def call_one(self) -> None:
        """One call, picked by weight."""
        self.run_call(random.choices(self.calls, weights=self._weights)[0])

    def run_call(self, call: McpCall) -> McpCallRecord:
        """Drive `call` to its end, report it and its rounds to Locust, and hand its record to `recorded`."""
        if self.transport is not None:
            self.transport.clear()
        self.inputs.call, self.inputs.asked, self.inputs.asked_at = call, [], set()
        started = time.perf_counter()
        done: CallResult | None = None
        error: str | None = None
        code: int | None = None
        message: str | None = None
        try:
            done = self._mcp().call_tool(call.tool, call.arguments, task=call.task)
        except RpcError as exc:
            error, code, message = f"JSON-RPC error {exc.code}: {exc.message}", exc.code, exc.message
        except Exception as exc:  # anything else that broke the call is a lost call, named
            error = f"{type(exc).__name__}: {exc}"
        if done is not None:
            error = _judge(call, done)
        elapsed_ms = (time.perf_counter() - started) * 1000
        record = self._record(call, done, (error, code, message), elapsed_ms)
        self._report(call, record)
        self.recorded(record)
        return record

    def _record(
        self,
        call: McpCall,
        done: CallResult | None,
        failure: tuple[str | None, int | None, str | None],
        elapsed_ms: float,
    ) -> McpCallRecord:
        """The call's record; `failure`: why it failed, the JSON-RPC error's code and the server's message."""
        error, code, message = failure
        transport = self.transport
        hops = list(transport.hops) if transport is not None else []
        methods = list(transport.methods) if transport is not None else []
        created = transport.created_task if transport is not None else set()
        rounds = [
            "task:create" if i in created else round_name(method, hop.reason, i in self.inputs.asked_at)
            for i, (method, hop) in enumerate(zip(methods, hops, strict=True))
        ]
        round_ms = [hop.ms for hop in hops]
        pushes = done.trace.pushes if done is not None else []
        rounds += [TASK_PUSH] * len(pushes)
        round_ms += [push.waited_s * 1000 for push in pushes]
        instances = list(dict.fromkeys(hop.instance for hop in hops if hop.instance is not None))
        versions = list(dict.fromkeys(hop.version for hop in hops if hop.version is not None))
        answered = [hop.version for hop in hops if hop.status is not None]
        return McpCallRecord(
            tool=call.tool,
            name=call.label,
            arguments=call.arguments,
            task=call.task,
            rounds=rounds,
            round_ms=round_ms,
            questions=list(self.inputs.asked),
            instances=instances,
            result=done,
            error=error,
            error_code=code,
            elapsed_ms=elapsed_ms,
            error_message=message,
            versions=versions,
            last_version=answered[-1] if answered else None,
        )

    def _report(self, call: McpCall, record: McpCallRecord) -> None:
        fire = self.environment.events.request.fire
        for kind, ms in zip(record.rounds, record.round_ms, strict=True):
            fire(request_type=kind.split(":")[0], name=kind, response_time=ms, response_length=0, exception=None)
        fire(
            request_type="call",
            name=call.label,
            response_time=record.elapsed_ms,
            response_length=self.transport.received_bytes if self.transport is not None else 0,
            exception=None if record.error is None else CallFailed(record.error),
            context={"instances": record.instances},
        )


def _judge(call: McpCall, done: CallResult) -> str | None:
    """Why a complete answer is a failure: a tool error, or the call's check (a message or what it raised)."""
    if done.is_error:
        return f"tool error: {done.text[:200]}"
    if call.check is None:
        return None
    try:
        return call.check(done)
    except Exception as exc:  # a check that raised: its message is the failure
        return f"check failed: {type(exc).__name__}: {exc}"


def _is_task_creation(response: httpx.Response) -> bool:
    try:
        message = events.response(response.headers.get("content-type", ""), response.content)
    except (ValueError, httpx.ResponseNotRead):
        return False
    result = None if message is None else message.get("result")
    return isinstance(result, dict) and result.get("resultType") == TASK_RESULT_TYPE
