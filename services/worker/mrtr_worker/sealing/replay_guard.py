"""At most once: a tool that opts in accepts each of its sealed `requestState`s once, fleet-wide.

The SDK's boundary binds a state to its call, principal, audience and expiry, but any number of
presentations within the TTL pass it ("These checks don't guarantee single use. If state must be
consumed at most once, the server MUST enforce that server-side"). For a tool whose next round has
a side effect (it creates a task, connects a vault), a replayed state would repeat that effect.

How, for a tool declared with `SingleUseTools.declare` in its pack:

* every state the tool hands out carries a fresh random id and its expiry (a top-level `once` field
  of the plaintext, added here just before the boundary seals it; layouts carry unknown top-level
  fields forward, and a state of any other tool has the field removed);
* when a retry presents such a state (after the boundary has verified it), the worker records the
  id in the fleet's Redis with `SET NX` and an expiry of the state's remaining TTL (plus a clock-skew
  allowance): the first presentation anywhere in the fleet wins, a second one, on this instance or
  another, is refused with -32602 before the tool runs.

Without Redis a declared tool is refused outright (a tool error on every call, the first included):
serving it unguarded would silently drop the promise, and refusing only at the retry would waste the
user's answers. A state is spent when it is accepted, so a round that then fails cannot be retried
with the same state: at most once, not exactly once.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.asyncio as redis
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from mcp_types.methods import is_input_required
from redis.exceptions import RedisError

MARK = "once"
"""The plaintext field that carries a single-use state's id and expiry (epoch seconds)."""

CLOCK_SKEW_SECONDS = 60.0
"""Kept beyond the remaining TTL: another instance's clock may accept the state a little longer
(the SDK's boundary itself tolerates 60 s of skew on the issue time)."""


class SingleUseTools:
    """The tools whose states are accepted at most once; packs declare them where they register the tool."""

    def __init__(self) -> None:
        self._tools: set[str] = set()

    def declare(self, tool: str) -> None:
        self._tools.add(tool)

    def __contains__(self, tool: object) -> bool:
        return tool in self._tools


class SpentStates:
    """The fleet's record of accepted single-use states, in the shared Redis (`{prefix}spent:{id}`)."""

    def __init__(self, client: redis.Redis, *, prefix: str, instance_id: str) -> None:
        self._client = client
        self._prefix = prefix
        self._instance_id = instance_id

    async def spend(self, state_id: str, ttl_ms: int) -> bool:
        """Record the state as accepted by this instance; False when it already was (anywhere)."""
        key = f"{self._prefix}spent:{state_id}"
        return bool(await self._client.set(key, self._instance_id, nx=True, px=max(1, ttl_ms)))


class ReplayGuard:
    """SDK middleware, innermost (after the requestState boundary): it sees verified plaintext both ways."""

    def __init__(self, tools: SingleUseTools, spent: SpentStates | None, *, ttl_seconds: float) -> None:
        self._tools = tools
        self._spent = spent
        self._ttl_seconds = ttl_seconds

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        tool = params.get("name")
        if ctx.method != "tools/call" or tool not in self._tools:
            return _unmarked(await call_next(ctx))
        if self._spent is None:
            return _refused(str(tool))
        state = params.get("requestState")
        if isinstance(state, str):
            await self._accept_once(str(tool), state)
        return self._marked(await call_next(ctx))

    async def _accept_once(self, tool: str, plaintext: str) -> None:
        assert self._spent is not None
        mark = _read_mark(plaintext)
        if mark is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"requestState has no single-use mark ({tool} accepts each state once); start the call again",
                data={"reason": "request_state_unmarked"},
            )
        state_id, expires = mark
        ttl_ms = math.ceil((expires - time.time() + CLOCK_SKEW_SECONDS) * 1000)
        try:
            first = await self._spent.spend(state_id, ttl_ms)
        except RedisError:
            raise MCPError(
                code=INTERNAL_ERROR,
                message="cannot check single use: the shared store did not answer; the requestState is unspent, retry",
                data={"reason": "single_use_store_unavailable"},
            ) from None
        if not first:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"requestState already used: {tool} accepts each state once; start the call again",
                data={"reason": "request_state_replayed"},
            )

    def _marked(self, result: HandlerResult) -> HandlerResult:
        mark = {"id": secrets.token_urlsafe(16), "exp": round(time.time() + self._ttl_seconds, 3)}
        return _rewrite_state(result, lambda doc: {**doc, MARK: mark})


def _read_mark(plaintext: str) -> tuple[str, float] | None:
    try:
        mark = json.loads(plaintext).get(MARK)
        state_id, expires = mark["id"], mark["exp"]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    if not isinstance(state_id, str) or not isinstance(expires, int | float) or not state_id:
        return None
    return state_id, float(expires)


def _unmarked(result: HandlerResult) -> HandlerResult:
    """A state of a tool that is not single-use here must not carry a mark forward (it would look spent later)."""
    return _rewrite_state(result, lambda doc: {k: v for k, v in doc.items() if k != MARK}, only_if=f'"{MARK}"')


def _rewrite_state(
    result: HandlerResult, change: Callable[[dict[str, Any]], dict[str, Any]], *, only_if: str | None = None
) -> HandlerResult:
    if not is_input_required(result):
        return result
    state = result.get("requestState") if isinstance(result, Mapping) else result.request_state
    if not isinstance(state, str) or (only_if is not None and only_if not in state):
        return result
    doc = json.loads(state)
    if not isinstance(doc, dict):
        return result
    rewritten = json.dumps(change(doc), separators=(",", ":"))
    if isinstance(result, Mapping):
        return {**result, "requestState": rewritten}
    return result.model_copy(update={"request_state": rewritten})


def _refused(tool: str) -> CallToolResult:
    text = (
        f"{tool} accepts each requestState at most once, which needs the fleet's shared store, and this worker "
        "has none (MRTR_WORKER_REDIS_URL is unset)"
    )
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
