"""Naming the cause: a pure function from what the check observed to the verdict and its explanation.

The causes are tried in a fixed order (the shared contract of issue #38) and the first that holds is
the verdict, its explanation quoting what the server answered. Nothing here does I/O, so every cause
is unit-tested on made-up observations (tests/fleetcheck/test_verdict.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Probe(StrEnum):
    """How a directed probe of a `requestState` ended."""

    ACCEPTED = "accepted"
    """The server went on with the state (another round or a complete result)."""
    REFUSED = "refused"
    """The server answered with an error."""
    NOT_APPLICABLE = "not applicable"
    """Nothing to probe (no second token, no call that hands back a state, no second version)."""


@dataclass(frozen=True)
class ProbeResult:
    outcome: Probe
    message: str | None = None
    """What the server said (its error message), or why the probe did not apply."""

    def describe(self) -> str:
        return f"{self.outcome}" + (f": {self.message}" if self.message else "")


@dataclass(frozen=True)
class Protocol:
    """What the server answered to a 2026-07-28 request without a session, and to an older `initialize`."""

    speaks_current: bool
    issues_sessions: bool = False
    message: str | None = None
    """The server's answer to the 2026-07-28 request when it refused it."""


@dataclass(frozen=True)
class Mismatch:
    """A call whose answer was not the one instance's answer (or the scenario's `expect`)."""

    tool: str
    got: str
    wanted: str


@dataclass(frozen=True)
class Observations:
    protocol: Protocol
    across_instances: ProbeResult
    after_upgrade: ProbeResult
    tampered: ProbeResult
    foreign_principal: ProbeResult
    mismatches: tuple[Mismatch, ...] = ()
    lost: tuple[str, ...] = ()
    """Calls that neither completed nor got a clear error: what happened to each (a timeout, a dropped stream)."""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    explanation: str
    causes: list[str] = field(default_factory=list)
    """Every cause that holds, in the contract's order; `verdict` is the first (or `pass`)."""


PASS = "pass"  # noqa: S105  # a verdict, not a password
SESSIONS_IN_MEMORY = "sessions_in_memory"
REFUSED_ACROSS_INSTANCES = "refused_across_instances"
REFUSED_AFTER_UPGRADE = "refused_after_upgrade"
TAMPERED_ACCEPTED = "tampered_accepted"
FOREIGN_PRINCIPAL_ACCEPTED = "foreign_principal_accepted"
ANSWER_DIFFERS = "answer_differs"
LOST = "lost"


def _quoted(message: str | None) -> str:
    return f'"{message}"' if message else "no message"


def _causes(seen: Observations) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if not seen.protocol.speaks_current and seen.protocol.issues_sessions:
        found.append(
            (
                SESSIONS_IN_MEMORY,
                "the server does not speak MCP 2026-07-28 without a session (it answered "
                f"{_quoted(seen.protocol.message)}) and hands out Mcp-Session-Id sessions it keeps in memory: behind "
                "a round robin the next request lands on an instance where its session is unknown",
            )
        )
    if seen.across_instances.outcome is Probe.REFUSED:
        found.append(
            (
                REFUSED_ACROSS_INSTANCES,
                "a requestState sealed by one instance was refused by another instance of the same version, which "
                f"answered {_quoted(seen.across_instances.message)}: each instance seals with a key of its own "
                "(a key made per process); give every instance the same key ring",
            )
        )
    if seen.after_upgrade.outcome is Probe.REFUSED:
        found.append(
            (
                REFUSED_AFTER_UPGRADE,
                "a requestState sealed by version 1 was refused by version 2, which answered "
                f"{_quoted(seen.after_upgrade.message)}: version 2 must still read (and unseal) what version 1 "
                "handed out, with the old key kept in its ring",
            )
        )
    if seen.tampered.outcome is Probe.ACCEPTED:
        found.append(
            (
                TAMPERED_ACCEPTED,
                "a requestState with one character changed was accepted: the state is not sealed (no integrity "
                "check), so a client can rewrite a request's progress",
            )
        )
    if seen.foreign_principal.outcome is Probe.ACCEPTED:
        found.append(
            (
                FOREIGN_PRINCIPAL_ACCEPTED,
                "a requestState sealed for one user was accepted for another: a stolen state can be replayed by "
                "another principal; bind the state to the caller",
            )
        )
    if seen.mismatches:
        first = seen.mismatches[0]
        found.append(
            (
                ANSWER_DIFFERS,
                f"{len(seen.mismatches)} call(s) answered differently from one instance's answer to the same call; "
                f"first: {first.tool} answered {first.got}, one instance answered {first.wanted}",
            )
        )
    if seen.lost:
        found.append((LOST, f"{len(seen.lost)} call(s) neither completed nor got a clear error; first: {seen.lost[0]}"))
    return found


def name_verdict(seen: Observations) -> Verdict:
    """The first cause that holds, in the contract's order, explained from what the server answered; else pass."""
    found = _causes(seen)
    if not found:
        return Verdict(
            PASS,
            "every call completed with one instance's answer, states moved across instances and versions, "
            f"the tampered state was {seen.tampered.outcome}, the foreign principal's state "
            f"{seen.foreign_principal.outcome}",
        )
    return Verdict(found[0][0], found[0][1], [cause for cause, _ in found])
