"""The chaos run's report: overall figures, one row per fault, and the verdict.

Inputs are Locust's per-request events (`events.jsonl`), the fault records
of the run and the workers' hand-back counters; outputs are `summary.json`,
`summary.md` and `timeline.png` (the walkthrough's plot, the faults marked).

"Failures within the retry budget" are requests that got no complete result
although the client retried as its `RetryPolicy` allows (8 undelivered or
unanswered attempts in a row, 32 rounds): every fault must be absorbed by
those retries, so the figure must be 0, as must wrong answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrtr_client import RetryPolicy
from mrtr_ops.percentiles import percentile
from mrtr_ops.walkthrough.report import Inputs as PlotInputs
from mrtr_ops.walkthrough.report import count_rounds, task_figures, task_problems, task_rows
from mrtr_ops.walkthrough.report import plot as plot_timeline

UNDO_NAMES = {"kill9": "restart", "pause": "resume", "cut": "restore", "redis": "started again"}


@dataclass(frozen=True)
class RunInputs:
    events: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    """Fault records (`chaos.FaultRecord.as_json`), times as Unix seconds."""
    planned_kinds: list[str]
    hand_backs_worker: dict[str, int]
    started: float
    ended: float
    locust_exit_code: int | None
    seed: int


def same_worker(hop_instance: str | None, victim: str) -> bool:
    """A hop's `X-Worker-Id` names the victim (compose: `<container short id>-<pid>`)."""
    return hop_instance is not None and (hop_instance == victim or hop_instance.startswith(f"{victim}-"))


def _hop_times(event: dict[str, Any]) -> list[float]:
    """When each hop ended, approximately (the client's back-off pauses between hops are not recorded)."""
    times, at = [], float(event["start"])
    for hop in event["hops"]:
        at += float(hop["ms"]) / 1000
        times.append(at)
    return times


def _max_consecutive_retries(event: dict[str, Any]) -> int:
    longest = run = 0
    for hop in event["hops"]:
        run = run + 1 if hop["reason"] == "transport" else 0
        longest = max(longest, run)
    return longest


HOP_TIME_MARGIN = 1.0
"""Seconds of slack around a fault's window for a hop's estimated time (the client's waits are not recorded)."""


def fault_figures(fault: dict[str, Any], events: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """One fault's row: its times relative to the start of the load, and what the requests around it did."""
    start, end = float(fault["started"]), float(fault["recovered"] or fault["started"])
    victim = fault["victim"]
    overlapping = [e for e in events if e["start"] <= end and e["end"] >= start]
    retried = retried_elsewhere = 0
    for event in overlapping:
        hops, times = event["hops"], _hop_times(event)
        in_window = [
            i
            for i, hop in enumerate(hops)
            if hop["reason"] == "transport" and start - HOP_TIME_MARGIN <= times[i] <= end + HOP_TIME_MARGIN
        ]
        if not in_window:
            continue
        retried += 1
        later = [hop for hop in hops[in_window[0] + 1 :] if hop["reason"] != "transport"]
        if later and later[0]["instance"] is not None and not same_worker(later[0]["instance"], victim):
            retried_elsewhere += 1

    def rel(at: float | None) -> float | None:
        return None if at is None else round(at - t0, 1)

    undone, recovered, left = fault.get("undone"), fault.get("recovered"), fault.get("left_rotation")
    drained = sum(
        1 for e in events for hop in e["hops"] if hop["reason"] == "drain" and same_worker(hop["instance"], victim)
    )
    return {
        "kind": fault["kind"],
        "victim": victim,
        "at_s": rel(start),
        "hold_s": fault["hold_s"],
        "undone_at_s": rel(undone),
        "recovered_at_s": rel(recovered),
        "out_of_rotation_after_s": None if left is None else round(left - start, 2),
        "back_in_rotation_after_s": (
            None if recovered is None else round(recovered - (undone if undone is not None else start), 2)
        ),
        "in_flight_at_fault": fault["in_flight_at_fault"],
        "computing_at_fault": fault["computing_at_fault"],
        "lb_errors": fault["lb_errors"],
        "requests_in_window": len(overlapping),
        "retried_in_window": retried,
        "retried_elsewhere": retried_elsewhere,
        "failed_in_window": sum(1 for e in overlapping if not e["ok"] and not e["wrong"]),
        "wrong_in_window": sum(1 for e in overlapping if e["wrong"]),
        "max_latency_ms_in_window": round(max(((e["end"] - e["start"]) * 1000 for e in overlapping), default=0.0)),
        "drain_hand_backs_seen_by_clients": drained if fault["kind"] == "drain" else None,
        "tasks_across": _tasks_across(events, start, float(undone or start)) if fault["kind"] == "redis" else None,
        "evidence": fault["evidence"],
        "error": fault.get("error"),
    }


def _tasks_across(events: list[dict[str, Any]], started: float, undone: float) -> int:
    """Tasks created before the fault and completed, right, after it was undone: they went on through it."""
    across = [e for e in events if e.get("task") and e["start"] < started and e["end"] > undone]
    return sum(1 for e in across if e["ok"] and e["task"]["final"] == "completed")


def fault_problems(row: dict[str, Any]) -> list[str]:
    """What shows that a fault did not happen as it should have (empty: it did)."""
    name, evidence = f"{row['kind']} {row['victim']}", row["evidence"]
    if row["error"]:
        return [f"{name}: {row['error']}"]
    problems = []
    if row["kind"] == "kill9":
        if not evidence.get("old_pid_gone"):
            problems.append(f"{name}: the killed process {evidence.get('old_pid')} is still there")
        if evidence.get("new_pid") in (None, evidence.get("old_pid")):
            problems.append(f"{name}: no new process after the restart")
        if not evidence.get("served_after_restart"):
            problems.append(f"{name}: the restarted process served no request")
    if row["kind"] in ("pause", "cut"):
        if row["out_of_rotation_after_s"] is None:
            problems.append(f"{name}: the proxy never took it out of rotation")
        if not evidence.get("same_process"):
            problems.append(f"{name}: it came back as another process")
    if row["kind"] == "redis":
        if not evidence.get("old_pid_gone"):
            problems.append(f"{name}: the stopped Redis process {evidence.get('old_pid')} is still there")
        if evidence.get("new_pid") in (None, evidence.get("old_pid")):
            problems.append(f"{name}: no new Redis process after the restart")
        if row["recovered_at_s"] is None:
            problems.append(f"{name}: the workers never reported the task store reachable again")
    elif row["kind"] != "drain" and row["recovered_at_s"] is None:
        problems.append(f"{name}: never back in rotation")
    if row["kind"] == "drain" and not (evidence.get("exited") and evidence.get("replacement")):
        problems.append(f"{name}: the drained worker did not exit, or no replacement joined")
    return problems


def summarize(inputs: RunInputs) -> dict[str, Any]:
    events, t0 = inputs.events, inputs.started
    rounds, hand_backs_client = count_rounds(events)
    latencies = [(e["end"] - e["start"]) * 1000 for e in events if e["ok"]]
    rows = [fault_figures(f, events, t0) for f in inputs.faults]
    done_kinds = sorted({r["kind"] for r in rows if not r["error"]})
    summary: dict[str, Any] = {
        "seed": inputs.seed,
        "requests": len(events),
        "failures": sum(1 for e in events if not e["ok"] and not e["wrong"]),
        "wrong_answers": sum(1 for e in events if e["wrong"]),
        "reasked_questions": sum(len(e["reasked"]) for e in events),
        "retried_requests": sum(1 for e in events if any(h["reason"] == "transport" for h in e["hops"])),
        "transport_retries": rounds.get("transport", 0),
        "max_consecutive_retries": max((_max_consecutive_retries(e) for e in events), default=0),
        "retry_budget": RetryPolicy().max_delivery_failures,
        "hand_backs": {**inputs.hand_backs_worker, "total": sum(inputs.hand_backs_worker.values())},
        "hand_backs_seen_by_clients": dict(hand_backs_client),
        "rounds_by_end": dict(rounds),
        "latency_ms": {
            # `mrtr_ops.percentiles`: linear between the closest ranks; 0 when no request completed
            **{f"p{p}": round(percentile(latencies, p)) if latencies else 0 for p in (50, 95, 99)},
            "max": round(max(latencies, default=0.0)),
        },
        "duration_s": round(inputs.ended - inputs.started, 1),
        "locust_exit_code": inputs.locust_exit_code,
        **task_figures(events),
        "fault_kinds_planned": sorted(set(inputs.planned_kinds)),
        "fault_kinds_done": done_kinds,
        "faults": rows,
    }
    summary["problems"] = verdict(summary)
    return summary


def verdict(summary: dict[str, Any]) -> list[str]:
    """Everything that went wrong (empty: every fault happened and was absorbed)."""
    problems = [f"{key} = {summary[key]}" for key in ("failures", "wrong_answers", "reasked_questions") if summary[key]]
    if not summary["requests"]:
        problems.append("no request completed")
    missing = sorted(set(summary["fault_kinds_planned"]) - set(summary["fault_kinds_done"]))
    if missing:
        problems.append(f"fault kinds not done: {', '.join(missing)}")
    problems += task_problems(summary)
    if summary["tasks_created"] and not summary["tasks_resumed_elsewhere"]:
        problems.append("no task resumed on another instance")
    for row in summary["faults"]:
        problems.extend(fault_problems(row))
    if summary["locust_exit_code"] not in (0, None):
        problems.append(f"Locust exited with {summary['locust_exit_code']}")
    return problems


def markdown(summary: dict[str, Any]) -> str:
    hand_backs = summary["hand_backs"]
    rows = [
        ("requests", summary["requests"]),
        ("failures within the retry budget", summary["failures"]),
        ("wrong answers", summary["wrong_answers"]),
        ("questions re-asked", summary["reasked_questions"]),
        ("requests retried after a transport failure", summary["retried_requests"]),
        ("transport retries in all", summary["transport_retries"]),
        (
            "most retries in a row for one request",
            f"{summary['max_consecutive_retries']} (budget {summary['retry_budget']})",
        ),
        (
            "hand-backs (worker metrics)",
            f"{hand_backs['total']}: " + ", ".join(f"{k} {v}" for k, v in hand_backs.items() if k != "total"),
        ),
        (
            "hand-backs seen by clients",
            ", ".join(f"{k} {v}" for k, v in sorted(summary["hand_backs_seen_by_clients"].items())) or "none",
        ),
        (
            "latency p50 / p95 / p99 / max (ms)",
            " / ".join(str(summary["latency_ms"][k]) for k in ("p50", "p95", "p99", "max")),
        ),
        *task_rows(summary),
    ]
    faults = [_fault_line(row) for row in summary["faults"]]
    problems = summary["problems"]
    kinds = ", ".join(summary["fault_kinds_done"])
    return "\n".join(
        [
            "# Chaos run",
            "",
            f"Seed {summary['seed']}, {summary['duration_s']} s of load, fault kinds done: {kinds}.",
            "",
            "| figure | value |",
            "|---|---:|",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
            "Per fault (times from the start of the load; *out* and *back*: seconds until the proxy took the victim",
            "out of rotation, and from the undo until it was back; proxy errors on the victim: connect / upstream /",
            "unresponsive; the window runs from the fault to the recovery):",
            "",
            "| at | fault | victim | hold | out | back | in flight (computing) | proxy errors | requests | retried "
            "| failed | max ms | evidence |",
            "|---:|---|---|---:|---:|---:|---:|---|---:|---|---:|---:|---|",
            *faults,
            "",
            "![timeline](timeline.png)",
            "",
            "**Verdict:** "
            + (
                "every fault happened, the retries absorbed all of them, and no task was lost."
                if not problems
                else "; ".join(problems)
            ),
            "",
        ]
    )


def _fault_line(row: dict[str, Any]) -> str:
    errors = "/".join(str(int(row["lb_errors"].get(kind, 0))) for kind in ("connect", "upstream", "unresponsive"))
    cells = [
        f"{row['at_s']} s",
        row["kind"],
        row["victim"],
        f"{row['hold_s']} s",
        _s(row["out_of_rotation_after_s"]),
        _s(row["back_in_rotation_after_s"]),
        f"{row['in_flight_at_fault']} ({row['computing_at_fault']})",
        errors,
        row["requests_in_window"],
        f"{row['retried_in_window']} ({row['retried_elsewhere']} elsewhere)",
        row["failed_in_window"],
        row["max_latency_ms_in_window"],
        _evidence(row),
    ]
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _evidence(row: dict[str, Any]) -> str:
    e = row["evidence"]
    if row["error"]:
        return f"error: {row['error']}"
    if row["kind"] == "kill9":
        return (
            f"pid {e.get('old_pid')} {'gone' if e.get('old_pid_gone') else 'STILL THERE'}, "
            f"restarted as {e.get('new_pid')}, served {e.get('served_after_restart')}"
        )
    if row["kind"] in ("pause", "cut"):
        return f"same process {e.get('pid')}" if e.get("same_process") else "ANOTHER PROCESS"
    if row["kind"] == "redis":
        return (
            f"pid {e.get('old_pid')} {'gone' if e.get('old_pid_gone') else 'STILL THERE'}, "
            f"started again as {e.get('new_pid')} after {e.get('down_s')} s, "
            f"{row['tasks_across']} tasks in flight across it completed"
        )
    return (
        f"exited after {e.get('drain_s')} s, replaced by {e.get('replacement')}, "
        f"{row['drain_hand_backs_seen_by_clients']} drain hand-backs"
    )


def write_report(inputs: RunInputs, out: Path) -> dict[str, Any]:
    summary = summarize(inputs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    marks = []
    for fault in inputs.faults:
        victim = fault["victim"]
        marks.append({"name": f"{fault['kind']} {victim}", "started": fault["started"], "ended": fault["started"]})
        if fault.get("undone"):
            undo = f"{UNDO_NAMES.get(fault['kind'], 'undo')} {victim}"
            marks.append({"name": undo, "started": fault["undone"], "ended": fault["undone"]})
        elif fault["kind"] == "drain" and fault.get("recovered"):
            joined = f"{fault['evidence'].get('replacement')} joins"
            marks.append({"name": joined, "started": fault["recovered"], "ended": fault["recovered"]})
    plot_timeline(
        PlotInputs(inputs.events, marks, inputs.started, inputs.ended, inputs.locust_exit_code), out / "timeline.png"
    )
    return summary
