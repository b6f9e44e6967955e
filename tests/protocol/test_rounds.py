"""Why a round ended, read from a result the way every component reads it."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_protocol.rounds import (
    COMPLETE,
    HAND_BACK_REASONS,
    RETRYABLE_STATUSES,
    ROUND_META_KEY,
    EndOfRound,
    end_reason,
    round_hint,
)


def _input_required(meta: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "requestState": "s"}
    if meta is not None:
        result["_meta"] = meta
    return result


def test_the_hand_back_reasons_are_every_reason_but_input() -> None:
    assert set(HAND_BACK_REASONS) == set(EndOfRound) - {EndOfRound.INPUT}
    assert [reason.value for reason in EndOfRound] == ["input", "admission", "pressure", "slice", "drain", "straggler"]


def test_only_gateway_failures_are_retryable() -> None:
    assert frozenset({502, 503, 504}) == RETRYABLE_STATUSES
    assert not {200, 400, 401, 403, 404, 413, 500} & RETRYABLE_STATUSES


@pytest.mark.parametrize("reason", list(EndOfRound))
def test_the_reason_comes_from_the_hint(reason: EndOfRound) -> None:
    result = _input_required({ROUND_META_KEY: {"reason": reason.value, "hops": 2}})
    assert end_reason(result) == reason.value
    assert round_hint(result) == {"reason": reason.value, "hops": 2}


def test_an_unknown_reason_is_passed_through() -> None:
    assert end_reason(_input_required({ROUND_META_KEY: {"reason": "maintenance"}})) == "maintenance"


@pytest.mark.parametrize(
    "meta", [None, {}, {"other/key": {"reason": "slice"}}, {ROUND_META_KEY: "slice"}, {ROUND_META_KEY: {}}, "x"]
)
def test_without_a_readable_reason_the_round_asked_for_input(meta: Any) -> None:
    reason = end_reason(_input_required(meta))
    assert reason == EndOfRound.INPUT.value
    assert type(reason) is str


@pytest.mark.parametrize("meta", [None, {}, {ROUND_META_KEY: "slice"}, {ROUND_META_KEY: ["slice"]}, ["x"]])
def test_no_hint_is_none(meta: Any) -> None:
    assert round_hint(_input_required(meta)) is None


@pytest.mark.parametrize(
    "result",
    [
        {"content": []},
        {"resultType": "complete", "content": []},
        {"resultType": "complete", "_meta": {ROUND_META_KEY: {"reason": "slice"}}},
    ],
)
def test_a_complete_result_is_complete(result: dict[str, Any]) -> None:
    assert end_reason(result) == COMPLETE
