"""Quiet tools answer JSON at once, without the SDK's event-stream deferral.

In its default mode the SDK's stateless handler runs every call in a task
group beside a disconnect watcher, behind a zero-size stream, so that a long
round can turn into an event stream (pings, progress). That machinery was
the largest cost left on a trivial call (a third of the SDK app's CPU per
call, measured by `benchmarks/worker_overhead.py`). A tool that never sends a
notification and always returns at once gains nothing from it: a pack
declares such a tool quiet (`env.quiet.declare(name)`), and its `tools/call`
takes the SDK's JSON path. The answer is the same bytes the deferral would
have written (a call that ends inside the deferral window is answered as
JSON there too).

The tool is read from the `Mcp-Name` header, never the body; the SDK's
handler then checks that the header matches the body (a mismatch is
refused), so a client that lies only loses its own pings. Everything else
(computations, which may run a whole slice; the conformance pack's progress;
`subscriptions/listen`) keeps the SDK's manager and its event streams.
"""

from __future__ import annotations

from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

_METHOD_HEADER = b"mcp-method"
_NAME_HEADER = b"mcp-name"


class QuietTools:
    """The tools whose calls never notify and return at once; packs declare them where they register them."""

    def __init__(self) -> None:
        self._tools: set[bytes] = set()

    def declare(self, tool: str) -> None:
        self._tools.add(tool.encode())

    def __contains__(self, tool: object) -> bool:
        return tool in self._tools


class QuietCalls:
    """The MCP endpoint behind `ModernOnly` (so every POST here names a 2026-era version).

    Uses the SDK's modern handler directly, with the manager's own server, security settings and
    lifespan state: the same handler the manager would call, asked to answer JSON.
    """

    def __init__(self, manager: StreamableHTTPSessionManager, tools: QuietTools) -> None:
        self._manager = manager
        self._tools = tools
        self._default = StreamableHTTPASGIApp(manager)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST" and self._quiet(scope["headers"]):
            m = self._manager
            state = m._lifespan_state  # set by the manager's run(), which the worker's lifespan enters
            await handle_modern_request(m.app, m.security_settings, True, state, scope, receive, send)
        else:
            await self._default(scope, receive, send)

    def _quiet(self, headers: list[tuple[bytes, bytes]]) -> bool:
        method = name = None
        for key, value in headers:
            if key == _METHOD_HEADER:
                method = value
            elif key == _NAME_HEADER:
                name = value
        return method == b"tools/call" and name in self._tools
