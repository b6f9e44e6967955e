"""Every uvicorn private name the listener uses (`listener.uvicorn_internals`) exists and behaves as relied on.

One test per name (uvicorn is pinned; after an upgrade, this file says what moved). Each drives
uvicorn's own objects: its httptools protocol, made by uvicorn's config for a small ASGI app,
answers a request on an in-memory connection. The last test keeps the door the only one: no
other worker module imports from a uvicorn module or name uvicorn does not export.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

import mrtr_worker
from mrtr_worker.listener import uvicorn_internals as uv

REQUEST = b"POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nX-Case: Upper\r\nContent-Length: 4\r\n\r\nbody"


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"got " + message.get("body", b"")})


class _Wire(asyncio.Transport):
    """An in-memory connection: keeps what the protocol writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading


class _Recording(uv.HttpToolsProtocol):
    """uvicorn's protocol, noting the callbacks the listener overrides as they run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        self.answered = asyncio.Event()

    def on_message_begin(self) -> None:
        self.calls.append("message_begin")
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self.calls.append("headers_complete")
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self.calls.append("body")
        super().on_body(body)

    def on_message_complete(self) -> None:
        self.calls.append("message_complete")
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self.calls.append("response_complete")
        super().on_response_complete()
        self.answered.set()


def _config() -> uvicorn.Config:
    config = uvicorn.Config(_app, http="httptools", lifespan="off", log_config=None)
    config.load()
    return config


async def _answered() -> tuple[_Recording, _Wire, uv.ServerState]:
    """A protocol that has answered `REQUEST` on a connection still open."""
    state = uv.ServerState()
    protocol = _Recording(_config(), state, {})
    wire = _Wire()
    protocol.connection_made(wire)
    protocol.data_received(REQUEST)
    await protocol.answered.wait()
    return protocol, wire, state


def test_http_tools_protocol_is_what_uvicorn_runs_for_httptools() -> None:
    assert _config().http_protocol_class is uv.HttpToolsProtocol


async def test_http_tools_protocol_calls_back_and_holds_what_the_listener_reads() -> None:
    protocol, wire, state = await _answered()
    assert protocol.calls == ["message_begin", "headers_complete", "body", "message_complete", "response_complete"]
    # `BoundedProtocol.on_header` inlines uvicorn's: names lowered, Expect: 100-continue noted.
    assert protocol.headers[1:3] == [(b"expect", b"100-continue"), (b"x-case", b"Upper")]
    assert protocol.expect_100_continue
    assert protocol.transport is wire
    assert protocol.loop is asyncio.get_running_loop()
    assert protocol.client == ("127.0.0.1", 5000)
    assert protocol.connections is state.connections
    assert protocol in state.connections
    assert protocol.parser.should_upgrade() is False
    assert protocol.flow.read_paused is False
    cycle = protocol.cycle
    assert (cycle.response_started, cycle.response_complete, cycle.keep_alive, cycle.disconnected) == (
        True, True, True, False
    )  # fmt: skip
    assert cycle.waiting_for_100_continue is False  # the app read the body: no `100 Continue` owed any more
    assert isinstance(cycle.message_event, asyncio.Event)
    assert b"\r\ngot body\r\n" in wire.written
    protocol.timeout_keep_alive_handler()  # the idle timeout the listener defers while a request is under way
    assert wire.closing


async def test_status_line_is_the_first_line_uvicorn_writes() -> None:
    _, wire, _ = await _answered()
    assert uv.STATUS_LINE[200] == b"HTTP/1.1 200 OK\r\n"
    assert bytes(wire.written).startswith(b"HTTP/1.1 100 Continue\r\n\r\n" + uv.STATUS_LINE[200])
    assert uv.STATUS_LINE[431] == b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    assert set(uv.STATUS_LINE) >= {400, 408, 431, 503}  # the listener's refusals


async def test_server_state_is_what_a_uvicorn_server_shares_with_its_connections() -> None:
    assert isinstance(uvicorn.Server(_config()).server_state, uv.ServerState)
    protocol, _, state = await _answered()
    assert protocol.server_state is state
    assert state.total_requests == 1  # counted per answer (the listener counts its refusals the same way)
    assert isinstance(state.default_headers, list)
    assert isinstance(state.tasks, set)


async def test_unset_keepalive_cancels_the_idle_timer() -> None:
    protocol, _, _ = await _answered()
    timer = protocol.timeout_keep_alive_task
    assert isinstance(timer, asyncio.TimerHandle)  # armed once the answer went out
    uv.unset_keepalive(protocol)
    assert timer.cancelled()
    assert protocol.timeout_keep_alive_task is None


# --- the door is the only one

_DOOR = Path(uv.__file__)


def test_no_other_worker_module_uses_a_private_uvicorn_name() -> None:
    found = []
    for path in Path(mrtr_worker.__file__).parent.rglob("*.py"):
        if path == _DOOR:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "uvicorn":
                exported = node.module == "uvicorn" and all(a.name in uvicorn.__all__ for a in node.names)
                if not exported:
                    found.append(f"{path.name}: from {node.module} import {[a.name for a in node.names]}")
            elif isinstance(node, ast.Import):
                found += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("uvicorn.")]
            elif isinstance(node, ast.Attribute) and node.attr == "_unset_keepalive_if_required":
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "uvicorn"
                and node.attr not in uvicorn.__all__
            ):
                found.append(f"{path.name}:{node.lineno}: uvicorn.{node.attr}")
    assert found == []
