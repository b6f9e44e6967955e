"""Quiet tools answer JSON at once, without the SDK's event-stream deferral.

The SDK's stateless handler runs every call in a task group beside a disconnect watcher, behind a
zero-size stream, so that a long round can turn into an event stream: a third of the SDK app's CPU
on a trivial call (`benchmarks/worker_overhead.py`). A tool that never notifies and always returns
at once is declared quiet (`env.quiet.declare`) and its `tools/call` takes the SDK's JSON path, with
the bytes the deferral would have written. The tool is read from the `Mcp-Name` header; the SDK then
checks it against the body, so a client that lies only loses its own pings.

A tool that never notifies but may run long (a computation's round) is declared silent
(`env.quiet.declare_silent`): its calls keep what the deferral gives, in plain asyncio. The round runs
in one task, a disconnect watcher cancels it when the client leaves, and a round still running after
the SDK's ping interval commits to an event stream with the SDK's keep-alive pings; one that ends
inside the window (every hand-back) is answered as JSON. Only requests that accept event streams take
this path; anything else keeps the SDK's manager. A silent tool's resumed round may take
`edge.fast_resume` inside the same deferral.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope, Send

from mrtr_worker.edge.fast_resume import FastResume
from mrtr_worker.sdk import internals as sdk
from mrtr_worker.tool_api.quiet import QuietTools

_METHOD_HEADER = b"mcp-method"
_NAME_HEADER = b"mcp-name"
_ACCEPT_HEADER = b"accept"
_EVENT_STREAM = b"text/event-stream"
_PING = b": ping\r\n\r\n"


class QuietCalls:
    """The MCP endpoint behind `ModernOnly` (so every POST here names a 2026-era version).

    Uses the SDK's modern handler directly, with the manager's own server, security settings and
    lifespan state: the same handler the manager would call, asked to answer JSON.
    """

    def __init__(
        self, manager: StreamableHTTPSessionManager, tools: QuietTools, fast: FastResume | None = None
    ) -> None:
        self._manager = manager
        self._tools = tools
        self._default = StreamableHTTPASGIApp(manager)
        self._fast = fast

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = self._path(scope["headers"]) if scope["method"] == "POST" else None
        if path == "quiet":
            await self._json(scope, receive, send)
        elif path == "silent":
            await self._silent(scope, receive, send, self._json if self._fast is None else self._fast_resume)
        else:
            await self._default(scope, receive, send)

    async def _json(self, scope: Scope, receive: Receive, send: Send) -> None:
        m = self._manager
        state = sdk.lifespan_state(m)  # set by the manager's run(), which the worker's lifespan enters
        await sdk.handle_modern_request(m.app, m.security_settings, True, state, scope, receive, send)

    async def _fast_resume(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._fast is not None
        await self._fast.serve(scope, receive, send, self._json)

    async def _silent(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        serve: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None,
    ) -> None:
        """The SDK's deferral for a handler that never notifies: JSON in the window, else pings, then the event."""
        reply: list[Message] = []
        watcher: asyncio.Task[None] | None = None

        async def capture(message: Message) -> None:
            reply.append(message)

        async def watch() -> None:
            while (await receive()).get("type") != "http.disconnect":
                pass  # pragma: no cover
            handler.cancel()  # the client left: the round ends here, its slot freed (as the SDK's deferral does)

        async def reading() -> Message:
            nonlocal watcher
            message = await receive()
            if watcher is None and not message.get("more_body", False):
                # The body is read: from now on, receive only waits for a disconnect.
                watcher = asyncio.ensure_future(watch())
            return message

        handler = asyncio.ensure_future((serve or self._json)(scope, reading, capture))
        try:
            interval = sdk.sse_ping_interval()
            done, _ = await asyncio.wait((handler,), timeout=interval)
            if done:
                if not handler.cancelled():
                    handler.result()  # the SDK answers a handler's errors itself; anything else is raised here
                    for message in reply:
                        await send(message)
                return
            await send({"type": "http.response.start", "status": 200, "headers": sdk.sse_headers()})
            while not done:
                await send({"type": "http.response.body", "body": _PING, "more_body": True})
                done, _ = await asyncio.wait((handler,), timeout=interval)
            if not handler.cancelled():
                handler.result()
                body = b"".join(m.get("body", b"") for m in reply if m["type"] == "http.response.body")
                event = b"event: message\r\ndata: " + body + b"\r\n\r\n"
                await send({"type": "http.response.body", "body": event, "more_body": False})
        finally:
            if watcher is not None:
                watcher.cancel()
            if not handler.done():
                handler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await handler

    def _path(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        method = name = None
        streams = False
        for key, value in headers:
            if key == _METHOD_HEADER:
                method = value
            elif key == _NAME_HEADER:
                name = value
            elif key == _ACCEPT_HEADER and _EVENT_STREAM in value:
                streams = True
        if method != b"tools/call":
            return None
        if name in self._tools:
            return "quiet"
        if streams and name in self._tools.silent:
            return "silent"
        return None
