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

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ClientCapabilities, InputRequiredResult

from mrtr_worker.inputs import InputRequestWire

PROTOCOL_VERSION = "2026-07-28"

ROUND_META_KEY = "mrtr-cluster.dev/round"
"""Vendor `_meta` key on every input_required result: why the round ended and the retry hint."""

STATE_FORMAT = 1
"""Layout of the plaintext inside `requestState`; bumped only by an expand-then-contract rollout."""

MAX_VISITED = 32
"""Visited instances kept in the trace; older entries are dropped (the hop count stays exact)."""


class EndOfRound(StrEnum):
    """Why a round ended without a complete result."""

    INPUT = "input"
    ADMISSION = "admission"
    PRESSURE = "pressure"
    SLICE = "slice"
    DRAIN = "drain"


@dataclass(frozen=True)
class WorkerIdentity:
    instance_id: str
    version: int


@dataclass
class Trace:
    """Rounds this request has ended so far and the instances that served them."""

    hops: int = 0
    visited: list[list[Any]] = field(default_factory=list)

    def record(self, identity: WorkerIdentity) -> None:
        self.hops += 1
        self.visited.append([identity.instance_id, identity.version])
        del self.visited[:-MAX_VISITED]


class UnreadableState(MCPError):
    """A state this worker cannot interpret: the client must start the call again."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            code=INVALID_PARAMS,
            message=f"requestState not understood ({detail}); start the call again without it",
            data={"reason": "unreadable_request_state", "restart": True},
        )


class Round:
    """The handler's view of one round: prior data, answers, capabilities."""

    def __init__(self, ctx: Context[Any, Any], identity: WorkerIdentity) -> None:
        self.identity = identity
        self.capabilities: ClientCapabilities | None = ctx.client_capabilities
        self.responses: Mapping[str, Any] = ctx.input_responses or {}
        self.data, self.trace, self._extra = _decode(ctx.request_state)

    @property
    def first(self) -> bool:
        """True on the first round of a request (no state came back)."""
        return self.trace.hops == 0

    def ask(self, requests: Mapping[str, InputRequestWire], data: Mapping[str, Any]) -> InputRequiredResult:
        """End the round asking the client the given questions."""
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
        self.trace.record(self.identity)
        hint: dict[str, Any] = {"reason": reason.value, "hops": self.trace.hops}
        if retry_after_ms is not None:
            hint["retryAfterMs"] = retry_after_ms
        return InputRequiredResult(
            result_type="input_required",
            input_requests=requests,  # type: ignore[arg-type]  # wire dicts; the SDK validates them
            request_state=_encode(data, self.trace, self._extra),
            _meta={ROUND_META_KEY: hint},
        )


def _encode(data: Mapping[str, Any], trace: Trace, extra: Mapping[str, Any]) -> str:
    # Unknown top-level fields written by another version are carried forward untouched.
    doc = {**extra, "fmt": STATE_FORMAT, "data": dict(data), "hops": trace.hops, "visited": trace.visited}
    return json.dumps(doc, separators=(",", ":"))


def _decode(plaintext: str | None) -> tuple[dict[str, Any], Trace, dict[str, Any]]:
    if plaintext is None:
        return {}, Trace(), {}
    try:
        doc = json.loads(plaintext)
        fmt, data, hops, visited = doc.pop("fmt"), doc.pop("data"), doc.pop("hops"), doc.pop("visited")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UnreadableState("malformed plaintext") from None
    if fmt != STATE_FORMAT:
        raise UnreadableState(f"state format {fmt!r}, this worker reads {STATE_FORMAT}")
    if not isinstance(data, dict) or not isinstance(hops, int) or not isinstance(visited, list):
        raise UnreadableState("malformed plaintext")
    return data, Trace(hops=hops, visited=visited), doc
