"""What a hand-back costs a client: idle time between rounds from its exchanges, and its rule's schedule."""

from __future__ import annotations

from typing import Any

from mrtr_ops.interop.timing import FASTMCP_RULE, OUR_RULE, SDK_RULE, TS_RULE, from_record


def rounds(*spans: tuple[float, float]) -> list[dict[str, Any]]:
    return [{"method": "tools/call", "startedMs": a, "answeredMs": b} for a, b in spans]


def test_idle_is_the_time_from_each_answer_to_the_next_request() -> None:
    exchanges = [{"method": "server/discover", "startedMs": 0.0, "answeredMs": 5.0}]
    exchanges += rounds((10.0, 310.0), (560.0, 870.0), (1120.0, 1400.0))
    record = {"ok": True, "elapsedMs": 1390.0, "exchanges": exchanges}
    timing = from_record("ts", record, TS_RULE)
    assert timing is not None
    assert (timing.rounds, timing.hand_backs) == (3, 2)
    assert timing.idle_ms == 500.0
    assert timing.idle_per_hand_back_ms == 250.0


def test_a_failed_or_untimed_call_is_not_timed() -> None:
    assert from_record("x", None, TS_RULE) is None
    assert from_record("x", {"ok": False, "exchanges": rounds((0, 1))}, TS_RULE) is None
    unanswered = {"ok": True, "elapsedMs": 1.0, "exchanges": [{"method": "tools/call", "startedMs": 0.0}]}
    assert from_record("x", unanswered, TS_RULE) is None


def test_the_rules_schedules() -> None:
    assert TS_RULE.schedule_ms(4) == 1000
    assert SDK_RULE.schedule_ms(4) == 50 + 100 + 200 + 250
    assert SDK_RULE.schedule_ms(6) == 50 + 100 + 200 + 250 + 250 + 250
    assert FASTMCP_RULE.schedule_ms(4) == SDK_RULE.schedule_ms(4)
    assert OUR_RULE.schedule_ms(4) is None
