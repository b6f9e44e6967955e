"""Replays: an authentic state presented again, with new answers, never gives a wrong answer.

Replaying a state within its TTL, by the same principal and for the same
call, is accepted by design (README: single use is not prevented). What must
hold is that the answer follows from that state and the answers sent with
it: the login scenario is checked against a model of `link_accounts`
(nothing linked that was not answered, nothing asked twice, a refusal ends
the call), a computation resumed from any of its old hand-backs finishes with
the exact count, and a question asked midway folds in whatever is answered.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.packs.demo import LOGINS_BY_VERSION, PAST_TENSE, PROVIDERS
from tests.fuzz.budget import budget
from tests.fuzz.origins import ANSWERS, EXPECTED, PI, Origin, Origins, finish
from tests.fuzz.tally import TALLY
from tests.fuzz.target import FuzzTarget
from tests.fuzz.wire_strategies import any_text

NEEDED = LOGINS_BY_VERSION[1]
LINKED_BY_ROUND = {"link-1": {}, "link-2": {"github_login": "octocat"}}
"""What each replayed login state already carries."""


# --- the login scenario against a model --------------------------------------------------------------------

SKIPPED = frozenset({"empty", "too long", "not text", "no content", "other shape"})
"""Answers `link_accounts` does not take (it asks again): they fail the form's schema or are not form answers."""

names = (
    st.lists(any_text.filter(bool), min_size=1, max_size=4)
    .map("".join)
    .map(lambda s: json.loads(json.dumps(s)))  # as the worker reads it: an escaped surrogate pair is one character
    .filter(lambda s: 1 <= len(s) <= 100)
)


@st.composite
def login_answers(draw: st.DrawFn) -> tuple[str, dict[str, Any], str | None]:
    """(kind, wire answer, the name it links if taken)."""
    kind = draw(st.sampled_from(["valid"] * 5 + ["decline", "cancel", *sorted(SKIPPED)]))  # valid half the time
    if kind == "valid":
        name = draw(names)
        extras: list[dict[str, Any]] = [{}, {"extra": 1}]  # other fields do not break the form
        extra = draw(st.sampled_from(extras))
        return kind, {"action": "accept", "content": {"name": name, **extra}}, name
    if kind in ("decline", "cancel"):
        return kind, {"action": kind}, None
    long_name = "x" * draw(st.integers(101, 300))
    not_text: object = draw(st.sampled_from([5, True, ["a"], 1.5]))
    shapes: dict[str, dict[str, Any]] = {
        "empty": {"action": "accept", "content": {"name": ""}},
        "too long": {"action": "accept", "content": {"name": long_name}},
        "not text": {"action": "accept", "content": {"name": not_text}},
        "no content": {"action": "accept"},
        "other shape": {"roots": []},
    }
    return kind, shapes[kind], None


def model(linked: dict[str, str], answers: dict[str, tuple[str, dict[str, Any], str | None]]) -> tuple[Any, ...]:
    """What `link_accounts` (version 1) must answer.

    ("ask", key, linked so far), ("complete", linked) or ("refused", key, decline/cancel).
    """
    linked = dict(linked)
    for key in NEEDED:
        if key in linked or key not in answers:
            continue
        kind, _, name = answers[key]
        if kind in SKIPPED:
            continue
        if kind in ("decline", "cancel"):
            return ("refused", key, kind)
        assert name is not None
        linked[key] = name
    missing = [key for key in NEEDED if key not in linked]
    return ("ask", missing[0], linked) if missing else ("complete", linked)


LONE_SURROGATE = ("valid", {"action": "accept", "content": {"name": "\ud800"}}, "\ud800")


@settings(max_examples=budget(150))
@given(
    label=st.sampled_from(sorted(LINKED_BY_ROUND)),
    answers=st.dictionaries(st.sampled_from([*NEEDED, "microsoft_login", "other"]), login_answers(), max_size=4),
)
@example(label="link-1", answers={"github_login": LONE_SURROGATE})  # once a -32603 from the answer size limit
def test_replaying_a_login_round_with_any_answers_follows_the_model(
    target: FuzzTarget, origins: Origins, label: str, answers: dict[str, tuple[str, dict[str, Any], str | None]]
) -> None:
    origin = origins[label]
    wire = {key: answer for key, (_, answer, _) in answers.items()}
    verdict = target.call(origin.call, origin.params(origin.state, wire))
    assert verdict.kind == "result", verdict.message
    result = verdict.message["result"]
    expected = model(LINKED_BY_ROUND[label], answers)
    if expected[0] == "refused":
        _, key, kind = expected
        assert result.get("isError") is True, result
        assert result["content"][0]["text"] == f"{PROVIDERS[key]} login was {PAST_TENSE[kind]}; nothing linked."
    elif expected[0] == "complete":
        assert result.get("isError") is not True, result
        assert result["structuredContent"] == {"linked": expected[1]}, result
    else:
        _, key, linked = expected
        assert result["resultType"] == "input_required", result
        assert list(result["inputRequests"]) == [key]
        # Finish correctly: what this round took travels on, and nothing taken is asked again.
        asked, done = _finish_logins(target, origin, result)
        assert asked == set(NEEDED) - set(linked), (asked, linked)
        given_now = {k: ANSWERS[k]["content"]["name"] for k in asked}
        assert done["structuredContent"] == {"linked": {**linked, **given_now}}
    TALLY.case(f"{label}: {expected[0]}")


def _finish_logins(target: FuzzTarget, origin: Origin, result: dict[str, Any]) -> tuple[set[str], dict[str, Any]]:
    """Answer each question correctly until the call completes; the keys asked, and the complete result."""
    asked: set[str] = set()
    while result.get("resultType") == "input_required":
        (key,) = result["inputRequests"]
        assert key not in asked, f"{key} asked twice"
        asked.add(key)
        verdict = target.call(origin.call, origin.params(result["requestState"], {key: ANSWERS[key]}))
        result = verdict.message["result"]
    assert result.get("isError") is not True, result
    return asked, result


# --- computations -------------------------------------------------------------------------------------------


@settings(max_examples=budget(20))
@given(data=st.data())
def test_resuming_from_any_old_hand_back_gives_the_exact_result(
    target: FuzzTarget, origins: Origins, data: st.DataObject
) -> None:
    chain = origins.primes_chain
    at = data.draw(st.integers(0, 2**32), label="round") % len(chain)
    origin = origins["primes"]
    verdict = target.call(origin.call, origin.params(chain[at]))
    done = finish(target.mcp, origin, verdict.message["result"])
    assert done["structuredContent"] == EXPECTED["primes"]
    assert done["_meta"]["mrtr-cluster.dev/compute"]["steps"] == 20  # every step, once, from that checkpoint on
    TALLY.case(f"resumed at hand-back {at + 1} of {len(chain)}")


refine_answers = st.one_of(
    st.fixed_dictionaries({"action": st.just("accept"), "content": st.fixed_dictionaries({"refine": st.booleans()})}),
    st.sampled_from(
        [
            {"action": "decline"},
            {"action": "cancel"},
            {"action": "accept", "content": {"refine": "yes"}},
            {"action": "accept"},
            {"roots": []},
        ]
    ),
)


@settings(max_examples=budget(30))
@given(answer=st.none() | refine_answers)
def test_the_question_asked_midway_folds_in_any_answer(
    target: FuzzTarget, origins: Origins, answer: dict[str, Any] | None
) -> None:
    origin = origins["pi"]
    verdict = target.call(origin.call, origin.params(origin.state, {} if answer is None else {"refine": answer}))
    result = verdict.message["result"]
    content = (answer or {}).get("content")
    valid = isinstance(content, dict) and isinstance(content.get("refine"), bool)
    if answer is None or (answer.get("action") == "accept" and not valid) or "action" not in answer:
        assert list(result.get("inputRequests") or {}) == ["refine"], result  # asked again, same question
        TALLY.case("asked again")
        return
    done = finish(target.mcp, origin, result)
    assert done["structuredContent"] == _reference_pi(content if answer["action"] == "accept" else None)
    TALLY.case(f"refine {bool(valid and content and content['refine'])}")


def _reference_pi(content: dict[str, Any] | None) -> dict[str, Any]:
    """An uninterrupted run, in process, with the question answered the same way."""
    state = ESTIMATE_PI.initial(PI.params["arguments"])
    while not ESTIMATE_PI.done(state):
        question = ESTIMATE_PI.question(state)
        state = question.apply(state, content) if question else ESTIMATE_PI.step(state)
    return ESTIMATE_PI.result(state)
