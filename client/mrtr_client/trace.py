"""What happened to one call: a hop per HTTP exchange, and the questions the user was asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hop:
    """One HTTP exchange of a call: where it landed and why that round ended.

    `reason` is the server's (`input`, `admission`, `pressure`, `slice`,
    `drain`), or `complete`, `error`, or `transport` (not delivered, or no
    answer; the client retried with its last state).
    """

    instance: str | None
    version: str | None
    reason: str
    http_status: int | None
    elapsed_ms: float
    state_bytes: int = 0
    detail: str | None = None


@dataclass(frozen=True)
class Question:
    """One input request the server sent, and which round it came in."""

    key: str
    method: str
    round: int


@dataclass
class CallTrace:
    hops: list[Hop] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def instances(self) -> list[str]:
        """Distinct instances that served a round, in order of first visit."""
        seen: dict[str, None] = {}
        for hop in self.hops:
            if hop.instance is not None:
                seen.setdefault(hop.instance)
        return list(seen)

    @property
    def versions(self) -> list[str]:
        seen: dict[str, None] = {}
        for hop in self.hops:
            if hop.version is not None:
                seen.setdefault(hop.version)
        return list(seen)

    @property
    def reasked(self) -> list[str]:
        """Keys asked more than once in this call (a correct server never re-asks an answered key)."""
        counts: dict[str, int] = {}
        for q in self.questions:
            counts[q.key] = counts.get(q.key, 0) + 1
        return [key for key, n in counts.items() if n > 1]


@dataclass(frozen=True)
class CallResult:
    """The complete result of a call and how it got there."""

    result: dict[str, Any]
    trace: CallTrace

    @property
    def is_error(self) -> bool:
        return self.result.get("isError") is True

    @property
    def structured(self) -> Any:
        return self.result.get("structuredContent")

    @property
    def text(self) -> str:
        """The text blocks of a tool result, joined."""
        return "\n".join(
            block.get("text", "") for block in self.result.get("content", []) if block.get("type") == "text"
        )
