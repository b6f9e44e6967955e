"""The check's cause naming (`mrtr_fleet_check.verdict`): each cause from made-up observations, and their order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mrtr_fleet_check import verdict as v
from mrtr_fleet_check.verdict import Mismatch, Observations, Probe, ProbeResult, Protocol, name_verdict

REFUSED = ProbeResult(Probe.REFUSED, "Invalid or expired requestState")
ACCEPTED = ProbeResult(Probe.ACCEPTED, "the server answered input_required")
NOT_APPLICABLE = ProbeResult(Probe.NOT_APPLICABLE, "the scenario gives no second bearer token (`tokens`)")

HEALTHY = Observations(
    protocol=Protocol(speaks_current=True),
    across_instances=ACCEPTED,
    after_upgrade=ACCEPTED,
    tampered=REFUSED,
    foreign_principal=REFUSED,
)
"""A server that keeps every request whole: the baseline each test breaks in one way."""

SESSIONS = Protocol(speaks_current=False, issues_sessions=True, message="Bad Request: Missing session ID")
MISMATCH = Mismatch("add_up", "{'total': 5}", "{'total': 6}")


def test_a_server_that_keeps_requests_whole_passes() -> None:
    named = name_verdict(HEALTHY)
    assert named.verdict == v.PASS
    assert named.causes == []
    assert "tampered state was refused" in named.explanation


@pytest.mark.parametrize(
    ("broken", "cause", "quoted"),
    [
        (replace(HEALTHY, protocol=SESSIONS), v.SESSIONS_IN_MEMORY, "Bad Request: Missing session ID"),
        (replace(HEALTHY, across_instances=REFUSED), v.REFUSED_ACROSS_INSTANCES, "Invalid or expired requestState"),
        (replace(HEALTHY, after_upgrade=REFUSED), v.REFUSED_AFTER_UPGRADE, "Invalid or expired requestState"),
        (replace(HEALTHY, tampered=ACCEPTED), v.TAMPERED_ACCEPTED, "one character changed"),
        (replace(HEALTHY, foreign_principal=ACCEPTED), v.FOREIGN_PRINCIPAL_ACCEPTED, "another"),
        (replace(HEALTHY, mismatches=(MISMATCH,)), v.ANSWER_DIFFERS, "add_up answered {'total': 5}"),
        (replace(HEALTHY, lost=("add_up: RetryBudgetExhausted: gave up",)), v.LOST, "RetryBudgetExhausted"),
    ],
    ids=["sessions", "across", "upgrade", "tampered", "foreign", "differs", "lost"],
)
def test_each_cause_is_named_and_explained_from_what_the_server_answered(
    broken: Observations, cause: str, quoted: str
) -> None:
    named = name_verdict(broken)
    assert named.verdict == cause
    assert named.causes == [cause]
    assert quoted in named.explanation


def test_the_first_cause_in_the_contracts_order_wins_and_every_cause_is_listed() -> None:
    everything = Observations(
        protocol=SESSIONS,
        across_instances=REFUSED,
        after_upgrade=REFUSED,
        tampered=ACCEPTED,
        foreign_principal=ACCEPTED,
        mismatches=(MISMATCH,),
        lost=("add_up: timed out",),
    )
    named = name_verdict(everything)
    assert named.verdict == v.SESSIONS_IN_MEMORY
    assert named.causes == [
        v.SESSIONS_IN_MEMORY,
        v.REFUSED_ACROSS_INSTANCES,
        v.REFUSED_AFTER_UPGRADE,
        v.TAMPERED_ACCEPTED,
        v.FOREIGN_PRINCIPAL_ACCEPTED,
        v.ANSWER_DIFFERS,
        v.LOST,
    ]
    without_sessions = name_verdict(replace(everything, protocol=Protocol(speaks_current=True)))
    assert without_sessions.verdict == v.REFUSED_ACROSS_INSTANCES


def test_an_older_protocol_without_sessions_is_not_sessions_in_memory() -> None:
    stateless_old = replace(HEALTHY, protocol=Protocol(speaks_current=False, issues_sessions=False, message="400"))
    assert name_verdict(stateless_old).verdict == v.PASS


def test_a_probe_that_did_not_apply_is_neither_refused_nor_accepted() -> None:
    nothing_to_probe = replace(
        HEALTHY,
        across_instances=NOT_APPLICABLE,
        after_upgrade=NOT_APPLICABLE,
        tampered=NOT_APPLICABLE,
        foreign_principal=NOT_APPLICABLE,
    )
    named = name_verdict(nothing_to_probe)
    assert named.verdict == v.PASS
    assert "not applicable" in named.explanation


def test_a_refused_tampered_or_foreign_state_is_what_a_server_should_do() -> None:
    assert name_verdict(replace(HEALTHY, tampered=REFUSED, foreign_principal=REFUSED)).verdict == v.PASS


def test_the_explanation_names_how_many_calls_differed_and_without_a_message_says_so() -> None:
    two = name_verdict(replace(HEALTHY, mismatches=(MISMATCH, MISMATCH)))
    assert two.explanation.startswith("2 call(s) answered differently")
    silent = name_verdict(replace(HEALTHY, across_instances=ProbeResult(Probe.REFUSED)))
    assert "answered no message" in silent.explanation
