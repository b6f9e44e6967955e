"""The one module that touches the MCP SDK's private names (the SDK is pinned: `mcp==2.3.0`).

The worker's fast paths (`edge.quiet_calls`, `edge.fast_resume`) serve some calls with the
SDK's own parts instead of its generic dispatch, and the server's assembly (`server`) places
its middleware around the SDK's requestState boundary. For that they need names the SDK does
not export: a private module, private functions and constants, private attributes of its
server, session manager, runner and boundary. Every one of them is read here and nowhere else,
and `tests/worker/sdk/test_internals.py` has a test per name that it still exists and behaves
as the worker relies on. Upgrading the SDK is: run that test file, review this one.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable
from typing import Any

from mcp.server import _streamable_http_modern as modern_http
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import _typed
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.request_state import RequestStateBoundary, RequestStateCodec, RequestStateSecurity
from mcp.server.runner import ServerRunner, _dump_result
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCResponse, RequestId
from starlette.types import Receive, Scope, Send

__all__ = [
    "OpenTelemetryMiddleware",
    "boundary_index",
    "boundary_security",
    "dump_result",
    "extensions",
    "handle_modern_request",
    "lifespan_state",
    "lowlevel_server",
    "modern_http",
    "registered_tool",
    "seal_result",
    "serialize_result",
    "sse_headers",
    "sse_ping_interval",
    "to_jsonrpc_response",
    "typed",
    "verify_state",
    "with_codec",
    "write_response",
]

# --- the modern (2026-07-28) HTTP handler: `mcp.server._streamable_http_modern`, a private module

handle_modern_request = modern_http.handle_modern_request
"""The SDK's handler of one stateless 2026-era POST (what the session manager calls), asked for JSON or a stream."""


async def to_jsonrpc_response(
    request_id: RequestId, result: Awaitable[dict[str, Any]]
) -> JSONRPCResponse | JSONRPCError:
    """`_to_jsonrpc_response`: the awaited result as the reply to `request_id`, any exception as the SDK's error."""
    return await modern_http._to_jsonrpc_response(request_id, result)


async def write_response(msg: JSONRPCResponse | JSONRPCError, scope: Scope, receive: Receive, send: Send) -> None:
    """`_write`: the reply as JSON with the HTTP status the SDK maps its error codes to."""
    await modern_http._write(msg, scope, receive, send)


def sse_ping_interval() -> float:
    """`_SSE_PING_INTERVAL`: seconds before a deferred answer becomes an event stream, and between its pings.

    Read on every call, as the SDK reads it: a test may shorten it on the SDK's module.
    """
    interval: float = modern_http._SSE_PING_INTERVAL
    return interval


def sse_headers() -> list[tuple[bytes, bytes]]:
    """`_SSE_HEADERS`: the response headers the SDK opens an event stream with."""
    return list(modern_http._SSE_HEADERS)


# --- the requestState envelope: `mcp.server.request_state`


def boundary_security(boundary: RequestStateBoundary) -> RequestStateSecurity:
    """The security settings (codec, TTL, principal binding) the boundary was built with."""
    return boundary._security


def verify_state(
    boundary: RequestStateBoundary, ctx: ServerRequestContext[Any, Any]
) -> tuple[str, tuple[str, str, str | None]]:
    """`_unseal`: every check the SDK makes of the inbound `requestState` in `ctx.params`, in the SDK's own code.

    Returns (the plaintext state, the (target, argument digest, principal) binding to seal the answer
    with); raises the SDK's `MCPError` when it refuses, after logging why on the SDK's requestState
    logger (`RequestStateBoundary.__module__`). Its effects are the codec's `unseal`, the principal
    binder's call with `ctx`, and that log line.
    """
    return boundary._unseal(ctx)


def with_codec(boundary: RequestStateBoundary, codec: RequestStateCodec) -> RequestStateBoundary:
    """A copy of `boundary` (its audience, TTL, principal binder, anything else it holds) using `codec`.

    `boundary` and its security settings are left as they are: the copy has settings of its own.
    """
    security = copy.copy(boundary._security)
    security.codec = codec
    twin = copy.copy(boundary)
    twin._security = security
    return twin


def seal_result(
    boundary: RequestStateBoundary,
    ctx: ServerRequestContext[Any, Any],
    result: HandlerResult,
    binding: tuple[str, str, str | None],
) -> HandlerResult:
    """`_seal_result`: an `input_required` result with its plaintext state sealed for `binding`; others unchanged."""
    return boundary._seal_result(ctx, result, binding)


def boundary_index(server: MCPServer) -> int:
    """Where the SDK's requestState boundary sits in `server.middleware` (there must be exactly one).

    The SDK builds the chain as [its OpenTelemetry middleware, its boundary]; the worker's middleware
    that must see sealed tokens goes just outside the boundary, the rest inside it (appended).
    """
    found = [i for i, middleware in enumerate(server.middleware) if isinstance(middleware, RequestStateBoundary)]
    if len(found) != 1:
        raise RuntimeError(f"expected one RequestStateBoundary in the SDK's middleware, found {len(found)}")
    return found[0]


# --- the server, its session manager and its runner


def lowlevel_server(mcp: MCPServer) -> Server[Any]:
    """`MCPServer._lowlevel_server`: the low-level server behind the decorator API (its handlers, its schema lookup)."""
    return mcp._lowlevel_server


def registered_tool(mcp: MCPServer, name: str) -> Tool | None:
    """`MCPServer._tool_manager.get_tool`: the registered tool called `name` (its function, metadata, validation)."""
    return mcp._tool_manager.get_tool(name)


def extensions(mcp: MCPServer) -> list[Extension]:
    """`MCPServer._extensions`: the extensions the server was built with."""
    return list(mcp._extensions)


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """`StreamableHTTPSessionManager._lifespan_state`: the server's lifespan state, set while `manager.run()` runs."""
    return manager._lifespan_state


def serialize_result(runner: ServerRunner[Any], method: str, version: str, result: HandlerResult) -> dict[str, Any]:
    """`ServerRunner._serialize`: a handler's result in its wire form for `version` (checked, stamped)."""
    return runner._serialize(method, version, result)


typed = _typed
"""`mcp.server.connection._typed`: a raw envelope value validated into a model, None if it does not fit."""

dump_result = _dump_result
"""`mcp.server.runner._dump_result`: a handler result as the JSON-RPC `result` dict."""
