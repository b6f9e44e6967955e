"""The chaos schedule and the report's arithmetic, without a cluster."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mrtr_locust.limits import P95_OPTIONS, env_var
from mrtr_ops.chaos.plan import FLEET_WIDE, HOLD_SECONDS, KINDS, choose_victim, plan
from mrtr_ops.chaos.report import RunInputs, fault_figures, fault_problems, markdown, same_worker, summarize, verdict
from mrtr_ops.loadrun import RELAXED_P95
from mrtr_ops.walkthrough.report import task_figures


def test_every_kind_comes_once_before_any_repeats_and_the_seed_fixes_the_plan() -> None:
    faults = plan(seed=3, duration=150)
    assert sorted(f.kind for f in faults[: len(KINDS)]) == sorted(KINDS)
    assert len(faults) > len(KINDS)
    assert plan(seed=3, duration=150) == faults
    assert plan(seed=4, duration=150) != faults


def test_a_short_run_still_gets_every_kind_in_order_and_within_the_load() -> None:
    faults = plan(seed=1, duration=70, warmup=8, tail=10)
    assert sorted(f.kind for f in faults) == sorted(KINDS)
    times = [f.at_s for f in faults]
    assert times == sorted(times)
    assert times[0] >= 8
    assert times[-1] < 70 - 10
    for fault in faults:
        low, high = HOLD_SECONDS[fault.kind]
        assert low <= fault.hold_s <= high


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="fault kinds"):
        plan(seed=1, duration=90, kinds=("kill9", "reboot"))


def test_the_victim_is_busy_if_any_worker_is() -> None:
    rng = random.Random(0)
    workers = ["w1", "w2", "w3"]
    busy = {"computing": {"w3": 1}, "in_flight": {"w2": 1, "w3": 1}}
    assert {choose_victim(rng, workers, **busy) for _ in range(20)} == {"w3"}
    assert {choose_victim(rng, workers, computing={}, in_flight={"w2": 2}) for _ in range(20)} == {"w2"}
    assert {choose_victim(rng, workers, computing={}, in_flight={}) for _ in range(50)} == set(workers)


def test_relaxed_latency_bounds_name_every_option_of_the_locust_suite() -> None:
    assert set(RELAXED_P95) == {env_var(dest) for dest in P95_OPTIONS}


def test_compose_worker_ids_match_their_container() -> None:
    assert same_worker("3f2a9c1d0b7e-1", "3f2a9c1d0b7e")
    assert same_worker("w1", "w1")
    assert not same_worker("w12", "w1")
    assert not same_worker(None, "w1")


def _event(start: float, hops: list[tuple[str | None, str, float]], ok: bool = True) -> dict[str, Any]:
    rows = [{"instance": i, "version": "1", "reason": r, "ms": ms, "status": 200} for i, r, ms in hops]
    end = start + sum(ms for _, _, ms in hops) / 1000
    return {"start": start, "end": end, "ok": ok, "wrong": False, "reasked": [], "hops": rows}


def _pause(evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "pause",
        "victim": "w2",
        "hold_s": 6.0,
        "started": 100.0,
        "undone": 106.0,
        "recovered": 106.5,
        "left_rotation": 101.5,
        "in_flight_at_fault": 1,
        "computing_at_fault": 1,
        "lb_errors": {"connect": 0.0, "upstream": 0.0, "unresponsive": 2.0},
        "evidence": evidence if evidence is not None else {"pid": 42, "same_process": True},
        "error": None,
    }


def test_a_fault_row_counts_requests_retried_elsewhere_in_its_window() -> None:
    events = [
        _event(100.5, [(None, "transport", 2500.0), ("w1", "complete", 20.0)]),  # abandoned on w2, done on w1
        _event(101.0, [("w2", "slice", 400.0), (None, "transport", 2000.0), ("w2", "complete", 10.0)]),
        _event(50.0, [("w1", "complete", 5.0)]),  # long before the fault
        _event(104.0, [("w3", "complete", 5.0)], ok=False),
    ]
    row = fault_figures(_pause(), events, t0=90.0)
    assert row["at_s"] == 10.0
    assert row["out_of_rotation_after_s"] == 1.5
    assert row["back_in_rotation_after_s"] == 0.5
    assert row["requests_in_window"] == 3
    assert row["retried_in_window"] == 2
    assert row["retried_elsewhere"] == 1
    assert row["failed_in_window"] == 1
    assert fault_problems(row) == []


def test_a_fault_without_its_evidence_is_a_problem() -> None:
    row = fault_figures(_pause({"pid": 42, "same_process": False}), [], t0=90.0)
    assert fault_problems(row) == ["pause w2: it came back as another process"]
    kill = {**_pause({"old_pid": 7, "old_pid_gone": False, "new_pid": 7, "served_after_restart": 0}), "kind": "kill9"}
    problems = fault_problems(fault_figures(kill, [], t0=90.0))
    assert len(problems) == 3


def _redis(evidence: dict[str, Any]) -> dict[str, Any]:
    return {
        **_pause(evidence),
        "kind": "redis",
        "victim": "store",
        "hold_s": 0.0,
        "undone": 100.4,
        "recovered": 101.0,
        "left_rotation": None,
    }


def _task_call(start: float, end: float, final: str | None, ok: bool = True) -> dict[str, Any]:
    event = _event(start, [("w1", "complete", (end - start) * 1000)], ok=ok)
    return {**event, "task": {"id": "t", "statuses": [], "final": final, "workers": []}}


def test_a_redis_restart_counts_the_tasks_that_went_on_through_it_and_needs_a_new_process() -> None:
    evidence = {"old_pid": 7, "old_pid_gone": True, "new_pid": 8, "down_s": 0.4}
    events = [
        _task_call(99.0, 103.0, "completed"),  # in flight across the restart, completed
        _task_call(99.5, 104.0, "completed", ok=False),  # across it, but the call failed: not counted
        _task_call(100.2, 102.0, "completed"),  # started during the restart
        _task_call(95.0, 99.0, "completed"),  # over before it
        _event(99.0, [("w2", "complete", 4000.0)]),  # an MRTR call, not a task
    ]
    row = fault_figures(_redis(evidence), events, t0=90.0)
    assert row["tasks_across"] == 1
    assert fault_problems(row) == []
    summary = summarize(RunInputs(events, [_redis(evidence)], ["redis"], {}, 90.0, 110.0, 0, seed=1))
    assert summary["fault_kinds_done"] == ["redis"]
    assert "| redis | store |" in markdown(summary)
    assert "started again as 8 after 0.4 s, 1 tasks in flight across it completed" in markdown(summary)

    stale = fault_figures(_redis({**evidence, "old_pid_gone": False, "new_pid": 7}), events, t0=90.0)
    assert fault_problems(stale) == [
        "redis store: the stopped Redis process 7 is still there",
        "redis store: no new Redis process after the restart",
    ]
    unseen = fault_figures({**_redis(evidence), "recovered": None}, events, t0=90.0)
    assert fault_problems(unseen) == ["redis store: the workers never reported the task store reachable again"]


def test_the_redis_fault_has_no_victim_worker_and_no_hold() -> None:
    assert "redis" in FLEET_WIDE
    assert HOLD_SECONDS["redis"] == (0.0, 0.0)
    assert all(kind in KINDS for kind in FLEET_WIDE)


def test_the_verdict_wants_zero_failures_and_every_planned_kind() -> None:
    summary = {
        "requests": 10,
        "failures": 0,
        "wrong_answers": 0,
        "reasked_questions": 0,
        "fault_kinds_planned": ["cut", "pause"],
        "fault_kinds_done": ["pause"],
        "faults": [],
        "locust_exit_code": 0,
        **TASKS_FINE,
    }
    assert verdict(summary) == ["fault kinds not done: cut"]
    assert verdict({**summary, "failures": 1, "fault_kinds_done": ["cut", "pause"]}) == ["failures = 1"]


TASKS_FINE = {
    "tasks_created": 4,
    "tasks_completed": 4,
    "tasks_wrong": 0,
    "tasks_lost": 0,
    "tasks_resumed_elsewhere": 2,
}


def test_the_verdict_wants_tasks_created_none_wrong_or_lost_and_some_resumed_elsewhere() -> None:
    summary = {
        "requests": 10,
        "failures": 0,
        "wrong_answers": 0,
        "reasked_questions": 0,
        "fault_kinds_planned": ["pause"],
        "fault_kinds_done": ["pause"],
        "faults": [],
        "locust_exit_code": 0,
        **TASKS_FINE,
    }
    assert verdict(summary) == []
    assert verdict({**summary, "tasks_resumed_elsewhere": 0}) == ["no task resumed on another instance"]
    assert verdict({**summary, "tasks_lost": 1, "tasks_wrong": 2}) == ["tasks_wrong = 2", "tasks_lost = 1"]
    assert verdict({**summary, "tasks_created": 0, "tasks_completed": 0, "tasks_resumed_elsewhere": 0}) == [
        "no task created"
    ]


def _task_event(
    final: str | None, workers: list[list[object]], *, ok: bool = True, wrong: bool = False
) -> dict[str, Any]:
    statuses = [["working", 1.0]] + ([[final, 2.0]] if final else [])
    return {"ok": ok, "wrong": wrong, "task": {"id": "t", "statuses": statuses, "final": final, "workers": workers}}


def test_task_figures_count_created_completed_wrong_lost_and_resumed_elsewhere() -> None:
    events = [
        _task_event("completed", [["w1", 1], ["w2", 2]]),
        _task_event("completed", [["w1", 1], ["w1", 1]]),
        _task_event("completed", [["w3", 1]], ok=False, wrong=True),
        _task_event("failed", [], ok=False),
        _task_event("cancelled", [], ok=False),
        _task_event(None, [], ok=False),
        {"ok": True, "wrong": False, "task": None},
        {"ok": False, "wrong": False, "task": {"id": None, "statuses": [], "final": None, "workers": []}},
    ]
    assert task_figures(events) == {
        "tasks_created": 6,
        "tasks_completed": 3,
        "tasks_wrong": 1,
        "tasks_lost": 3,  # failed, cancelled but the call failed, never seen to end
        "tasks_resumed_elsewhere": 1,
    }
