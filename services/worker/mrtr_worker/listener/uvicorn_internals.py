"""The one module that touches uvicorn's private names (uvicorn is pinned: `uvicorn==0.54.0`).

The worker's listener (`one_write`, `bounded_http`) is uvicorn's httptools protocol with a
transport that joins a response's head and body, and bounds on heads, bodies and connections.
For that it subclasses a class of a module uvicorn does not export (`protocols.http.httptools_impl`),
writes refusals with that module's status lines, takes uvicorn's per-server state, and cancels
the keep-alive timer with a private method. Every one of them is read here and nowhere else, and
`tests/worker/listener/test_uvicorn_internals.py` has a test per name that it still exists and
behaves as the listener relies on. Upgrading uvicorn is: run that test file and the listener's
tests (`tests/worker/listener`), review this one.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["STATUS_LINE", "HttpToolsProtocol", "ServerState", "unset_keepalive"]

# HttpToolsProtocol: the protocol `uvicorn.Config(http="httptools")` runs; the listener's base class.
# Besides the asyncio.Protocol methods and the parser callbacks it overrides, the listener reads its
# `loop`, `transport`, `client`, `parser`, `headers`, `connections`, `flow`, `cycle`, `server_state`
# and `expect_100_continue`, and overrides `timeout_keep_alive_handler` and `on_response_complete`.

# STATUS_LINE: status code -> the response's first line, as uvicorn writes it (b"HTTP/1.1 200 OK\r\n").

# ServerState: what one uvicorn server shares with its connections (`connections`, `tasks`,
# `default_headers`, `total_requests`), passed to every protocol it makes.


def unset_keepalive(protocol: HttpToolsProtocol) -> None:
    """`_unset_keepalive_if_required`: cancel the idle keep-alive timer, as uvicorn does when bytes arrive."""
    protocol._unset_keepalive_if_required()
