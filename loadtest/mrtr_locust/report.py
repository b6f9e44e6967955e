"""Threshold verdicts, the JSON summary and the text summary printed at the end of a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mrtr_locust.stats import MrtrStats

TASK_COUNTS = ("tasks_created", "tasks_completed", "tasks_wrong", "tasks_lost", "tasks_resumed_elsewhere")


@dataclass(frozen=True)
class Verdict:
    check: str
    value: float | None
    limit: float
    ok: bool

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "value": self.value, "limit": self.limit, "ok": self.ok}


NO_REQUESTS = "no requests: the run made no request, so it checked nothing (did the users or workers start?)"
"""What the text summary says when the `requests` check fails."""

RELATIONS = {"requests": ">="}
"""How a check's value must compare with its limit: `requests` at least its limit, a count `=` (zero), a p95 `<=`."""


def relation(check: str) -> str:
    return RELATIONS.get(check, "<=" if check.startswith("p95_ms ") else "=")


def verdicts(stats: MrtrStats, p95_bounds: Mapping[str, float]) -> list[Verdict]:
    """At least one request; failures, wrong answers and re-asked questions zero; each class's p95 within its bound.

    A run that made no request (no user started, a worker that never ran users, a run time too short for
    one call) proved nothing, so it fails rather than passing with empty figures.
    """
    c = stats.counts
    found = [Verdict("requests", c["requests"], 1, c["requests"] >= 1)]
    found += [Verdict(name, c[name], 0, c[name] == 0) for name in ("failures", "wrong_answers", "reasked_questions")]
    for user_class, latency in sorted(stats.by_class.items()):
        bound = p95_bounds.get(user_class)
        if bound is None:
            continue
        p95 = latency.percentile(0.95)
        found.append(Verdict(f"p95_ms {user_class}", p95, bound, p95 is None or p95 <= bound))
    return found


def summary(stats: MrtrStats, found: list[Verdict], run: Mapping[str, Any]) -> dict[str, Any]:
    """The `$MRTR_LOCUST_SUMMARY` document (see loadtest/README.md for every field)."""
    c = stats.counts
    return {
        "requests": c["requests"],
        "failures": c["failures"],
        "failed_requests": c["failed_requests"],
        "wrong_answers": c["wrong_answers"],
        "reasked_questions": c["reasked_questions"],
        "requests_with_reasked": c["requests_with_reasked"],
        "requests_both_versions": c["requests_both_versions"],
        "requests_shed": c["requests_shed"],
        "questions": c["questions"],
        "hops": c["hops"],
        "bytes": c["bytes"],
        "tasks": {name: c[name] for name in TASK_COUNTS},
        "mean_hops": round(stats.mean_hops(), 3),
        "hops_histogram": stats.counter("hops_histogram"),
        "end_reasons": stats.counter("end_reasons"),
        "instances_per_request": stats.counter("instances_per_request"),
        "versions_per_request": stats.counter("versions_per_request"),
        "instances_seen": stats.counter("instances_seen"),
        "versions_seen": stats.counter("versions_seen"),
        "instance_hops": stats.counter("instance_hops"),
        "version_hops": stats.counter("version_hops"),
        "questions_by_key": stats.counter("questions_by_key"),
        "failure_kinds": stats.counter("failure_kinds"),
        "latency_by_class": {key: lat.summary() for key, lat in sorted(stats.by_class.items())},
        "latency_by_name": {key: lat.summary() for key, lat in sorted(stats.by_name.items())},
        "thresholds": {"passed": all(v.ok for v in found), "checks": [v.as_json() for v in found]},
        "run": dict(run),
    }


def text(doc: Mapping[str, Any]) -> str:
    """The summary as the headless run prints it."""

    def pairs(counts: Mapping[str, int]) -> str:
        return "  ".join(f"{key}: {value}" for key, value in counts.items()) or "-"

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    lines = [
        "MRTR summary " + "-" * 67,
        f"requests {doc['requests']}   failures {doc['failures']} (failed requests {doc['failed_requests']}, "
        f"wrong answers {doc['wrong_answers']})   re-asked questions {doc['reasked_questions']}",
        f"requests across versions {doc['requests_both_versions']}   shed at least once {doc['requests_shed']}   "
        f"mean hops {doc['mean_hops']}   questions {doc['questions']}",
        f"hops per request      {pairs(doc['hops_histogram'])}",
        f"rounds ended by       {pairs(doc['end_reasons'])}",
        f"instances per request {pairs(doc['instances_per_request'])}",
        f"versions per request  {pairs(doc['versions_per_request'])}",
        f"requests by instance  {pairs(doc['instances_seen'])}",
        f"requests by version   {pairs(doc['versions_seen'])}",
        f"questions asked       {pairs(doc['questions_by_key'])}",
        "tasks                 " + "   ".join(f"{k.removeprefix('tasks_')} {v}" for k, v in doc["tasks"].items()),
    ]
    if doc["failure_kinds"]:
        lines.append(f"failures by kind      {pairs(doc['failure_kinds'])}")
    bounds = {v["check"].removeprefix("p95_ms "): v["limit"] for v in doc["thresholds"]["checks"]}
    header = f"{'reqs':>7}{'fail':>6}{'wrong':>6}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'p95 bound':>11}"
    for title, table in (("user class (ms)", doc["latency_by_class"]), ("name (ms)", doc["latency_by_name"])):
        lines.append(f"{title:28}{header}")
        for key, row in table.items():
            bound = bounds.get(key)
            lines.append(
                f"  {key[:26]:26}{row['requests']:>7}{row['failures']:>6}{row['wrong_answers']:>6}"
                f"{ms(row['p50_ms']):>8}{ms(row['p95_ms']):>8}{ms(row['p99_ms']):>8}{ms(row['max_ms']):>8}"
                f"{'' if bound is None else f'{bound:.0f}':>11}"
            )
    failed = [v for v in doc["thresholds"]["checks"] if not v["ok"]]
    if any(v["check"] == "requests" for v in failed):
        lines.append(NO_REQUESTS)
    if failed:
        reasons = "; ".join(f"{v['check']} = {v['value']} (limit {relation(v['check'])} {v['limit']})" for v in failed)
        lines.append(f"thresholds: FAILED: {reasons}")
    else:
        lines.append("thresholds: passed (requests made, none failed, wrong or re-asked; every p95 within bound)")
    return "\n".join(lines)
