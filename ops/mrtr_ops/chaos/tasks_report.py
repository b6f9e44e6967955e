"""The task chaos run's report: `summary.json`, `summary.md`, and (with `--doc`) its section of docs/chaos.md."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrtr_ops.history.checker import Verdict

DOC_START = "<!-- tasks-chaos-run:start -->"
DOC_END = "<!-- tasks-chaos-run:end -->"


@dataclass(frozen=True)
class Settings:
    tasks: int
    producers: int
    workers: int
    concurrency: int
    seed: int
    redis_ha: bool
    slice_ms: int
    dead_ms: int
    max_run_ms: int
    kinds: dict[str, float] = field(default_factory=dict)
    """Fault kinds of this cluster's mix and their chance per tick."""
    ticks: int = 0
    seconds: float = 0.0


def write_report(
    verdict: Verdict, faults: list[dict[str, Any]], settings: Settings, out: Path, *, doc: Path | None = None
) -> dict[str, Any]:
    done = Counter(f["kind"] for f in faults)
    fault_errors = [f"{f['kind']} {f['victim']}: {f['error']}" for f in faults if f.get("error")]
    problems = verdict.problems + [f"fault not undone: {e}" for e in fault_errors]
    summary = {
        "settings": asdict(settings),
        "faults": dict(done),
        "fault_errors": fault_errors,
        "zombies_holding_a_slice": sum(
            1 for f in faults if f["kind"] == "worker-stop" and f.get("detail", {}).get("held_a_slice")
        ),
        **verdict.as_json(),
        "problems": problems,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    text = "\n".join(markdown(summary)) + "\n"
    (out / "summary.md").write_text(text)
    if doc is not None:
        write_doc_section(doc, text)
    return summary


def markdown(summary: dict[str, Any]) -> list[str]:
    s = summary["settings"]
    faults = summary["faults"]
    store = "Redis with Sentinel (a primary, replicas, three sentinels)" if s["redis_ha"] else "one Redis"
    lines = [
        f"Run of {s['seconds']:.0f} s on {_machine()}: {s['tasks']} tasks from {s['producers']} producer processes "
        f"({s['concurrency']} in flight each, a plain MRTR call every few tasks), {s['workers']} workers, {store}; "
        f"slices of {s['slice_ms']} ms, a worker dead after {s['dead_ms']} ms without a heartbeat, the endless toxic "
        f"task's run-time limit {s['max_run_ms'] / 1000:g} s; seed {s['seed']}, {s['ticks']} ticks of 0.25 s.",
        "",
        "| fault (chance per tick) | done |",
        "|---|---:|",
    ]
    for kind, rate in s["kinds"].items():
        lines.append(f"| {kind} ({rate:.0%}) | {faults.get(kind, 0)} |")
    redelivery = summary["redelivery"]
    lines += [
        "",
        "| checked | count |",
        "|---|---:|",
        f"| task creations acknowledged | {summary['created']} |",
        f"| creations indeterminate (no reply, or store unreachable: retried as new ones) | "
        f"{summary['indeterminate_creations']} |",
        f"| completed with the exact result and step count | {summary['exact']} of {summary['completed']} |",
        f"| toxic tasks (raise, sys.exit, never ends), each ended failed with its error | {summary['toxic']} |",
        f"| **lost** (acknowledged, never seen terminal) | **{summary['lost']}** |",
        f"| **duplicated** (two terminal views disagree, or not one terminal commit) | "
        f"**{summary['terminal_disagreements'] + summary['terminal_commits_not_one']}** |",
        f"| **committed twice** (a step range not starting where the last ended) | **{summary['committed_twice']}** |",
        f"| **wrong** (a result, a step count or a toxic task's end) | **{summary['wrong']}** |",
        f"| looping tasks (a slice handed out more than 5 times) | {summary['loops']} |",
        f"| MRTR calls / wrong / not finished within the client's retries | {summary['mrtr_calls']} / "
        f"**{summary['mrtr_wrong']}** / {summary['mrtr_unfinished']} |",
        f"| slices begun / of them taken over from another worker | {summary['slices_begun']} / "
        f"{summary['taken_over']} |",
        f"| commits landed / refused as fenced (a zombie's) / stale (a cancel) | {summary['commits_landed']} / "
        f"{summary['commits_fenced']} / {summary['commits_stale']} |",
        f"| step boundaries refused as fenced (a zombie stopped before its commit) | {summary['boundaries_fenced']} |",
        f"| zombies frozen while holding a slice | {summary['zombies_holding_a_slice']} |",
        "",
        "Redelivery: seconds from the fault (kill -9, SIGSTOP) to the first begin, on another worker, of each "
        "slice its victim held.",
        "",
        "| after | slices | p50 s | p99 s | max s |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, figures in redelivery.items():
        lines.append(
            f"| {kind} | {figures['count']} | {figures['p50']:.2f} | {figures['p99']:.2f} | {figures['max']:.2f} |"
        )
    if not redelivery:
        lines.append("| (none measured) | 0 | | | |")
    verdict = "no problem found" if not summary["problems"] else "PROBLEMS: " + "; ".join(summary["problems"])
    lines += ["", f"Verdict: **{verdict}**."]
    for what, examples in summary["examples"].items():
        lines += ["", f"Examples ({what}):", *[f"- `{e}`" for e in examples]]
    return lines


def _machine() -> str:
    return f"{os.cpu_count()} cores, shared with other work (absolute times are inflated by it)"


def write_doc_section(doc: Path, text: str) -> None:
    """Replace the run's section of `doc` (between the markers), or append it with the markers."""
    body = doc.read_text() if doc.exists() else ""
    block = f"{DOC_START}\n{text}{DOC_END}"
    if DOC_START in body and DOC_END in body:
        head, rest = body.split(DOC_START, 1)
        _, tail = rest.split(DOC_END, 1)
        body = head + block + tail
    else:
        body = body.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(body)
