"""A cell of the matrix: how one client did at one feature, and why.

Four outcomes, and only one fails the run: `FAIL`, a wrong or missing answer
that is not a known gap of the client (the server is presumed wrong, as an
official client disagreeing with us means we are wrong until shown otherwise).
A `GAP` is the client's own shortcoming, cited to its source line; `REFUSED`
is the server refusing on purpose (an anonymous `connect_vault`, a 2025-era
request), with the exact refusal checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    FAIL = "fail"
    GAP = "client gap"
    REFUSED = "refused by design"


@dataclass(frozen=True)
class Citation:
    """A line in an installed client's source (relative to its package's root)."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Cell:
    verdict: Verdict
    detail: str
    citations: tuple[Citation, ...] = ()
    notes: tuple[str, ...] = field(default=())
    """Worth knowing, not a failure (e.g. a client showing less than the server sent)."""
    explanation: str = ""
    """For a gap: why it is the client's (the same for every cell the gap shows in)."""

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.FAIL


def passed(detail: str, *notes: str) -> Cell:
    return Cell(Verdict.PASS, detail, notes=notes)


def failed(detail: str) -> Cell:
    return Cell(Verdict.FAIL, detail)


def refused(detail: str) -> Cell:
    return Cell(Verdict.REFUSED, detail)


def any_failed(cells: Iterable[Cell]) -> bool:
    """Whether the server's side failed anywhere: the run's exit status."""
    return any(cell.failed for cell in cells)


class Mismatch(Exception):
    """An answer that is not the expected one; its message says what differed."""


def expect(condition: bool, message: str) -> None:
    """Raise `Mismatch(message)` unless `condition` holds: the checks' one way to say what was wrong."""
    if not condition:
        raise Mismatch(message)


def expect_equal(actual: object, expected: object, what: str) -> None:
    expect(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")
