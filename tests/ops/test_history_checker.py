"""The history checker on hand-made histories: it passes a correct run and names each kind of breach.

No cluster: operations and store events written the way the producers and the workers' scripts
write them, then one fault planted at a time. A checker that passed everything would pass a broken
fleet; each test here is one breach it must see.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mrtr_ops.chaos.tasks_run import expect
from mrtr_ops.history.checker import FaultTime, Verdict, check
from mrtr_ops.history.client_ops import INFO, INVOKE, OK, Op
from mrtr_ops.history.store_events import StoreEvent

PRIMES = {"limit": 2_000_000, "segment": 100_000}
RIGHT = expect("count_primes", PRIMES)
TOXIC_ERROR = "the chaos_raise job failed (RuntimeError)"


def _op(type_: str, f: str, task: str | None, at: float, **fields: Any) -> Op:
    return Op("p1", type_, f, f"{f}-{task}", at, task=task, **fields)


def _task(task: str, at: float, value: dict[str, Any] | None = None, tool: str = "count_primes") -> list[Op]:
    arguments = PRIMES if tool == "count_primes" else {}
    done = value or {"status": "completed", "structured": RIGHT.structured, "steps": RIGHT.steps, "isError": False}
    return [
        _op(INVOKE, "create", None, at, tool=tool, arguments=arguments),
        _op(OK, "create", task, at + 0.1, tool=tool, arguments=arguments),
        _op(OK, "final", task, at + 5, tool=tool, arguments=arguments, value=done),
        _op(OK, "read", task, at + 9, value=done),
    ]


def _slices(
    task: str, worker: str, ranges: list[tuple[int, int]], at_ms: int, last: str = "completed"
) -> list[StoreEvent]:
    events, rev = [], 1
    for n, (start, end) in enumerate(ranges):
        message = f"{at_ms + n}-0"
        events.append(StoreEvent("begin", task, worker, message, n + 1, at_ms + 10 * n, rev, deliveries=1))
        status = last if n == len(ranges) - 1 else "working"
        events.append(
            StoreEvent("commit", task, worker, message, n + 1, at_ms + 10 * n + 5, rev + 1, "ok", start, end, status)
        )
        rev += 1
    return events


def _correct() -> tuple[list[Op], list[StoreEvent]]:
    steps = RIGHT.steps
    assert steps is not None
    ops = _task("t1", 100.0) + _task("t2", 101.0)
    events = _slices("t1", "w1", [(0, 8), (8, steps)], 100_000) + _slices("t2", "w2", [(0, steps)], 101_000)
    return ops, events


def _checked(ops: list[Op], events: list[StoreEvent]) -> Verdict:
    return check(ops, events, expect)


def test_a_correct_history_passes_with_its_counts() -> None:
    verdict = _checked(*_correct())
    assert verdict.problems == []
    assert (verdict.created, verdict.completed, verdict.exact) == (2, 2, 2)
    assert (verdict.commits_landed, verdict.slices_begun) == (3, 3)


def test_an_acknowledged_task_never_seen_terminal_is_lost() -> None:
    ops, events = _correct()
    ops = [op for op in ops if not (op.task == "t2" and op.f in ("final", "read"))]
    verdict = _checked(ops, events)
    assert verdict.lost == 1
    assert verdict.problems == ["lost: 1"]


def test_a_creation_without_a_reply_is_indeterminate_not_lost() -> None:
    ops, events = _correct()
    ops.append(_op(INFO, "create", None, 102.0, tool="count_primes", arguments=PRIMES, error="timed out"))
    verdict = _checked(ops, events)
    assert verdict.indeterminate_creations == 1
    assert verdict.problems == []


def test_two_different_terminal_views_of_one_task_are_a_duplicate() -> None:
    ops, events = _correct()
    ops[-1] = replace(ops[-1], value={"status": "failed", "message": "late"})
    verdict = _checked(ops, events)
    assert verdict.terminal_disagreements == 1


def test_a_second_terminal_commit_is_seen() -> None:
    ops, events = _correct()
    extra = replace(events[-1], token=9, at_ms=events[-1].at_ms + 100, rev=events[-1].rev + 1)
    verdict = _checked(ops, [*events, extra])
    assert verdict.terminal_commits_not_one == 1
    assert verdict.committed_twice == 1  # it also restarts the step range


def test_a_step_range_committed_twice_is_counted() -> None:
    steps = RIGHT.steps
    assert steps is not None
    ops, events = _correct()
    overlapping = _slices("t1", "w1", [(0, 8), (4, steps)], 100_000)  # a zombie's range accepted over a taker's
    verdict = _checked(ops, overlapping + events[4:])
    assert verdict.committed_twice == 1
    assert "committed twice: 1" in verdict.problems


def test_a_wrong_count_or_step_count_is_wrong() -> None:
    ops, events = _correct()
    bad = {"status": "completed", "structured": {"count": 1}, "steps": RIGHT.steps, "isError": False}
    ops = [replace(op, value=bad) if op.task == "t1" and op.f in ("final", "read") else op for op in ops]
    assert _checked(ops, events).wrong == 1
    ops2, _ = _correct()
    extra_steps = {"status": "completed", "structured": RIGHT.structured, "steps": (RIGHT.steps or 0) + 1}
    ops2 = [replace(op, value=extra_steps) if op.task == "t2" and op.f in ("final", "read") else op for op in ops2]
    assert _checked(ops2, events).wrong == 1


@pytest.mark.parametrize(
    ("value", "wrong"),
    [
        ({"status": "failed", "code": -32603, "message": TOXIC_ERROR}, 0),
        ({"status": "failed", "code": -32603, "message": "something else"}, 1),
        ({"status": "completed", "structured": None}, 1),
    ],
)
def test_a_toxic_task_must_end_failed_with_its_own_error(value: dict[str, Any], wrong: int) -> None:
    ops, events = _correct()
    ops += _task("t3", 102.0, value=value, tool="chaos_raise")
    events += _slices("t3", "w1", [(0, 0)], 102_000, last=value["status"])
    verdict = _checked(ops, events)
    assert verdict.toxic == 1
    assert verdict.wrong == wrong


def test_a_slice_handed_out_over_and_over_is_a_loop_but_slices_put_back_are_not() -> None:
    ops, events = _correct()
    looping = [StoreEvent("begin", "t2", f"w{n % 3}", "9-0", n + 1, 200_000 + n, 1, deliveries=n + 1) for n in range(7)]
    assert _checked(ops, looping + events).loops == 1
    put_back = [StoreEvent("begin", "t2", "w1", f"{n}-0", n + 1, 200_000 + n, 1, deliveries=1) for n in range(7)]
    assert _checked(ops, put_back + events).loops == 0  # each a new message: busy workers, not a poison slice


def test_a_wrong_mrtr_answer_is_counted_and_an_unfinished_call_is_not_wrong() -> None:
    ops, events = _correct()
    args = {"limit": 5_000_000, "segment": 250_000}
    right = expect("count_primes", args).structured
    ops += [
        Op("p1", OK, "mrtr", "m1", 103.0, tool="count_primes", arguments=args, value={"structured": right}),
        Op("p1", OK, "mrtr", "m2", 103.0, tool="count_primes", arguments=args, value={"structured": {"count": 3}}),
        Op("p1", INFO, "mrtr", "m3", 103.0, tool="count_primes", arguments=args, error="retry budget"),
    ]
    verdict = _checked(ops, events)
    assert (verdict.mrtr_calls, verdict.mrtr_wrong, verdict.mrtr_unfinished) == (3, 1, 1)


def test_redelivery_time_runs_from_the_fault_to_the_takers_begin() -> None:
    ops, _ = _correct()
    steps = RIGHT.steps or 0
    events = [
        StoreEvent("begin", "t1", "w1", "5-0", 1, 100_000, 1, deliveries=1),
        StoreEvent("begin", "t1", "w2", "5-0", 2, 100_700, 1, deliveries=2),
        StoreEvent("commit", "t1", "w2", "5-0", 2, 100_900, 2, "ok", 0, steps, "completed"),
        StoreEvent("commit", "t1", "w1", "5-0", 1, 101_500, 2, "fenced", 0, 5, "working"),
        *_slices("t2", "w3", [(0, steps)], 101_000),
    ]
    verdict = check(ops, events, expect, [FaultTime("worker-stop", "w1", 100.2)])
    assert verdict.redelivery_figures() == {"worker-stop": {"count": 1, "p50": 0.5, "p99": 0.5, "max": 0.5}}
    assert verdict.commits_fenced == 1
    assert verdict.taken_over == 1
    assert verdict.problems == []
