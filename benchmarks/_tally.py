"""What a closed-loop run of checked calls adds up to: done in the window, wrong, percentiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from mrtr_ops.percentiles import percentile


class CheckedCall(Protocol):
    @property
    def seconds(self) -> float: ...
    @property
    def in_window(self) -> bool: ...
    @property
    def correct(self) -> bool: ...


CallT = TypeVar("CallT", bound=CheckedCall)


@dataclass
class Tally(Generic[CallT]):
    """Calls of one row; only calls that ended in the window and were right count as done."""

    calls: list[CallT] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped_share: float | None = None

    @property
    def done(self) -> int:
        return sum(call.in_window and call.correct for call in self.calls)

    @property
    def wrong(self) -> int:
        return sum(not call.correct for call in self.calls)

    def p(self, q: int) -> float:
        return percentile([call.seconds for call in self.calls], q)
