"""SDK middleware that counts every MCP request by method and outcome.

It sits just inside OpenTelemetry (when tracing is configured) and outside the SDK's requestState
boundary, so it sees sealed tokens both ways (their real wire size) and the
boundary's rejections as errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from prometheus_client import Counter
from pydantic import BaseModel

from mrtr_protocol.rounds import ROUND_META_KEY
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics


class ObserveRequests:
    """Metrics for requests, input_required reasons and requestState sizes.

    On every request, so it does only what it must: label children are looked
    up once and kept, and a result is read by its attributes, never dumped.
    """

    def __init__(self, metrics: WorkerMetrics, lifecycle: Lifecycle) -> None:
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._bytes_in = metrics.state_bytes.labels(direction="in")
        self._bytes_out = metrics.state_bytes.labels(direction="out")
        self._counters: dict[tuple[str, str], Counter] = {}
        self._reasons: dict[str, Counter] = {}

    def _count(self, method: str, outcome: str) -> None:
        counter = self._counters.get((method, outcome))
        if counter is None:
            counter = self._counters[(method, outcome)] = self._metrics.requests.labels(method=method, outcome=outcome)
        counter.inc()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        m = self._metrics
        incoming = ctx.params.get("requestState") if ctx.params else None
        if isinstance(incoming, str):
            self._bytes_in.observe(len(incoming))
        m.in_flight.inc()
        try:
            with self._lifecycle.busy():
                result = await call_next(ctx)
        except BaseException:
            self._count(ctx.method, "error")
            raise
        finally:
            m.in_flight.dec()
        result_type, is_error = _field(result, "resultType", "result_type"), _field(result, "isError", "is_error")
        self._count(ctx.method, _outcome(result_type, is_error))
        if result_type == "input_required":
            meta = _field(result, "_meta", "meta")
            if isinstance(meta, BaseModel):
                meta = meta.model_dump(by_alias=True)
            hint = (meta or {}).get(ROUND_META_KEY) or {}
            reason = str(hint.get("reason", "input"))
            counter = self._reasons.get(reason)
            if counter is None:
                counter = self._reasons[reason] = m.input_required.labels(reason=reason)
            counter.inc()
            state = _field(result, "requestState", "request_state")
            if isinstance(state, str):
                self._bytes_out.observe(len(state))
        return result


def _field(result: HandlerResult, wire_name: str, attribute: str) -> Any:
    """A field of a result, whether the handler returned wire JSON or the SDK's model."""
    if result is None:
        return None
    if isinstance(result, Mapping):
        return result.get(wire_name)
    return getattr(result, attribute, None)


def _outcome(result_type: object, is_error: object) -> str:
    if result_type in ("input_required", "task"):
        return str(result_type)
    if is_error is True:
        return "tool_error"
    return "complete"
