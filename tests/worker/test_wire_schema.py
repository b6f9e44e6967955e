"""Every kind of answer the fleet emits, recorded on the wire and validated against the official schemas.

One worker serves every pack (the built-in ones, the chaos pack's toxic tasks, and the example plugin
`collatz` from `examples/`) with Redis (tasks, the vault) and the development issuer, with a short time
slice (so computations hand back). The walk lists what the worker serves and calls each tool (as a plain
call, and declaring the tasks extension, its tasks followed by polls and then by push), each prompt and
each resource and template, answering every question; then the scenarios that need a particular state
(a cancelled task, a listen's pushes and completion, list changes, progress) and every error a client can
provoke. Every JSON-RPC message of every reply is recorded as it is read (`tests.support.recording`) and
validated (`tests.support.schema`): each against the wire's definition, a task answer against the tasks
extension's, and a completed task's inlined result against the wire's `CallToolResult` too.

`KINDS` is the table of kinds the fleet emits; a test fails when one is not recorded (the walk lost it)
and when a recorded one is not in the table (the fleet emits something new: add it here).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from mrtr_client import CallResult, Client, MrtrError, ProtocolViolation, ScriptedInputs, TaskPolicy
from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_protocol import events
from mrtr_protocol.tasks import EXTENSION_ID, LISTEN_TASK_IDS, SUBSCRIPTIONS_LISTEN, TASKS_NOTIFICATION
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.conftest import StartWorker
from tests.support import schema
from tests.support.packs import prompt_arguments, template_uri, template_variable, tool_arguments
from tests.support.recording import Recorded, RecordingTransport

EVERYTHING: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
    "extensions": {EXTENSION_ID: {}},
}

KINDS: dict[str, str] = {
    # Discovery and lists (cacheable results).
    "server/discover complete": "server/discover",
    "tools/list complete": "tools/list",
    "prompts/list complete": "prompts/list",
    "resources/list complete": "resources/list",
    "resources/templates/list complete": "resources/templates/list",
    "completion/complete complete": "completion/complete of a prompt argument and of a template variable",
    # MRTR rounds and results.
    "tools/call complete": "a tool's result",
    "tools/call complete isError": "a tool error (test_error_handling, a declined login, an unknown tool)",
    "tools/call input_required": "a tool asks, or hands its computation back",
    "tools/call hand-back": "input_required with requestState and no questions (a computation's time slice)",
    "prompts/get complete": "a prompt",
    "prompts/get input_required": "a prompt asks first (onboarding)",
    "resources/read complete": "a resource or a template's resource",
    "resources/read input_required": "a resource asks first (mrtr://reports/{id})",
    "asks elicitation form": "an inputRequests entry: form elicitation",
    "asks elicitation url": "an inputRequests entry: URL-mode elicitation (connect_vault)",
    "asks sampling": "an inputRequests entry: sampling/createMessage",
    "asks roots": "an inputRequests entry: roots/list",
    # The tasks extension.
    "tools/call task": "CreateTaskResult",
    "tasks/get working": "GetTaskResult, working",
    "tasks/get input_required": "GetTaskResult, input_required with its inputRequests",
    "tasks/get completed": "GetTaskResult, completed with the tool's result inlined",
    "tasks/get completed isError": "GetTaskResult, completed with a tool error inlined",
    "tasks/get failed": "GetTaskResult, failed with its JSON-RPC error",
    "tasks/get cancelled": "GetTaskResult, cancelled",
    "tasks/update ack": "UpdateTaskResult",
    "tasks/cancel ack": "CancelTaskResult",
    "push working": "notifications/tasks, working",
    "push input_required": "notifications/tasks, input_required",
    "push completed": "notifications/tasks, completed",
    "push completed isError": "notifications/tasks, completed with a tool error",
    "push failed": "notifications/tasks, failed",
    "push cancelled": "notifications/tasks, cancelled",
    "listen acknowledgement": "notifications/subscriptions/acknowledged, the first frame of every listen",
    "listen completion": "the listen's own result once every task it watches has ended",
    # Notifications on a call's or a listen's stream.
    "notifications/progress": "test_tool_with_progress, given a progressToken",
    "notifications/tools/list_changed": "test_trigger_tool_change, to a listen asking toolsListChanged",
    "notifications/prompts/list_changed": "test_trigger_prompt_change, to a listen asking promptsListChanged",
    # Errors.
    "error -32700": "a body that is not JSON",
    "error -32600": "a body that is not a request",
    "error -32601": "an unknown or removed method",
    "error -32602": "bad params: no _meta, an unknown prompt or resource or task, a tampered state, bad answers",
    "error -32020": "a header that disagrees with the body",
    "error -32021": "a capability the request did not declare (the tasks extension included)",
    "error -32022": "a 2025-era protocol version",
}


def kinds_of(rec: Recorded) -> set[str]:
    """The kinds one recorded message is an example of."""
    message: Mapping[str, Any] = rec.message
    if "method" in message and "id" not in message:
        name = str(message["method"])
        if name == TASKS_NOTIFICATION:
            return {"push " + _task_kind(message["params"])}
        if name == schema.ACKNOWLEDGED:
            return {"listen acknowledgement"}
        return {name}
    if "error" in message:
        return {f"error {message['error'].get('code')}"}
    result: Mapping[str, Any] = message.get("result") or {}
    if rec.method == SUBSCRIPTIONS_LISTEN:
        return {"listen completion"}
    if rec.method == "tasks/get":
        return {"tasks/get " + _task_kind(result)}
    if rec.method in ("tasks/update", "tasks/cancel"):
        return {f"{rec.method} ack"}
    result_type = result.get("resultType")
    if result_type == "input_required":
        requests: Mapping[str, Any] = result.get("inputRequests") or {}
        kinds = {f"{rec.method} input_required", *(f"asks {_input_kind(r)}" for r in requests.values())}
        if not requests:
            kinds.add(f"{rec.method} hand-back")
        return kinds
    if result_type == "task":
        return {"tools/call task"}
    return {f"{rec.method} {result_type}" + (" isError" if result.get("isError") else "")}


def _task_kind(task: Mapping[str, Any]) -> str:
    error = task.get("status") == "completed" and (task.get("result") or {}).get("isError")
    return str(task.get("status")) + (" isError" if error else "")


def _input_kind(request: Mapping[str, Any]) -> str:
    if request.get("method") == "elicitation/create":
        return "elicitation " + str((request.get("params") or {}).get("mode", "form"))
    return {"sampling/createMessage": "sampling", "roots/list": "roots"}.get(str(request.get("method")), "?")


# --- the walk ----------------------------------------------------------------------------------------


@dataclass
class Walk:
    recorded: list[Recorded]
    listed: dict[str, list[str]]
    """What the worker listed: tool names, prompt names, resource URIs and templates."""
    violations: list[str]
    """Calls our own client refused as a protocol violation (it must agree with the schemas)."""


class Raw:
    """Sends exactly the bytes meant, bad ones included, on the recording transport; reads whole replies."""

    def __init__(self, url: str, transport: RecordingTransport, token: str) -> None:
        self.url, self.token = url, token
        self.http = httpx.Client(transport=transport, timeout=30)
        self.listening: list[dict[str, Any]] = []
        """The frames of the listen being read (another thread may watch them arrive)."""

    def send(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        response = self.http.post(self.url, content=body, headers={**headers, "Authorization": f"Bearer {self.token}"})
        found = events.response(response.headers.get("content-type", ""), response.content)
        return found or {}

    def call(
        self,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any] = EVERYTHING,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        full = {**params}
        full.setdefault("_meta", request_meta(capabilities))
        body = encode_request(secrets.randbelow(1 << 30), method, full)
        return self.send(body, request_headers(method, full, headers))

    def listen(
        self, notifications: Mapping[str, Any], done: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        """A listen read frame by frame (each appended as it comes), closed once `done` or when the server ends it."""
        params = {"notifications": dict(notifications), "_meta": request_meta(EVERYTHING)}
        body = encode_request(secrets.randbelow(1 << 30), SUBSCRIPTIONS_LISTEN, params)
        headers = {**request_headers(SUBSCRIPTIONS_LISTEN, params), "Authorization": f"Bearer {self.token}"}
        frames: list[dict[str, Any]] = []
        self.listening = frames
        with self.http.stream("POST", self.url, content=body, headers=headers) as response:
            data: list[str] = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    frames.append(json.loads("\n".join(data)))
                    data = []
                    if done(frames):
                        break
        return frames


def _inputs() -> ScriptedInputs:
    # A URL request is declined: accepting claims a visit to a page nobody opened, and the tool asks again.
    return ScriptedInputs(sample=lambda params: "a sampled answer", roots=["file:///workspace"], url_action="decline")


def _client(url: str, transport: RecordingTransport, token: str, *, push: bool) -> Client:
    http = httpx.Client(transport=transport, timeout=60)
    policy = TaskPolicy(push=push, max_wait=60, min_poll_interval=0.05, max_poll_interval=0.5)
    return Client(url, _inputs(), token=token, http=http, task_policy=policy)


def _attempt(violations: list[str], what: str, call: Callable[..., CallResult], *args: Any, **kwargs: Any) -> Any:
    """One call of the walk: a refused call is fine (its answer is recorded), a protocol violation is noted."""
    try:
        return call(*args, **kwargs)
    except ProtocolViolation as exc:
        violations.append(f"{what}: {exc}")
    except MrtrError:
        pass
    return None


def _walk_packs(url: str, transport: RecordingTransport, token: str, walk: Walk) -> None:
    tried = walk.violations
    with _client(url, transport, token, push=False) as polls, _client(url, transport, token, push=True) as pushes:
        polls.request("server/discover")
        tools = polls.request("tools/list").result["tools"]
        prompts = polls.request("prompts/list").result["prompts"]
        resources = polls.request("resources/list").result["resources"]
        templates = polls.request("resources/templates/list").result["resourceTemplates"]
        walk.listed = {
            "tools/call": [t["name"] for t in tools],
            "prompts/get": [p["name"] for p in prompts],
            "resources/read": [r["uri"] for r in resources] + [template_uri(t["uriTemplate"]) for t in templates],
        }
        became_tasks = []
        for tool in tools:
            name, arguments = tool["name"], tool_arguments(tool.get("inputSchema", {}))
            _attempt(tried, name, polls.call_tool, name, arguments)
            done = _attempt(tried, f"{name} as a task", polls.call_tool, name, arguments, task=True)
            if done is None or done.task_id is not None:
                became_tasks.append((name, arguments))
        for name, arguments in became_tasks:  # again, its changes pushed on a listen
            _attempt(tried, f"{name} pushed", pushes.call_tool, name, arguments, task=True)
        for prompt in prompts:
            _attempt(tried, prompt["name"], polls.get_prompt, prompt["name"], prompt_arguments(prompt))
            for argument in (prompt.get("arguments") or [])[:1]:
                ref = {"type": "ref/prompt", "name": prompt["name"]}
                completion = {"ref": ref, "argument": {"name": argument["name"], "value": "p"}}
                _attempt(tried, "completion", polls.request, "completion/complete", completion)
        for uri in walk.listed["resources/read"]:
            _attempt(tried, uri, polls.read_resource, uri)
        for template in templates:
            variable = template_variable(template["uriTemplate"])
            if variable is not None:
                ref = {"type": "ref/resource", "uri": template["uriTemplate"]}
                completion = {"ref": ref, "argument": {"name": variable, "value": "1"}}
                _attempt(tried, "completion", polls.request, "completion/complete", completion)


def _hand_back(url: str, transport: RecordingTransport, token: str, walk: Walk) -> None:
    """A computation longer than the worker's time slice: handed back with its state, no questions."""
    with _client(url, transport, token, push=False) as client:
        arguments = {"limit": 3_000_000, "segment": 1_000}
        _attempt(walk.violations, "count_primes", client.call_tool, "count_primes", arguments)


def _task_states(raw: Raw) -> None:
    """A task watched by a listen from its first state to its cancel, then read once cancelled."""
    created = raw.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})["result"]
    task_id = created["taskId"]
    named = {"Mcp-Name": task_id}
    raw.call("tasks/get", {"taskId": task_id}, headers=named)
    frames = raw.listen({LISTEN_TASK_IDS: [task_id]}, lambda got: len(got) == 2)  # the ack, the current state
    assert frames[-1]["params"]["status"] == "working", frames
    raw.call("tasks/cancel", {"taskId": task_id}, headers=named)
    frames = raw.listen({LISTEN_TASK_IDS: [task_id]}, lambda got: False)  # until the server ends it: the task ended
    assert "result" in frames[-1], frames
    status = raw.call("tasks/get", {"taskId": task_id}, headers=named)["result"]["status"]
    assert status == "cancelled"


LIST_CHANGES = {"notifications/tools/list_changed": "test_trigger_tool_change"}
LIST_CHANGES["notifications/prompts/list_changed"] = "test_trigger_prompt_change"
"""Each list-change notification, and the conformance tool that triggers it."""


def _list_changes(raw: Raw) -> None:
    """A listen for list changes hears the conformance pack's triggers (read in a thread as they come)."""
    wanted = {"toolsListChanged": True, "promptsListChanged": True}

    def heard(frames: list[dict[str, Any]]) -> bool:
        return set(LIST_CHANGES) <= {str(f.get("method")) for f in frames}

    raw.listening = []
    listening = threading.Thread(target=raw.listen, args=(wanted, heard), daemon=True)
    listening.start()
    wait_until(lambda: bool(raw.listening), timeout=30, what="the listen's acknowledgement")
    for notification, trigger in LIST_CHANGES.items():
        raw.call("tools/call", {"name": trigger, "arguments": {}})
        wait_until(_heard(raw, notification), timeout=30, what=f"{notification} after {trigger}")
    listening.join(timeout=30)
    assert not listening.is_alive()


def _heard(raw: Raw, notification: str) -> Callable[[], bool]:
    return lambda: any(f.get("method") == notification for f in raw.listening)


def _progress(raw: Raw) -> None:
    meta = {**request_meta(EVERYTHING), "progressToken": "p-1"}
    raw.call("tools/call", {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta})


def _errors(raw: Raw) -> None:
    """Every error a client can provoke, one request each."""
    headers = request_headers("tools/list", {})
    raw.send(b'{"jsonrpc": "2.0", "id": 1, "meth', headers)  # -32700
    raw.send(b"[1, 2]", headers)  # -32600
    raw.call("no/such/method", {})  # -32601
    raw.call("initialize", {})  # -32601: removed
    body = encode_request(7, "tools/list", {})  # no _meta: -32602
    raw.send(body, headers)
    meta = {PROTOCOL_VERSION_META_KEY: "2025-11-25", CLIENT_CAPABILITIES_META_KEY: {}}
    raw.call("tools/list", {"_meta": meta}, headers={"MCP-Protocol-Version": "2025-11-25"})  # -32022
    raw.call("tools/call", {"name": "link_accounts", "arguments": {}}, headers={"Mcp-Name": "echo"})  # -32020
    raw.call("tools/call", {"name": "link_accounts", "arguments": {}}, capabilities={})  # -32021
    raw.call("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a"}}, capabilities={})  # -32021
    raw.call("tasks/get", {"taskId": "no-such-task"}, capabilities={}, headers={"Mcp-Name": "no-such-task"})
    raw.call("tasks/get", {"taskId": "no-such-task"}, headers={"Mcp-Name": "no-such-task"})  # -32602
    raw.call(SUBSCRIPTIONS_LISTEN, {"notifications": {LISTEN_TASK_IDS: "x"}})  # -32602
    raw.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    raw.call("tools/call", {"name": "count_primes", "arguments": {"limit": "lots"}})
    raw.call("prompts/get", {"name": "no_such_prompt"})
    raw.call("resources/read", {"uri": "mrtr://nothing/here"})
    raw.call("tools/call", {"name": "echo", "arguments": {"text": "x"}, "inputResponses": "not an object"})
    first = raw.call("tools/call", {"name": "test_input_required_result_tampered_state", "arguments": {}})
    state = first["result"]["requestState"]
    answers = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    tampered = {"inputResponses": answers, "requestState": state + "-TAMPERED"}
    raw.call("tools/call", {"name": "test_input_required_result_tampered_state", "arguments": {}, **tampered})


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def fleet_worker(start_worker: StartWorker, redis_server: RedisServer, issuer: tuple[DevIssuer, Path]) -> WorkerSpec:
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": "schema:",
        "MRTR_WORKER_PUBLIC_URL": "https://mrtr.example.com",
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
        "MRTR_WORKER_MAX_SLICE_MS": "20",  # a computation of 3,000 steps hands back, however fast the machine
        "MRTR_WORKER_MIN_SLICE_MS": "0",
    }
    return start_worker(tool_packs=("demo", "compute", "conformance", "chaos", "collatz"), env=env)[0]


@pytest.fixture(scope="module")
def walk(fleet_worker: WorkerSpec, issuer: tuple[DevIssuer, Path]) -> Iterator[Walk]:
    url, token = f"{fleet_worker.url}/mcp", issuer[0].mint("schema-walker")
    transport = RecordingTransport()
    found = Walk(transport.recorded, {}, [])
    _walk_packs(url, transport, token, found)
    _hand_back(url, transport, token, found)
    raw = Raw(url, transport, token)
    _task_states(raw)
    _list_changes(raw)
    _progress(raw)
    _errors(raw)
    yield found
    raw.http.close()


def test_every_recorded_message_is_valid_by_the_official_schemas(walk: Walk) -> None:
    invalid = []
    for rec in walk.recorded:
        try:
            schema.check_server_message(rec.method, rec.message)
        except jsonschema.ValidationError as exc:
            invalid.append(
                f"{rec.method} {rec.target}: {exc.message} at {list(exc.absolute_path)}: {rec.message!r:.300}"
            )
    assert invalid == []
    assert len(walk.recorded) > 100


def test_every_kind_the_fleet_emits_is_recorded(walk: Walk) -> None:
    recorded = set().union(*(kinds_of(rec) for rec in walk.recorded))
    assert sorted(set(KINDS) - recorded) == [], "kinds in the table the walk did not record"
    assert sorted(recorded - set(KINDS)) == [], "kinds the fleet emits that the table does not list: add them"


def test_every_tool_prompt_and_resource_of_every_pack_was_answered(walk: Walk) -> None:
    answered = {(rec.method, rec.target) for rec in walk.recorded if "result" in rec.message or "error" in rec.message}
    missing = [
        (method, name) for method, names in walk.listed.items() for name in names if (method, name) not in answered
    ]
    assert missing == []
    assert len(walk.listed["tools/call"]) >= 30


def test_our_client_agrees_with_the_schemas(walk: Walk) -> None:
    """The strict client refused nothing the fleet sent: what the schemas accept, it reads."""
    assert walk.violations == []


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("a completed task's result without resultType (issue 21)", {"content": [{"type": "text", "text": "4"}]}),
        ("a completed task's result without content", {"resultType": "complete"}),
    ],
)
def test_an_inlined_result_that_is_not_a_tool_result_is_refused(kind: str, message: dict[str, Any]) -> None:
    """The extension's own schema types the inlined result as any object; the wire's `CallToolResult` does not."""
    task = {
        "taskId": "t",
        "status": "completed",
        "createdAt": "2026-11-30T20:00:00Z",
        "lastUpdatedAt": "2026-11-30T20:00:00Z",
        "ttlMs": None,
        "result": message,
    }
    schema.validate("GetTaskResult", {"resultType": "complete", **task}, schema.TASKS)  # the extension alone passes it
    with pytest.raises(jsonschema.ValidationError):
        schema.check_server_message(
            "tasks/get", {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", **task}}
        )
    with pytest.raises(jsonschema.ValidationError):
        schema.check_notification({"jsonrpc": "2.0", "method": TASKS_NOTIFICATION, "params": task})


def test_the_schemas_are_the_official_ones() -> None:
    """The copies in tests/data are whole: the wire's draft-2020-12 schema and the extension's own."""
    for name, needed in ((schema.WIRE, "CallToolResult"), (schema.TASKS, "GetTaskResult")):
        loaded = json.loads(schema._PATHS[name].read_text())
        assert loaded["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert needed in loaded["$defs"]
    with contextlib.suppress(KeyError):
        schema.validate("NoSuchDefinition", {})
        raise AssertionError("an unknown definition must not validate")
