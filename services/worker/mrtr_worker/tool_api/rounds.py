"""One round of a multi round-trip request, as a tool handler sees it.

A handler reads what earlier rounds left (`Round.data`, decrypted by the SDK's
boundary before the handler runs) and the client's answers, then ends the
round in one of three ways:

* return a complete result;
* `ask(...)`: input_required with input requests and the data to resume from;
* `hand_back(...)`: input_required with no questions, only the data: the
  client retries at once and any instance continues (load shedding, drain,
  time slice). This is the same path as `ask`, which is the point of MRTR.

Every ended round records where it ran, so a request's state carries its own
hop trace and the client sees why each round ended in the result `_meta`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_types import ClientCapabilities, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mrtr_protocol.rounds import ROUND_META_KEY, EndOfRound
from mrtr_worker.sealing.layout import StateLayout
from mrtr_worker.tool_api.capabilities import need_of, require
from mrtr_worker.tool_api.inputs import InputRequestWire


class RoundSource(Protocol):
    """What a round reads of its request: the SDK's `Context`, or the resume fast path's `RoundContext`."""

    @property
    def client_capabilities(self) -> ClientCapabilities | None: ...

    @property
    def input_responses(self) -> Mapping[str, Any] | None: ...

    @property
    def protocol_version(self) -> str | None: ...

    @property
    def request_state(self) -> str | None: ...


@dataclass(frozen=True)
class RoundContext:
    """A round's request without the SDK's per-request context (`mrtr_worker.edge.fast_resume` builds it)."""

    client_capabilities: ClientCapabilities | None
    input_responses: Mapping[str, Any] | None
    protocol_version: str | None
    request_state: str | None


@dataclass(frozen=True)
class WorkerInstance:
    """Who serves a round, and the state layout policy it follows (shared, switchable at run time)."""

    instance_id: str
    version: int
    layout: StateLayout


class Round:
    """The handler's view of one round: prior data, answers, capabilities."""

    def __init__(self, ctx: RoundSource, identity: WorkerInstance) -> None:
        self.identity = identity
        self.capabilities: ClientCapabilities | None = ctx.client_capabilities
        self.responses: Mapping[str, Any] = ctx.input_responses or {}
        self.can_hand_back = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        """False on a 2025-era request: that wire has no input_required (over HTTP the edge refuses them, -32022)."""
        decoded = identity.layout.decode(ctx.request_state)
        self.data, self.trace, self._extra = decoded.data, decoded.trace, decoded.extra

    def ask(self, requests: Mapping[str, InputRequestWire], data: Mapping[str, Any]) -> InputRequiredResult:
        """End the round asking the client the given questions.

        Every question is checked against this round's own `clientCapabilities` (a retry may declare less
        than the request that started the call): one the client did not declare is never sent, the round
        answers -32021 with the capability it needs instead. Handlers check first with a clearer reason;
        this is the net under every tool, on every round.
        """
        for key, request in requests.items():
            need = need_of(request)
            require(self.capabilities, need, why=f"input request {key!r} needs {need.value} on this request")
        return self._end(data, EndOfRound.INPUT, dict(requests), retry_after_ms=None)

    def hand_back(self, data: Mapping[str, Any], reason: EndOfRound, *, retry_after_ms: int = 0) -> InputRequiredResult:
        """End the round with no questions: the client retries and any instance resumes from `data`."""
        return self._end(data, reason, None, retry_after_ms=retry_after_ms)

    def _end(
        self,
        data: Mapping[str, Any],
        reason: EndOfRound,
        requests: dict[str, InputRequestWire] | None,
        *,
        retry_after_ms: int | None,
    ) -> InputRequiredResult:
        self.trace.record(self.identity.instance_id, self.identity.version)
        hint: dict[str, Any] = {"reason": reason.value, "hops": self.trace.hops}
        if retry_after_ms is not None:
            hint["retryAfterMs"] = retry_after_ms
        return InputRequiredResult(
            result_type="input_required",
            input_requests=requests,  # type: ignore[arg-type]  # wire dicts; the SDK validates them
            request_state=self.identity.layout.encode(data, self.trace, self._extra),
            _meta={ROUND_META_KEY: hint},
        )
