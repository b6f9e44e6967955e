"""A plain MCP Python SDK server that sheds load the way this project's workers do, without our worker.

    python -m mrtr_worker.sealing.keyring new --out ring.json
    export MRTR_KEYRING_FILE=ring.json
    python -m uvicorn --app-dir examples/servers/adopt-python-sdk adopt_server:app --port 8003

`count_primes` runs in steps (`mrtr_worker.compute.primes.COUNT_PRIMES`: an initial state, a pure step, a
done test, a result). After each step it may hand the computation back: `input_required` with no questions,
only the state so far in `requestState`. It does so when the server is full (`admission`: more computations
than `MAX_RUNNING` would run) and when the round has used its time slice (`slice`). The client retries at
once (after the hint, if any); a round robin sends the retry to any instance, which opens the state and
continues. What this borrows from the project: the fleet's key ring and its codec (every instance opens every
other's states; rotation without a restart), the computation API and the round hint's names. Everything
else is the SDK's public API.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import InputRequiredResult

from mrtr_protocol.rounds import ROUND_META_KEY, EndOfRound
from mrtr_worker.compute.primes import COUNT_PRIMES
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing

MAX_RUNNING = 2
"""Computations that step at once on this instance; one more is handed back at once (admission)."""
SLICE_SECONDS = 0.05
"""A round hands back after this long, so no instance holds a call for long and a drain is quick."""
MAX_STATE_BYTES = 16_384

ring = KeyRing.parse(Path(os.environ["MRTR_KEYRING_FILE"]).read_text())
server = MCPServer(
    "adopt-python-sdk",
    request_state_security=RequestStateSecurity(codec=FleetStateCodec(ring, max_token_bytes=MAX_STATE_BYTES)),
)
running = 0


def hand_back(state: dict[str, Any], reason: EndOfRound, retry_after_ms: int | None = None) -> InputRequiredResult:
    """End the round with no questions: the state so far travels sealed, and any instance continues it."""
    hint: dict[str, Any] = {"reason": reason.value, "hops": state.get("hops", 0)}
    if retry_after_ms is not None:
        hint["retryAfterMs"] = retry_after_ms
    state = {**state, "hops": state.get("hops", 0) + 1}
    return InputRequiredResult(request_state=json.dumps(state), _meta={ROUND_META_KEY: hint})


@server.tool(description="Count the primes up to `limit`, `segment` numbers a step; any instance may continue.")
async def count_primes(limit: int, ctx: Context, segment: int = 100_000) -> dict[str, Any] | InputRequiredResult:
    global running
    arguments = {"limit": limit, "segment": segment}
    state = json.loads(ctx.request_state) if ctx.request_state else COUNT_PRIMES.initial(arguments)
    if running >= MAX_RUNNING:
        return hand_back(state, EndOfRound.ADMISSION, retry_after_ms=25)
    running += 1
    try:
        deadline = time.monotonic() + SLICE_SECONDS
        while not COUNT_PRIMES.done(state):
            if time.monotonic() >= deadline:
                return hand_back(state, EndOfRound.SLICE)
            state = await asyncio.to_thread(COUNT_PRIMES.step, state)  # the event loop keeps answering
    finally:
        running -= 1
    return COUNT_PRIMES.result(state)


app = server.streamable_http_app(stateless_http=True)
