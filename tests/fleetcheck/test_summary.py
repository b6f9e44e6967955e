"""Holding the load's answers to the wanted ones, the tampered state, and the summary's counts."""

from __future__ import annotations

import pytest

from mrtr_fleet_check.load import CallRecord
from mrtr_fleet_check.probes import Answer, tampered
from mrtr_fleet_check.scenario import Call, Expect
from mrtr_fleet_check.servers import split_command
from mrtr_fleet_check.summary import Summary, call_key, compare
from mrtr_fleet_check.verdict import Observations, Probe, ProbeResult, Protocol, name_verdict

ADD = Call("add_up", {"numbers": [1, 2]})
KEY = call_key(ADD.tool, ADD.arguments)
REFERENCES = {KEY: {"1": Answer("{'total': 3}"), "2": Answer("{'total': 30}")}}


def record(**fields: object) -> CallRecord:
    base: dict[str, object] = {
        "tool": "add_up",
        "arguments": {"numbers": [1, 2]},
        "rounds": 2,
        "hand_backs": 1,
        "questions": {"confirm": 1},
    }
    return CallRecord(**{**base, **fields})  # type: ignore[arg-type]


def test_an_answer_is_held_to_the_reference_of_the_version_that_finished_it() -> None:
    by_v1 = record(structured={"total": 3}, versions=["1"], finished_by="1")
    by_v2 = record(structured={"total": 30}, versions=["1", "2"], finished_by="2")
    back_on_v1 = record(structured={"total": 3}, versions=["1", "2"], finished_by="1")
    wrong = record(structured={"total": 3}, versions=["1", "2"], finished_by="2")
    mismatches, lost = compare([by_v1, by_v2, back_on_v1, wrong], [ADD], REFERENCES)
    assert [(m.got, m.wanted) for m in mismatches] == [("{'total': 3}", "{'total': 30}")]
    assert lost == []


def test_without_named_versions_any_instances_answer_is_right_and_an_error_is_a_different_answer() -> None:
    unnamed = record(structured={"total": 30})
    refused = record(error="Invalid or expired requestState")
    mismatches, _ = compare([unnamed, refused], [ADD], REFERENCES)
    assert [m.got for m in mismatches] == ["error: Invalid or expired requestState"]


def test_the_scenarios_expect_wins_over_the_reference_and_lost_calls_are_listed() -> None:
    expecting = Call("add_up", {"numbers": [1, 2]}, expect=Expect(text="3"))
    mismatches, lost = compare(
        [record(text="3"), record(text="4"), record(lost="RetryBudgetExhausted: gave up")], [expecting], REFERENCES
    )
    assert [m.got for m in mismatches] == ["'4'"]
    assert lost == ["add_up: RetryBudgetExhausted: gave up"]


def test_an_expected_text_is_compared_with_the_text_alone() -> None:
    """FastMCP wraps a tool's string in `structuredContent: {"result": ...}` as well: the text still matches."""
    expecting = Call("greet", {}, expect=Expect(text="Hello, Ada!"))
    wrapped = record(tool="greet", arguments={}, text="Hello, Ada!", structured={"result": "Hello, Ada!"})
    other = record(tool="greet", arguments={}, text="Ahoy, Ada!", structured={"result": "Ahoy, Ada!"})
    mismatches, _ = compare([wrapped, other], [expecting], {})
    assert [m.got for m in mismatches] == ["'Ahoy, Ada!'"]


def test_the_summary_counts_what_the_walkthrough_counts() -> None:
    records = [
        record(structured={"total": 3}, versions=["1", "2"], questions={"confirm": 2}),
        record(structured={"total": 3}, versions=["1"]),
        record(error="Invalid or expired requestState"),
    ]
    refused = ProbeResult(Probe.REFUSED, "Invalid or expired requestState")
    seen = Observations(Protocol(True), refused, refused, refused, ProbeResult(Probe.NOT_APPLICABLE, "no tokens"))
    data = Summary("s", records, seen, name_verdict(seen)).as_json()
    assert data["requests"] == 3
    assert (data["completed"], data["failures"]) == (2, 1)
    assert data["questions_asked_twice"] == 1
    assert data["visited_both_versions"] == 1
    assert data["server_errors"] == [{"message": "Invalid or expired requestState", "calls": 1}]
    assert data["verdict"] == "refused_across_instances"
    assert data["probes"]["foreign_principal"] == "not applicable: no tokens"


def test_a_tampered_state_differs_in_one_character_of_the_same_kind() -> None:
    for state in ("abcdefg", "ABCDEFG", "0123456", "xyzAyz", "xyz1yz"):
        changed = tampered(state)
        assert len(changed) == len(state)
        differing = [(a, b) for a, b in zip(state, changed, strict=True) if a != b]
        assert len(differing) == 1
        ((before, after),) = differing
        assert before.isdigit() == after.isdigit()
        assert before.islower() == after.islower()


def test_a_server_command_needs_its_port() -> None:
    assert split_command("python -m app --port {port}") == ["python", "-m", "app", "--port", "{port}"]
    with pytest.raises(ValueError, match=r"has no \{port\}"):
        split_command("python -m app")
    with pytest.raises(ValueError, match="empty"):
        split_command("  ")
    with pytest.raises(ValueError, match="cannot split"):
        split_command("python 'unclosed {port}")
