"""Two in-process workers, the resume fast path on in one and off in the other, asked the same things.

Both hold the same key ring and instance id, so a state one seals opens in the other; a request
goes to each through its ASGI app, and the answers (status, headers, body) can be compared byte
for byte. Shared by the fast path's behaviour tests and its corpus of states.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from pydantic import SecretStr
from starlette.types import Message

from mrtr_protocol.wire import PROTOCOL_VERSION, encode_request, request_headers, request_meta
from mrtr_worker.compute.policy import SheddingSettings
from mrtr_worker.config import WorkerSettings
from mrtr_worker.edge.front_door import FrontDoor
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing

TOOL = "count_primes"
ARGUMENTS = {"limit": 2_000, "segment": 1_000}  # two short steps: a resumed round runs to the end
SERVED = "mrtr_worker_fast_resumes_total"

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def settings(ring: KeyRing, public_key: Path, *, fast: bool) -> WorkerSettings:
    """Anonymous calls allowed, tokens verified: states are bound to the caller, or to nobody."""
    return WorkerSettings(
        instance_id="w-fast",
        keyring=SecretStr(ring.dumps()),
        allow_anonymous=True,
        jwt_public_key_file=public_key,
        tool_packs=["compute"],
        fast_resume=fast,
        shedding=SheddingSettings(max_concurrent=1),
    )


async def post(app: FrontDoor, body: bytes, headers: dict[str, str]) -> Answer:
    """One POST /mcp through the app; the answer without its Date header."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode())
            for k, v in {**headers, "host": "127.0.0.1:8000", "content-length": str(len(body))}.items()
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body_out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], [h for h in start["headers"] if h[0] != b"date"], body_out


def params(token: Any, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A call of the tool, resuming `token` when it is not None."""
    out: dict[str, Any] = {"_meta": request_meta({}), "name": TOOL, "arguments": arguments or ARGUMENTS, **extra}
    if token is not None:
        out["requestState"] = token
    return out


def request(call: dict[str, Any], **header_changes: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers a correct client sends for `call`, with some headers changed."""
    return encode_request(3, "tools/call", call), {**request_headers("tools/call", call), **header_changes}


def envelope(ring: KeyRing, token: str) -> dict[str, Any]:
    """The claims a sealed state carries."""
    claims: dict[str, Any] = json.loads(FleetStateCodec(ring, max_token_bytes=1 << 20).open(token)[1])
    return claims


def seal(ring: KeyRing, payload: bytes) -> str:
    """Any payload sealed under the ring's primary key, as only a key holder can."""
    return FleetStateCodec(ring, max_token_bytes=1 << 20).seal(payload)


def reseal(ring: KeyRing, token: str, *, under: KeyRing | None = None, **claims: Any) -> str:
    """The same state with some envelope claims changed, sealed again under `under` (default `ring`)."""
    payload = json.dumps({**envelope(ring, token), **claims}, separators=(",", ":")).encode()
    return seal(under or ring, payload)


async def digest_for(app: FrontDoor, ring: KeyRing, arguments: dict[str, Any]) -> str:
    """The argument digest (`a`) the app's own requestState boundary binds a state to for these arguments."""
    mcp = app.state.worker.mcp
    boundary = next(m for m in mcp.middleware if isinstance(m, RequestStateBoundary))

    async def hand_back(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return {"resultType": "input_required", "requestState": "any"}

    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=cast(Any, None),
        lifespan_context=None,
        protocol_version=PROTOCOL_VERSION,
        method="tools/call",
        params={"name": TOOL, "arguments": arguments},
        request_id=1,
    )
    sealed = await boundary(ctx, hand_back)
    assert isinstance(sealed, dict)
    digest: str = envelope(ring, sealed["requestState"])["a"]
    return digest


def served(app: FrontDoor) -> float:
    """Rounds the app's fast path has served itself."""
    value = app.state.worker.metrics.registry.get_sample_value(SERVED, {"outcome": "served"})
    return value or 0.0


@asynccontextmanager
async def running(*apps: FrontDoor) -> AsyncIterator[None]:
    """Both apps started (their lifespans entered) for the block."""
    async with (
        apps[0]._host.router.lifespan_context(apps[0]._host),
        apps[1]._host.router.lifespan_context(apps[1]._host),
    ):
        yield


async def first_state(app: FrontDoor, **headers: str) -> str:
    """A real state of the tool's first round: a drain hands the round back at once."""
    app.state.worker.lifecycle.drain()
    status, _, first = await post(app, *request(params(None), **headers))
    app.state.worker.lifecycle.undrain()
    assert status == 200
    state: str = json.loads(first)["result"]["requestState"]
    return state
