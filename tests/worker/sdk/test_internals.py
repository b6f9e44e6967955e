"""Every MCP SDK private name the worker uses (`mrtr_worker.sdk.internals`) still exists and behaves as relied on.

One test per name (the SDK is pinned; after an upgrade, this file says what moved). Each drives
the SDK's own objects: a real `MCPServer` with a requestState policy, its real boundary, its
session manager running. The last tests keep the door the only one: no other worker module
imports a private SDK name or reads one of these private attributes.
"""

from __future__ import annotations

import ast
import inspect
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import AESGCMRequestStateCodec, RequestStateBoundary, RequestStateSecurity
from mcp.server.runner import ServerRunner
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ClientCapabilities,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    JSONRPCResponse,
    TextContent,
)
from starlette.types import Message

import mrtr_worker
from mrtr_protocol.wire import PROTOCOL_VERSION, encode_request, request_headers, request_meta
from mrtr_worker.sdk import internals as sdk

AUDIENCE = "test-audience"
METHOD = "tools/call"


def _server(*, principal: str | None = None, extensions: list[Extension] | None = None) -> MCPServer:
    """A server with one tool and the fleet's kind of requestState policy (AES-GCM, a TTL, an audience)."""
    codec = AESGCMRequestStateCodec([secrets.token_bytes(32)])
    security = RequestStateSecurity(
        codec=codec, ttl=60, audience=AUDIENCE, bind_principal=None if principal is None else lambda _: principal
    )
    server = MCPServer("internals", request_state_security=security, extensions=extensions)

    @server.tool()
    async def echo(text: str, ctx: Context[Any, Any]) -> str:
        return f"echo: {text}"

    return server


def _boundary(server: MCPServer) -> RequestStateBoundary:
    return cast(RequestStateBoundary, server.middleware[sdk.boundary_index(server)])


def _ctx(params: dict[str, Any], method: str = METHOD) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(
        session=cast(Any, None),
        lifespan_context=None,
        protocol_version=PROTOCOL_VERSION,
        method=method,
        params=params,
        request_id=1,
    )


async def _minted(server: MCPServer, params: dict[str, Any]) -> str:
    """A state the server's boundary seals for `params` (its public call: a handler hands a round back)."""

    async def hand_back(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"resultType": "input_required", "requestState": "plain-state"}

    sealed = await _boundary(server)(_ctx(params), hand_back)
    assert isinstance(sealed, dict)
    token: str = sealed["requestState"]
    return token


def _claims(server: MCPServer, token: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(sdk.boundary_security(_boundary(server)).codec.unseal(token)))


def _resealed(server: MCPServer, token: str, **claims: Any) -> str:
    """The same state with some claims changed, sealed again with the server's codec."""
    codec = sdk.boundary_security(_boundary(server)).codec
    return codec.seal(json.dumps({**_claims(server, token), **claims}).encode())


async def _through_boundary(server: MCPServer, params: dict[str, Any]) -> Any:
    """The boundary's own verdict on a request (it runs as the SDK runs it): the params the handler would see."""
    seen: list[Any] = []

    async def handler(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        seen.append(ctx.params)
        return {"content": []}

    call_next: CallNext = handler
    await _boundary(server)(_ctx(params), call_next)
    return seen[0]


def _scope(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in {**headers, "host": "127.0.0.1:8000"}.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def _asgi(
    app: Callable[[Any, Any, Any], Awaitable[None]], body: bytes, headers: dict[str, str]
) -> tuple[int, dict[bytes, bytes], Any]:
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(_scope(body, headers), receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), json.loads(payload)


@asynccontextmanager
async def _running(server: MCPServer) -> AsyncIterator[None]:
    server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    async with server.session_manager.run():
        yield


def _call(text: str) -> tuple[bytes, dict[str, str]]:
    params = {"_meta": request_meta({}), "name": "echo", "arguments": {"text": text}}
    return encode_request(7, METHOD, params), request_headers(METHOD, params)


# --- the modern HTTP handler (a private module)


async def test_handle_modern_request_answers_a_call_as_json() -> None:
    server = _server()
    async with _running(server):
        manager = server.session_manager

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await sdk.handle_modern_request(
                sdk.lowlevel_server(server), manager.security_settings, True, sdk.lifespan_state(manager), scope,
                receive, send,
            )  # fmt: skip

        status, headers, body = await _asgi(app, *_call("hi"))
    assert status == 200
    assert headers[b"content-type"].startswith(b"application/json")
    assert body["id"] == 7
    assert body["result"]["content"] == [{"type": "text", "text": "echo: hi"}]


async def test_lifespan_state_is_set_while_the_manager_runs() -> None:
    server = _server()
    async with _running(server):
        assert sdk.lifespan_state(server.session_manager) is not None
    assert sdk.lifespan_state(server.session_manager) is None


async def test_to_jsonrpc_response_wraps_a_result_and_an_error() -> None:
    async def result() -> dict[str, Any]:
        return {"content": []}

    async def failure() -> dict[str, Any]:
        raise MCPError(code=INVALID_PARAMS, message="bad params")

    ok = await sdk.to_jsonrpc_response(3, result())
    assert isinstance(ok, JSONRPCResponse)
    assert (ok.id, ok.result) == (3, {"content": []})
    bad = await sdk.to_jsonrpc_response(4, failure())
    assert isinstance(bad, JSONRPCError)
    assert (bad.id, bad.error.code, bad.error.message) == (4, INVALID_PARAMS, "bad params")


@pytest.mark.parametrize(
    ("message", "status"),
    [
        (JSONRPCResponse(jsonrpc="2.0", id=5, result={"content": []}), 200),
        (JSONRPCError(jsonrpc="2.0", id=5, error=ErrorData(code=INVALID_PARAMS, message="bad")), 400),
    ],
)
async def test_write_response_writes_json_with_the_mapped_status(
    message: JSONRPCResponse | JSONRPCError, status: int
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await sdk.write_response(message, scope, receive, send)

    got, headers, body = await _asgi(app, b"", {})
    assert got == status
    assert headers[b"content-type"] == b"application/json"
    assert body == message.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_sse_ping_interval_is_the_sdks_and_read_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sdk.sse_ping_interval() == 15.0  # the SDK's keep-alive period; the silent tools' JSON window
    monkeypatch.setattr(sdk.modern_http, "_SSE_PING_INTERVAL", 0.25)
    assert sdk.sse_ping_interval() == 0.25


def test_sse_headers_open_an_event_stream() -> None:
    headers = dict(sdk.sse_headers())
    assert headers[b"content-type"] == b"text/event-stream"
    assert b"no-cache" in headers[b"cache-control"]


# --- the requestState envelope


async def test_verify_state_is_the_boundarys_own_check_of_every_claim(caplog: pytest.LogCaptureFixture) -> None:
    server = _server(principal="alice")
    params = {"name": "echo", "arguments": {"text": "x"}}
    token = await _minted(server, params)
    claims = _claims(server, token)
    plaintext, binding = sdk.verify_state(_boundary(server), _ctx({**params, "requestState": token}))
    assert (plaintext, binding[:2]) == ("plain-state", (claims["t"], claims["a"]))
    assert binding[2] == "alice"  # the principal the binder named, to seal the answer for
    for changed in ({"aud": "elsewhere"}, {"exp": 1.0}, {"a": "x"}, {"v": 2}, {"p": None}):
        caplog.clear()
        with pytest.raises(MCPError) as refused:
            sdk.verify_state(_boundary(server), _ctx({**params, "requestState": _resealed(server, token, **changed)}))
        assert refused.value.error.message == "Invalid or expired requestState"
        logged = [r for r in caplog.records if r.name == RequestStateBoundary.__module__]  # where the probe quiets
        assert [r.getMessage().split(": ")[0] for r in logged] == ["requestState rejected on tools/call"], changed


async def test_with_codec_is_the_same_boundary_opening_with_another_codec() -> None:
    server = _server()
    boundary = _boundary(server)
    original = sdk.boundary_security(boundary)
    opened: list[str] = []

    class Recording:
        def seal(self, payload: bytes) -> str:
            return original.codec.seal(payload)

        def unseal(self, token: str) -> bytes:
            opened.append(token)
            return original.codec.unseal(token)

    twin = sdk.with_codec(boundary, Recording())
    security = sdk.boundary_security(twin)
    assert isinstance(security.codec, Recording)
    assert (security.ttl, security.audience, security.bind_principal) == (
        original.ttl, original.audience, original.bind_principal
    )  # fmt: skip
    assert sdk.boundary_security(boundary) is original
    assert isinstance(original.codec, AESGCMRequestStateCodec)
    params = {"name": "echo", "arguments": {}}
    token = await _minted(server, params)
    assert sdk.verify_state(twin, _ctx({**params, "requestState": token}))[0] == "plain-state"
    assert opened == [token]
    with pytest.raises(MCPError):  # the audience, as the original holds it
        sdk.verify_state(twin, _ctx({**params, "requestState": _resealed(server, token, aud="elsewhere")}))


def test_boundary_security_is_the_servers_policy() -> None:
    server = _server()
    security = sdk.boundary_security(_boundary(server))
    assert isinstance(security, RequestStateSecurity)
    assert isinstance(security.codec, AESGCMRequestStateCodec)
    assert (security.ttl, security.audience) == (60, AUDIENCE)


def test_seal_result_seals_input_required_only() -> None:
    server = _server()
    boundary = _boundary(server)
    params = {"name": "echo", "arguments": {}}
    binding = ("echo", "the-digest", None)
    result = {"resultType": "input_required", "requestState": "plain-state"}
    sealed = sdk.seal_result(boundary, _ctx(params), result, binding)
    assert isinstance(sealed, dict)
    claims = _claims(server, sealed["requestState"])
    assert (claims["m"], claims["t"], claims["a"], claims["s"]) == (METHOD, "echo", "the-digest", "plain-state")
    assert claims["exp"] - claims["iat"] == pytest.approx(60)
    assert (claims["aud"], "p" in claims) == (AUDIENCE, False)
    model = InputRequiredResult(request_state="plain-state")
    sealed_model = sdk.seal_result(boundary, _ctx(params), model, binding)
    assert isinstance(sealed_model, InputRequiredResult)
    assert sealed_model.request_state not in (None, "plain-state")
    complete = {"content": [{"type": "text", "text": "done"}]}
    assert sdk.seal_result(boundary, _ctx(params), complete, binding) == complete


def test_boundary_index_finds_the_sdks_boundary_after_its_tracing() -> None:
    server = _server()
    chain = [type(m) for m in server.middleware]
    assert chain == [sdk.OpenTelemetryMiddleware, RequestStateBoundary]  # the chain `server.py` places around
    assert sdk.boundary_index(server) == 1
    server.middleware.pop(1)
    with pytest.raises(RuntimeError, match="expected one RequestStateBoundary"):
        sdk.boundary_index(server)


def test_open_telemetry_middleware_is_the_sdks_span_middleware() -> None:
    assert inspect.iscoroutinefunction(sdk.OpenTelemetryMiddleware.__call__)
    assert isinstance(_server().middleware[0], sdk.OpenTelemetryMiddleware)


# --- the server, its runner


def test_lowlevel_server_is_the_one_behind_the_decorators() -> None:
    server = _server()
    lowlevel = sdk.lowlevel_server(server)
    assert lowlevel.name == "internals"
    assert lowlevel.get_tool_input_schema is not None
    schema = lowlevel.get_tool_input_schema("echo")
    assert schema is not None
    assert "text" in schema["properties"]


async def test_registered_tool_is_the_tool_with_its_metadata() -> None:
    server = _server()
    tool = sdk.registered_tool(server, "echo")
    assert tool is not None
    assert (tool.name, tool.context_kwarg) == ("echo", "ctx")
    assert not tool.resolved_params  # the fast path serves only tools without resolvers
    assert tool.fn_metadata.validate_arguments({"text": "x"}) is not None
    assert sdk.registered_tool(server, "missing") is None


class _Probe(Extension):
    identifier = "io.example/probe"

    def methods(self) -> list[MethodBinding]:
        return []


def test_extensions_are_the_ones_the_server_was_built_with() -> None:
    probe = _Probe()
    assert sdk.extensions(_server(extensions=[probe])) == [probe]
    assert sdk.extensions(_server()) == []


def test_serialize_result_shapes_a_result_for_the_wire() -> None:
    server = _server()
    runner: ServerRunner[Any] = ServerRunner(sdk.lowlevel_server(server), cast(Any, None), None)
    result = CallToolResult(content=[TextContent(type="text", text="x")])
    wire = sdk.serialize_result(runner, METHOD, PROTOCOL_VERSION, result)
    assert wire["content"] == [{"type": "text", "text": "x"}]
    assert "isError" not in wire or wire["isError"] is False


def test_typed_validates_or_gives_none() -> None:
    capabilities = sdk.typed(ClientCapabilities, {"sampling": {}})
    assert isinstance(capabilities, ClientCapabilities)
    assert capabilities.sampling is not None
    assert sdk.typed(ClientCapabilities, "not capabilities") is None


def test_dump_result_is_the_json_rpc_result() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="x")])
    assert sdk.dump_result(result) == {
        "content": [{"type": "text", "text": "x"}],
        "isError": False,
        "resultType": "complete",
    }
    assert sdk.dump_result(None) == {}


# --- the door is the only one

_PRIVATE_ATTRIBUTES = {
    "_lowlevel_server", "_tool_manager", "_extensions", "_lifespan_state", "_seal_result", "_serialize",
    "_SSE_PING_INTERVAL", "_SSE_HEADERS", "_to_jsonrpc_response", "_write", "_unseal", "_security", "_audience",
}  # fmt: skip
_DOOR = Path(sdk.__file__)


def _worker_modules() -> list[Path]:
    return [p for p in Path(mrtr_worker.__file__).parent.rglob("*.py") if p != _DOOR]


def test_no_other_worker_module_imports_a_private_sdk_name() -> None:
    found = []
    for path in _worker_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("mcp", "mcp_types"):
                module_private = any(part.startswith("_") for part in (node.module or "").split("."))
                names_private = [a.name for a in node.names if a.name.startswith("_")]
                if module_private or names_private:
                    found.append(f"{path.name}: from {node.module} import {[a.name for a in node.names]}")
    assert found == []


def test_no_other_worker_module_reads_the_sdks_private_attributes() -> None:
    found = []
    for path in _worker_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in _PRIVATE_ATTRIBUTES:
                receiver = node.value
                if not (isinstance(receiver, ast.Name) and receiver.id == "self"):
                    found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert found == []
