"""The suite's own statistics: how MRTR requests travelled, mergeable across Locust workers.

One `RequestRecord` per logical request (a call driven through all its
rounds). `MrtrStats` counts them; `to_wire`/`merge_wire` carry the counts from
Locust workers to the master (`report_to_master`/`worker_report`), as deltas.
No Locust import: the tests read these without gevent's patching.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mrtr_locust.recorder import HopRecord
from mrtr_protocol.rounds import HAND_BACK_REASONS

PERCENTILES = (0.5, 0.95, 0.99)


def percentiles(samples: Iterable[float], fractions: Iterable[float] = PERCENTILES) -> list[float | None]:
    """The suite's one ranking rule, for every latency it reports (summary, web UI, thresholds).

    `statistics.quantiles(samples, n=100, method="inclusive")`: the p-th percentile of N sorted samples
    is the linear interpolation between the two samples around rank p * (N - 1), counting from 0. So
    p50 is the median, no percentile exceeds the largest sample, and p50 <= p95 <= p99. One sample is
    every percentile; none gives None. `fractions` are whole percents (0.5, 0.95, 0.99).
    """
    data = sorted(samples)
    wanted = list(fractions)
    if not data:
        return [None for _ in wanted]
    if len(data) == 1:
        return [data[0] for _ in wanted]
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    return [cuts[round(fraction * 100) - 1] for fraction in wanted]


TASK_SETTLED = ("completed", "cancelled")
"""The statuses a task may end in without being lost (a `failed` task, or one never seen to end, is lost)."""


@dataclass(frozen=True)
class TaskRecord:
    """What a task call saw of its task: its id, the statuses in order, and the worker of each slice."""

    task_id: str | None
    changes: list[tuple[str, float]]
    """`(status, Unix time first seen)` for each change of status the client saw, in order."""
    workers: list[tuple[str, int]]
    """`(instance, version)` per slice, from the result's compute `_meta` (`mrtr_protocol.tasks.slice_workers`)."""

    @property
    def created(self) -> bool:
        return self.task_id is not None

    @property
    def final(self) -> str | None:
        return self.changes[-1][0] if self.changes else None

    @property
    def resumed_elsewhere(self) -> bool:
        """Its slices ran on more than one instance."""
        return len({instance for instance, _ in self.workers}) > 1

    def lost(self, ok: bool, wrong: bool) -> bool:
        """Created, but never seen completed or cancelled, or the call failed (a wrong answer is wrong, not lost)."""
        return self.created and (self.final not in TASK_SETTLED or (not ok and not wrong))

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.task_id,
            "statuses": [[status, round(at, 3)] for status, at in self.changes],
            "final": self.final,
            "workers": [[instance, version] for instance, version in self.workers],
        }


@dataclass(frozen=True)
class RequestRecord:
    """What one logical request did; `as_json` is the events file's line."""

    user_class: str
    name: str
    start: float
    end: float
    ok: bool
    wrong: bool
    error: str | None
    error_kind: str | None
    questions: list[str]
    reasked: list[str]
    hops: list[HopRecord]
    bytes: int = 0
    """Response body bytes the call's exchanges carried (every round, and a task's polls and answers)."""
    task: TaskRecord | None = None
    """Set for a call run as a task."""

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000

    @property
    def instances(self) -> list[str]:
        return list(dict.fromkeys(h.instance for h in self.hops if h.instance is not None))

    @property
    def versions(self) -> list[str]:
        return list(dict.fromkeys(h.version for h in self.hops if h.version is not None))

    def as_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "user_class": self.user_class,
            "name": self.name,
            "ok": self.ok,
            "wrong": self.wrong,
            "error": self.error,
            "questions": self.questions,
            "reasked": self.reasked,
            "hops": [hop.as_json() for hop in self.hops],
            "instances": self.instances,
            "versions": self.versions,
            "bytes": self.bytes,
            "task": None if self.task is None else self.task.as_json(),
        }


@dataclass
class Latency:
    """Requests, failures and every response time (ms) for one user class or name; percentiles by `percentiles`."""

    requests: int = 0
    failures: int = 0
    wrong_answers: int = 0
    samples_ms: list[float] = field(default_factory=list)

    def add(self, ms: float, *, failed: bool, wrong: bool) -> None:
        self.requests += 1
        self.failures += failed
        self.wrong_answers += wrong
        self.samples_ms.append(ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms, default=0.0)

    def percentile(self, fraction: float) -> float | None:
        value = percentiles(self.samples_ms, (fraction,))[0]
        return None if value is None else round(value, 1)

    def to_wire(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "failures": self.failures,
            "wrong_answers": self.wrong_answers,
            "samples_ms": list(self.samples_ms),
        }

    def merge_wire(self, data: Mapping[str, Any]) -> None:
        self.requests += int(data["requests"])
        self.failures += int(data["failures"])
        self.wrong_answers += int(data["wrong_answers"])
        self.samples_ms.extend(float(ms) for ms in data["samples_ms"])

    def summary(self) -> dict[str, Any]:
        p50, p95, p99 = (None if p is None else round(p, 1) for p in percentiles(self.samples_ms))
        return {
            "requests": self.requests,
            "failures": self.failures,
            "wrong_answers": self.wrong_answers,
            "mean_ms": round(statistics.fmean(self.samples_ms), 1) if self.samples_ms else None,
            "p50_ms": p50,
            "p95_ms": p95,
            "p99_ms": p99,
            "max_ms": round(self.max_ms, 1),
        }


_COUNTS = (
    "requests",
    "failures",
    "failed_requests",
    "wrong_answers",
    "reasked_questions",
    "requests_with_reasked",
    "requests_both_versions",
    "requests_shed",
    "hops",
    "questions",
    "bytes",
    "tasks_created",
    "tasks_completed",
    "tasks_wrong",
    "tasks_lost",
    "tasks_resumed_elsewhere",
)
_COUNTERS = (
    "hops_histogram",
    "end_reasons",
    "instances_per_request",
    "versions_per_request",
    "instances_seen",
    "instance_hops",
    "versions_seen",
    "version_hops",
    "questions_by_key",
    "failure_kinds",
)


class MrtrStats:
    """Counts over logical requests. Counter keys are strings so they travel (msgpack) and dump (JSON) as is."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.counters: dict[str, Counter[str]] = {}
        self.by_class: dict[str, Latency] = {}
        self.by_name: dict[str, Latency] = {}
        self.reset()

    def reset(self) -> None:
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.counters = {name: Counter() for name in _COUNTERS}
        self.by_class = {}
        self.by_name = {}

    def record(self, rec: RequestRecord) -> None:
        c, k = self.counts, self.counters
        c["requests"] += 1
        c["failures"] += not rec.ok
        c["wrong_answers"] += rec.wrong
        c["failed_requests"] += not rec.ok and not rec.wrong
        c["reasked_questions"] += len(rec.reasked)
        c["requests_with_reasked"] += bool(rec.reasked)
        c["hops"] += len(rec.hops)
        c["questions"] += len(rec.questions)
        c["bytes"] += rec.bytes
        task = rec.task
        if task is not None and task.created:
            c["tasks_created"] += 1
            c["tasks_completed"] += task.final == "completed"
            c["tasks_wrong"] += rec.wrong
            c["tasks_lost"] += task.lost(rec.ok, rec.wrong)
            c["tasks_resumed_elsewhere"] += task.resumed_elsewhere
        versions, instances = rec.versions, rec.instances
        c["requests_both_versions"] += len(versions) >= 2
        c["requests_shed"] += any(h.reason in HAND_BACK_REASONS for h in rec.hops)
        k["hops_histogram"][str(len(rec.hops))] += 1
        k["instances_per_request"][str(len(instances))] += 1
        k["versions_per_request"][str(len(versions))] += 1
        k["end_reasons"].update(h.reason for h in rec.hops)
        k["instances_seen"].update(instances)
        k["versions_seen"].update(versions)
        k["instance_hops"].update(h.instance for h in rec.hops if h.instance is not None)
        k["version_hops"].update(h.version for h in rec.hops if h.version is not None)
        k["questions_by_key"].update(rec.questions)
        if rec.error_kind is not None:
            k["failure_kinds"][rec.error_kind] += 1
        for table, key in ((self.by_class, rec.user_class), (self.by_name, rec.name)):
            table.setdefault(key, Latency()).add(rec.ms, failed=not rec.ok, wrong=rec.wrong)

    # --- distributed mode --------------------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "counters": {name: dict(counter) for name, counter in self.counters.items()},
            "by_class": {key: lat.to_wire() for key, lat in self.by_class.items()},
            "by_name": {key: lat.to_wire() for key, lat in self.by_name.items()},
        }

    def take(self) -> dict[str, Any]:
        """The counts since the last take, and start counting afresh (a worker's report to the master)."""
        wire = self.to_wire()
        self.reset()
        return wire

    def merge_wire(self, data: Mapping[str, Any]) -> None:
        for name, value in data.get("counts", {}).items():
            self.counts[name] = self.counts.get(name, 0) + int(value)
        for name, values in data.get("counters", {}).items():
            self.counters.setdefault(name, Counter()).update({str(k): int(v) for k, v in values.items()})
        for attr in ("by_class", "by_name"):
            table: dict[str, Latency] = getattr(self, attr)
            for key, lat in data.get(attr, {}).items():
                table.setdefault(key, Latency()).merge_wire(lat)

    # --- reading -----------------------------------------------------------------------------------

    def counter(self, name: str) -> dict[str, int]:
        return dict(sorted(self.counters[name].items(), key=_natural))

    def mean_hops(self) -> float:
        return self.counts["hops"] / self.counts["requests"] if self.counts["requests"] else 0.0


def _natural(item: tuple[str, int]) -> tuple[int, str]:
    key = item[0]
    return (int(key), "") if key.isdigit() else (1 << 30, key)
