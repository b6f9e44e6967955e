"""The checker: a chaos run's histories against the model of a task, and the figures the report prints.

The model: a task, once its creation is acknowledged, reaches exactly one
terminal status and keeps it; a completed task carries the reference's exact
result, in exactly the reference's number of steps; its committed step
ranges follow one another (each commit starts where the last ended: nothing
committed twice, nothing skipped); a toxic task ends `failed` with its own
clear error, without looping through redeliveries; a plain MRTR call's answer
is the reference's. Every breach is counted and a few examples kept.

Inputs: the clients' operations (`client_ops`: creations, each task's end as
its producer saw it, a final read of every task after the run, MRTR calls),
the store's events (`store_events`: begins and commits), the expected answers
(`mrtr_ops.chaos.workload`) and the faults' times (for redelivery times).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrtr_ops.history.client_ops import FAIL, INFO, OK, Op
from mrtr_ops.history.store_events import StoreEvent
from mrtr_ops.percentiles import percentile

LOOP_BEGINS = 5
"""Begins of one slice (one message, handed out again and again) beyond which it is a loop: a poison slice. A slice
put back (busy, a straggler) is a new message, so only redeliveries count."""
EXAMPLES = 5


@dataclass(frozen=True)
class Answer:
    """What a correct run gives for one operation's tool and arguments."""

    structured: dict[str, Any] | None = None
    steps: int | None = None
    error: str | None = None
    """A toxic tool: the text its `failed` error must contain."""


Expect = Callable[[str, dict[str, Any]], Answer]


@dataclass(frozen=True)
class FaultTime:
    """A fault that left slices to be taken over: which worker, and when (Unix seconds)."""

    kind: str
    victim: str
    at: float


@dataclass
class Verdict:
    created: int = 0
    """Creations acknowledged (a task id came back)."""
    indeterminate_creations: int = 0
    """Creations whose reply never came (or said the store was unreachable): they may or may not exist."""
    refused_creations: int = 0
    completed: int = 0
    exact: int = 0
    """Completed with the reference's result and step count."""
    failed: int = 0
    cancelled: int = 0
    toxic: int = 0
    lost: int = 0
    """Acknowledged tasks never seen terminal (not found, or still unfinished after the run)."""
    terminal_disagreements: int = 0
    """Tasks seen with two different terminal statuses or results (the producer's against the final read)."""
    terminal_commits_not_one: int = 0
    """Tasks whose store history has other than one landed terminal commit (history kept whole only)."""
    wrong: int = 0
    """Completed with a result or step count other than the reference's, or a toxic task not failed as it must."""
    committed_twice: int = 0
    """Landed commits whose step range does not start where the task's previous commit ended."""
    loops: int = 0
    mrtr_calls: int = 0
    mrtr_wrong: int = 0
    mrtr_unfinished: int = 0
    slices_begun: int = 0
    commits_landed: int = 0
    commits_fenced: int = 0
    commits_stale: int = 0
    boundaries_fenced: int = 0
    """Step boundaries refused as fenced: a zombie stopped there, before any commit."""
    taken_over: int = 0
    """Begins of a slice delivered more than once (taken from a dead, frozen or late worker)."""
    redelivery_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Per fault kind: seconds from the fault to the first begin of each slice its victim held, elsewhere."""
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def note(self, what: str, text: str) -> None:
        if len(self.examples[what]) < EXAMPLES:
            self.examples[what].append(text)

    @property
    def problems(self) -> list[str]:
        found = []
        for name in (
            "lost",
            "terminal_disagreements",
            "terminal_commits_not_one",
            "wrong",
            "committed_twice",
            "loops",
            "mrtr_wrong",
        ):
            count = getattr(self, name)
            if count:
                found.append(f"{name.replace('_', ' ')}: {count}")
        return found

    def redelivery_figures(self) -> dict[str, dict[str, float]]:
        figures = {}
        for kind, values in sorted(self.redelivery_s.items()):
            if values:
                figures[kind] = {
                    "count": len(values),
                    "p50": round(percentile(values, 50), 3),
                    "p99": round(percentile(values, 99), 3),
                    "max": round(max(values), 3),
                }
        return figures

    def as_json(self) -> dict[str, Any]:
        plain = {k: v for k, v in vars(self).items() if k not in ("redelivery_s", "examples")}
        return {
            **plain,
            "redelivery": self.redelivery_figures(),
            "examples": dict(self.examples),
            "problems": self.problems,
        }


def check(
    ops: Sequence[Op],
    events: Sequence[StoreEvent],
    expect: Expect,
    faults: Sequence[FaultTime] = (),
    *,
    history_complete: bool = True,
) -> Verdict:
    """Hold the histories to the model; `history_complete`: the store kept every event (a failover may lose the
    last ones, with the acts they record: then a task's terminal commit may be missing from the history)."""
    verdict = Verdict()
    tools: dict[str, tuple[str, dict[str, Any]]] = {}
    for op in ops:
        if op.f != "create" or op.type == "invoke":
            continue
        if op.type == OK and op.task:
            verdict.created += 1
            tools[op.task] = (op.tool, op.arguments)
        elif op.type == INFO:
            verdict.indeterminate_creations += 1
        elif op.type == FAIL:
            verdict.refused_creations += 1
        elif op.value.get("not_a_task"):
            verdict.wrong += 1
            verdict.note("wrong", f"{op.tool} answered at once, not as a task")
    by_task = _group(events)
    _check_tasks(verdict, ops, tools, by_task, expect, history_complete)
    _check_mrtr(verdict, ops, expect)
    _check_store(verdict, by_task)
    _redeliveries(verdict, by_task, faults)
    return verdict


def _group(events: Sequence[StoreEvent]) -> dict[str, list[StoreEvent]]:
    grouped: dict[str, list[StoreEvent]] = defaultdict(list)
    for event in events:
        grouped[event.task].append(event)
    return grouped


def _terminal_views(ops: Sequence[Op]) -> dict[str, list[dict[str, Any]]]:
    """Every terminal view of each task the clients had: its producer's end, and the final read."""
    views: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for op in ops:
        if op.type == OK and op.f in ("final", "read") and op.task and op.value.get("status") in _TERMINAL:
            views[op.task].append(op.value)
    return views


_TERMINAL = ("completed", "failed", "cancelled")


def _check_tasks(
    verdict: Verdict,
    ops: Sequence[Op],
    tools: dict[str, tuple[str, dict[str, Any]]],
    by_task: dict[str, list[StoreEvent]],
    expect: Expect,
    history_complete: bool,
) -> None:
    views = _terminal_views(ops)
    for task_id, (tool, arguments) in tools.items():
        answer = expect(tool, arguments)
        seen = views.get(task_id, [])
        if not seen:
            verdict.lost += 1
            verdict.note("lost", f"{task_id} ({tool})")
            continue
        if any(_comparable(view) != _comparable(seen[0]) for view in seen[1:]):
            verdict.terminal_disagreements += 1
            verdict.note("terminal_disagreements", f"{task_id}: {[_comparable(v) for v in seen]}")
        final = seen[-1]
        status = final["status"]
        verdict.completed += status == "completed"
        verdict.failed += status == "failed"
        verdict.cancelled += status == "cancelled"
        terminal_commits = [e for e in by_task.get(task_id, []) if e.landed and e.status in _TERMINAL]
        if history_complete and len(terminal_commits) != 1:
            verdict.terminal_commits_not_one += 1
            verdict.note("terminal_commits_not_one", f"{task_id}: {len(terminal_commits)} terminal commits")
        if answer.error is not None:
            verdict.toxic += 1
            if status != "failed" or answer.error not in str(final.get("message", "")):
                verdict.wrong += 1
                verdict.note("wrong", f"toxic {tool} {task_id}: {final}")
            continue
        exact = (
            status == "completed"
            and not final.get("isError")
            and final.get("structured") == answer.structured
            and final.get("steps") == answer.steps
        )
        verdict.exact += exact
        if not exact:
            verdict.wrong += 1
            verdict.note("wrong", f"{tool} {arguments} {task_id}: {final} (expected {answer})")


def _comparable(view: dict[str, Any]) -> tuple[Any, ...]:
    return (view.get("status"), repr(view.get("structured")), view.get("steps"), view.get("message"))


def _check_mrtr(verdict: Verdict, ops: Sequence[Op], expect: Expect) -> None:
    for op in ops:
        if op.f != "mrtr" or op.type == "invoke":
            continue
        verdict.mrtr_calls += 1
        if op.type != OK:
            verdict.mrtr_unfinished += 1
            continue
        answer = expect(op.tool, op.arguments)
        if op.value.get("structured") != answer.structured:
            verdict.mrtr_wrong += 1
            verdict.note("mrtr_wrong", f"{op.tool} {op.arguments}: {op.value} (expected {answer.structured})")


def _check_store(verdict: Verdict, by_task: dict[str, list[StoreEvent]]) -> None:
    for task_id, events in by_task.items():
        at = 0
        begins: Counter[str] = Counter()
        for event in events:  # in the order Redis logged them
            if event.kind == "begin":
                verdict.slices_begun += 1
                verdict.taken_over += event.deliveries > 1
                begins[event.message] += 1
                continue
            if event.kind == "check":
                verdict.boundaries_fenced += 1
                continue
            if event.outcome == "fenced":
                verdict.commits_fenced += 1
            elif event.outcome == "stale":
                verdict.commits_stale += 1
            if not event.landed:
                continue
            verdict.commits_landed += 1
            if event.steps_from != at:
                verdict.committed_twice += 1
                verdict.note("committed_twice", f"{task_id}: [{event.steps_from}, {event.steps_to}) after {at}")
            at = event.steps_to
        looping = [message for message, count in begins.items() if count > LOOP_BEGINS]
        if looping:
            verdict.loops += 1
            verdict.note("loops", f"{task_id}: slice {looping[0]} begun {begins[looping[0]]} times")


def _redeliveries(verdict: Verdict, by_task: dict[str, list[StoreEvent]], faults: Sequence[FaultTime]) -> None:
    """For each fault, each slice its victim held then: seconds until another worker began it."""
    for fault in faults:
        at_ms = fault.at * 1000
        for events in by_task.values():
            held = _held_at(events, fault.victim, at_ms)
            if held is None:
                continue
            taker = next(
                (e for e in events if e.kind == "begin" and e.message == held.message and e.worker != fault.victim
                 and e.at_ms >= held.at_ms),
                None,
            )  # fmt: skip
            if taker is not None:
                verdict.redelivery_s[fault.kind].append(max(0.0, (taker.at_ms - at_ms) / 1000))


def _held_at(events: Sequence[StoreEvent], worker: str, at_ms: float) -> StoreEvent | None:
    """The victim's begin of a slice it still held at `at_ms` (no commit or refusal of its own since), if any."""
    held: StoreEvent | None = None
    for event in events:
        if event.at_ms > at_ms:
            break
        if event.worker != worker:
            if held is not None and event.kind == "begin" and event.message == held.message:
                held = None  # already taken from it before the fault
            continue
        held = event if event.kind == "begin" else None
    return held
