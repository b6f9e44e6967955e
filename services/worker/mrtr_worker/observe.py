"""SDK middleware that counts every MCP request by method and outcome.

It sits just inside OpenTelemetry and outside the SDK's requestState
boundary, so it sees sealed tokens both ways (their real wire size) and the
boundary's rejections as errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mrtr_protocol.rounds import ROUND_META_KEY
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics


class ObserveRequests:
    """Metrics for requests, input_required reasons and requestState sizes."""

    def __init__(self, metrics: WorkerMetrics, lifecycle: Lifecycle) -> None:
        self._metrics = metrics
        self._lifecycle = lifecycle

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        m = self._metrics
        incoming = ctx.params.get("requestState") if ctx.params else None
        if isinstance(incoming, str):
            m.state_bytes.labels(direction="in").observe(len(incoming))
        m.in_flight.inc()
        try:
            with self._lifecycle.busy():
                result = await call_next(ctx)
        except BaseException:
            m.requests.labels(method=ctx.method, outcome="error").inc()
            raise
        finally:
            m.in_flight.dec()
        wire = _as_wire(result)
        m.requests.labels(method=ctx.method, outcome=_outcome(wire)).inc()
        if wire.get("resultType") == "input_required":
            hint = (wire.get("_meta") or {}).get(ROUND_META_KEY) or {}
            m.input_required.labels(reason=str(hint.get("reason", "input"))).inc()
            state = wire.get("requestState")
            if isinstance(state, str):
                m.state_bytes.labels(direction="out").observe(len(state))
        return result


def _as_wire(result: HandlerResult) -> Mapping[str, Any]:
    if result is None:
        return {}
    if isinstance(result, Mapping):
        return result
    dump: Mapping[str, Any] = result.model_dump(by_alias=True, exclude_none=True)
    return dump


def _outcome(wire: Mapping[str, Any]) -> str:
    if wire.get("resultType") in ("input_required", "task"):
        return str(wire["resultType"])
    if wire.get("isError") is True:
        return "tool_error"
    return "complete"
