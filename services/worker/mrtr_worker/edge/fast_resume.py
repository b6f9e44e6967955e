"""The resume fast path: a computation's retry served without the SDK's generic dispatch.

Under shedding most of a worker's traffic is one shape: a `tools/call` of a silent computation tool
carrying only the `requestState` of its previous round. The SDK serves it through its generic kernel
(a Starlette request, a per-request session and context, pydantic models of every envelope, a
dispatch table), close to half of the worker's CPU per hop. This module calls the same checks
directly: the transport's (content type, Host and Origin, Accept, the routing headers against the
body, the per-version validation of the params), the SDK's own `RequestStateBoundary` check through
`edge.state_probe` (no claim check is written here), and the tool's argument model. Only when every
one passes does it commit: it runs the worker's middleware chain around the tool with the state
already unsealed and writes the answer with the SDK's own serializer, the same bytes and metrics.

The safety rule: anything it does not fully recognise before committing (odd JSON or envelope, a
header mismatch, `inputResponses`, a state the boundary refuses, bad arguments, an unknown tool) is
replayed untouched into the SDK's path. Nothing before the commit has a side effect, so every error
answer is the SDK's own, byte for byte (`tests/worker/edge/test_fast_resume_corpus.py`). It is off
when tracing is configured and for any middleware or extension it does not know.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request, find_duplicated_routing_header
from mcp_types import CallToolResult, ClientCapabilities, JSONRPCRequest, TextContent
from mcp_types import methods as wire_methods
from prometheus_client import Counter
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from mrtr_worker.edge.state_probe import StateProbe, Verified
from mrtr_worker.mcp_middleware.answer_limits import LimitAnswers
from mrtr_worker.mcp_middleware.observe import ObserveRequests
from mrtr_worker.mcp_middleware.prompt_guard import PromptGuard
from mrtr_worker.sdk import internals as sdk
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.replay_guard import ReplayGuard
from mrtr_worker.tasks.extension import TasksExtension
from mrtr_worker.tasks.offer import TaskSupport
from mrtr_worker.tasks.push import TaskPush
from mrtr_worker.tool_api.rounds import RoundContext

logger = logging.getLogger(__name__)
_tool_logger = logging.getLogger("mcp.server.mcpserver.server")  # where the SDK logs a tool's failures

METHOD = "tools/call"
_PARAM_KEYS = frozenset({"_meta", "name", "arguments", "requestState"})
_STATE_KEY = b'"requestState"'
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_KNOWN_MIDDLEWARE = (ObserveRequests, LimitAnswers, RequestStateBoundary, PromptGuard, TaskPush, ReplayGuard)
"""Middleware whose behaviour on a resumed tools/call is known to need nothing but `method` and `params`."""

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class _Plan:
    """A request that passed every check: what the commit needs."""

    request_id: int | str
    ctx: ServerRequestContext[Any, Any]
    capabilities: ClientCapabilities
    tool: Tool
    state: Verified


class FastResume:
    """Serve a silent computation tool's resumed round directly; fall back to the SDK's path otherwise."""

    def __init__(
        self,
        mcp: MCPServer,
        manager: StreamableHTTPSessionManager,
        codec: FleetStateCodec,
        boundary: RequestStateBoundary,
        tools: frozenset[str],
        *,
        max_body_bytes: int,
        resumes: Counter,
    ) -> None:
        """`resumes`: `WorkerMetrics.fast_resumes`, counted by outcome."""
        self._mcp = mcp
        self._lowlevel = sdk.lowlevel_server(mcp)
        self._manager = manager
        self._codec = codec
        self._boundary = boundary
        self._probe = StateProbe(boundary, codec)
        self.tools = tools
        self._max_body_bytes = max_body_bytes
        self._served = resumes.labels(outcome="served")
        self._fell_back = resumes.labels(outcome="fallback")

    @classmethod
    def build(
        cls,
        mcp: MCPServer,
        manager: StreamableHTTPSessionManager,
        codec: FleetStateCodec,
        silent: set[bytes],
        *,
        max_body_bytes: int,
        resumes: Counter,
    ) -> FastResume | None:
        """The fast path for this server's silent tools, or None when anything in its chain is not known here."""
        boundaries = [m for m in mcp.middleware if isinstance(m, RequestStateBoundary)]
        if len(boundaries) != 1 or not all(isinstance(m, _KNOWN_MIDDLEWARE) for m in mcp.middleware):
            return None  # e.g. the SDK's OpenTelemetry middleware (tracing configured): its spans must not be skipped
        if sdk.boundary_security(boundaries[0]).codec is not codec:
            return None
        if any(not isinstance(e, TasksExtension) for e in sdk.extensions(mcp)):
            return None
        tools = frozenset(name.decode() for name in silent if _servable(mcp, name.decode()))
        return cls(mcp, manager, codec, boundaries[0], tools, max_body_bytes=max_body_bytes, resumes=resumes)

    async def serve(self, scope: Scope, receive: Receive, send: Send, fallback: Handler) -> None:
        """Read the body; serve it here if it is a plain resume, else replay it untouched into `fallback`."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False) or size > self._max_body_bytes:
                break
        plan = None
        if message["type"] == "http.request" and not message.get("more_body", False):
            plan = self._plan(scope, b"".join(m.get("body", b"") for m in messages))
        if plan is None:
            self._fell_back.inc()
            await fallback(scope, _replay(messages, receive), send)
            return
        self._served.inc()
        await self._commit(plan, scope, receive, send)

    def _plan(self, scope: Scope, body: bytes) -> _Plan | None:
        """Every check the SDK's path makes before the tool runs, silently; None at the first doubt."""
        try:
            return self._checked(scope, body)
        except Exception:
            return None  # whatever it is, the SDK's path answers it

    def _checked(self, scope: Scope, body: bytes) -> _Plan | None:
        if _STATE_KEY not in body:
            return None  # a first round (most of the rest): not worth parsing twice
        raw = [(key.decode("latin-1"), value.decode("latin-1")) for key, value in scope["headers"]]
        headers: dict[str, str] = {}
        for key, value in raw:
            headers.setdefault(key, value)  # the first of a repeated header, as Starlette's `Headers` reads it
        if not self._transport_allows(headers):
            return None
        if not check_accept_headers(cast(Request, _HeadersOnly(headers)))[0]:
            return None
        decoded = json.loads(body)
        if not isinstance(decoded, dict) or decoded.keys() != _ENVELOPE_KEYS or decoded["method"] != METHOD:
            return None
        request = JSONRPCRequest.model_validate(decoded)
        params = decoded["params"]
        if not isinstance(params, dict) or not params.keys() <= _PARAM_KEYS:
            return None  # inputResponses, a task request, anything else: the SDK's path
        name, token = params.get("name"), params.get("requestState")
        if not isinstance(name, str) or name not in self.tools or not isinstance(token, str):
            return None
        if find_duplicated_routing_header(raw) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=headers)
        if not isinstance(verdict, InboundModernRoute):
            return None
        caps = verdict.client_capabilities
        if not isinstance(caps, dict) or "extensions" in caps:
            return None  # a declared extension (tasks) may change the call: the SDK's path
        capabilities = sdk.typed(ClientCapabilities, caps)
        if capabilities is None:
            return None
        version = verdict.protocol_version
        wire_methods.validate_client_request(METHOD, version, params)
        if self._lowlevel.get_tool_input_schema is None or self._lowlevel.get_tool_input_schema(name) is not None:
            return None  # `Mcp-Param` headers to check against the schema: the SDK's path does it
        tool = sdk.registered_tool(self._mcp, name)
        if tool is None:
            return None
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return None
        tool.fn_metadata.validate_arguments(arguments or {})
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=cast(Any, None),  # neither the SDK's state checks nor the known middleware read it
            lifespan_context=sdk.lifespan_state(self._manager),
            protocol_version=version,
            method=METHOD,
            params=params,
            request_id=request.id,
        )
        state = self._probe.verify(ctx)
        if state is None:
            return None
        return _Plan(request.id, ctx, capabilities, tool, state)

    def _transport_allows(self, headers: Mapping[str, str]) -> bool:
        """`TransportSecurityMiddleware.validate_request` for a POST, without its log lines (the fallback logs)."""
        content_type = headers.get("content-type")
        if content_type is None or not content_type.lower().startswith("application/json"):
            return False
        settings = self._manager.security_settings
        if settings is None or not settings.enable_dns_rebinding_protection:
            return True
        host = headers.get("host")
        if not host or not _allowed(host, settings.allowed_hosts):
            return False
        origin = headers.get("origin")
        return not origin or _allowed(origin, settings.allowed_origins)

    async def _commit(self, plan: _Plan, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the worker's middleware and the tool, then write the answer as the SDK's path would."""
        self._codec.opened(plan.state.key)
        msg = await sdk.to_jsonrpc_response(plan.request_id, self._respond(plan))
        await sdk.write_response(msg, scope, receive, send)

    async def _respond(self, plan: _Plan) -> dict[str, Any]:
        runner: ServerRunner[Any] = ServerRunner(self._lowlevel, cast(Any, None), plan.ctx.lifespan_context)

        async def kernel(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
            params = ctx.params or {}
            round_ctx = RoundContext(plan.capabilities, None, ctx.protocol_version, params.get("requestState"))
            result = await _call_tool(plan.tool, dict(params.get("arguments") or {}), round_ctx)
            return sdk.serialize_result(runner, METHOD, ctx.protocol_version, result)

        call: CallNext = kernel
        for middleware in reversed(self._mcp.middleware):
            call = _unsealed(self._boundary, plan, call) if middleware is self._boundary else _bound(middleware, call)
        return sdk.dump_result(await call(plan.ctx))


async def _call_tool(tool: Tool, arguments: dict[str, Any], ctx: RoundContext) -> Any:
    """`MCPServer._handle_call_tool` around `Tool.run`: a failure is an error result, an `MCPError` an error."""
    try:
        return await tool.run(arguments, cast(Context[Any, Any], ctx), convert_result=True)
    except MCPError:
        raise
    except Exception as exc:
        if isinstance(exc, ToolError) and not isinstance(exc, UnexpectedToolError):
            if isinstance(exc.__cause__, ValidationError):
                fields = sorted({".".join(str(part) for part in err["loc"]) for err in exc.__cause__.errors()})
                _tool_logger.info("Tool %r rejected arguments: %r", tool.name, fields)
            else:
                _tool_logger.info("Tool %r failed: %r", tool.name, str(exc))
        else:
            _tool_logger.exception("Tool %r raised an unexpected exception", tool.name)
        return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def _unsealed(boundary: RequestStateBoundary, plan: _Plan, call_next: CallNext) -> CallNext:
    """The boundary's place in the chain with its unseal already done: plaintext in, sealed state out."""

    async def call(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        inner = replace(ctx, params={**(ctx.params or {}), "requestState": plan.state.plaintext})
        result = await call_next(inner)
        return sdk.seal_result(boundary, inner, result, plan.state.binding)

    return call


def _bound(middleware: Any, call_next: CallNext) -> CallNext:
    async def call(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        result: HandlerResult = await middleware(ctx, call_next)
        return result

    return call


def _servable(mcp: MCPServer, name: str) -> bool:
    """A plain tool: async, no resolvers, and not task-only (whose call the tasks extension refuses undeclared)."""
    tool = sdk.registered_tool(mcp, name)
    if tool is None or tool.resolved_params or tool.context_kwarg is None:
        return False
    for extension in sdk.extensions(mcp):
        if isinstance(extension, TasksExtension) and extension.task_tools.support(name) is TaskSupport.REQUIRED:
            return False
    return True


def _allowed(value: str, allowed: list[str]) -> bool:
    """The SDK's Host/Origin match: exact, or `base:*` for any port."""
    if value in allowed:
        return True
    return any(a.endswith(":*") and value.startswith(a[:-2] + ":") for a in allowed)


@dataclass(frozen=True)
class _HeadersOnly:
    """What `check_accept_headers` reads of a request."""

    headers: Mapping[str, str]


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that gives the messages already read, in order, then the real receive's."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
