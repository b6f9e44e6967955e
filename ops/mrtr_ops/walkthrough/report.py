"""The walkthrough's report: figures from Locust's per-request events and the upgrade steps.

Inputs are the JSON lines Locust writes (one per logical request, see
loadtest/README.md) and the steps of the rolling upgrade; outputs are
`summary.json`, `summary.md` and `timeline.png`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrtr_ops.walkthrough.prometheus_view import allowance_for_drains, disagreements
from mrtr_protocol.rounds import HAND_BACK_REASONS


@dataclass(frozen=True)
class Inputs:
    events: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    started: float
    ended: float
    locust_exit_code: int | None
    prometheus: dict[str, Any] | None = None
    """What Prometheus saw (`prometheus_view.collect`), when it watched the run."""


def load_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def count_rounds(events: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """Rounds by how they ended, and the hand-backs among them, over every hop of every request."""
    rounds = Counter(hop["reason"] for event in events for hop in event["hops"])
    hand_backs = Counter({reason: n for reason, n in rounds.items() if reason in HAND_BACK_REASONS})
    return rounds, hand_backs


TASK_FIELDS = ("tasks_created", "tasks_completed", "tasks_wrong", "tasks_lost", "tasks_resumed_elsewhere")
TASK_SETTLED = ("completed", "cancelled")
TASK_STATUSES = ("working", "input_required")
"""The statuses a task is in while in flight (the timeline counts tasks in each, second by second)."""


def _task(event: dict[str, Any]) -> dict[str, Any] | None:
    """The event's task (Locust's `TaskUser` calls), if the call became one."""
    task = event.get("task")
    return task if isinstance(task, dict) and task.get("id") else None


def task_figures(events: list[dict[str, Any]]) -> dict[str, int]:
    """The tasks the load created and how they ended.

    Lost: created, but not seen `completed` or `cancelled` by the end, or the call failed (a `failed` task, a
    task whose wait ran out). Wrong: completed with a wrong answer. Resumed elsewhere: its slices ran on more
    than one instance (the result's compute `_meta` names the worker of each slice).
    """
    tasks = [(event, task) for event in events if (task := _task(event)) is not None]
    return {
        "tasks_created": len(tasks),
        "tasks_completed": sum(1 for _, task in tasks if task["final"] == "completed"),
        "tasks_wrong": sum(1 for event, _ in tasks if event["wrong"]),
        "tasks_lost": sum(
            1 for event, task in tasks if task["final"] not in TASK_SETTLED or (not event["ok"] and not event["wrong"])
        ),
        "tasks_resumed_elsewhere": sum(1 for _, task in tasks if len({w[0] for w in task["workers"]}) > 1),
    }


def task_problems(summary: dict[str, Any]) -> list[str]:
    """No task wrong, none lost, and some created (the load includes tasks in flight)."""
    problems = [f"{key} = {summary[key]}" for key in ("tasks_wrong", "tasks_lost") if summary[key]]
    if not summary["tasks_created"]:
        problems.append("no task created")
    return problems


def task_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("tasks created", summary["tasks_created"]),
        ("tasks completed", summary["tasks_completed"]),
        ("tasks with a wrong answer", summary["tasks_wrong"]),
        ("tasks lost (failed, or never completed or cancelled)", summary["tasks_lost"]),
        ("tasks whose slices ran on more than one instance", summary["tasks_resumed_elsewhere"]),
    ]


def summarize(inputs: Inputs) -> dict[str, Any]:
    events = inputs.events
    rounds, hand_backs = count_rounds(events)
    retire = next((s for s in inputs.steps if s["name"] == "retire-key"), None)
    final_versions = Counter(str(e["hops"][-1]["version"]) for e in events if e["ok"] and e["hops"])
    return {
        "requests": len(events),
        "failures": sum(1 for e in events if not e["ok"] and not e["wrong"]),
        "wrong_answers": sum(1 for e in events if e["wrong"]),
        "reasked_questions": sum(len(e["reasked"]) for e in events),
        "requests_both_versions": sum(1 for e in events if {"1", "2"} <= {str(v) for v in e["versions"]}),
        "old_key_states_accepted": (
            int(retire["detail"]["old_key_states_accepted_after_promotion"]) if retire else None
        ),
        "hand_backs": dict(hand_backs),
        "rounds_by_end": dict(rounds),
        "completed_by_version": dict(final_versions),
        **task_figures(events),
        "duration_s": round(inputs.ended - inputs.started, 1),
        "locust_exit_code": inputs.locust_exit_code,
        "prometheus": inputs.prometheus,
        "steps": [
            {
                "name": s["name"],
                "at_s": round(s["started"] - inputs.started, 1),
                "took_s": round(s["ended"] - s["started"], 1),
            }
            for s in inputs.steps
        ],
    }


def verdict(summary: dict[str, Any]) -> list[str]:
    """What went wrong, if anything (empty: the run proves the point)."""
    problems = [f"{key} = {summary[key]}" for key in ("failures", "wrong_answers", "reasked_questions") if summary[key]]
    if not summary["requests"]:
        problems.append("no request completed")
    if not summary["requests_both_versions"]:
        problems.append("no request visited both versions")
    problems += task_problems(summary)
    if summary["locust_exit_code"] not in (0, None):
        problems.append(f"Locust exited with {summary['locust_exit_code']}")
    return problems


def markdown(summary: dict[str, Any]) -> str:
    rows = [
        ("requests", summary["requests"]),
        ("failures", summary["failures"]),
        ("wrong answers", summary["wrong_answers"]),
        ("requests that visited both versions", summary["requests_both_versions"]),
        ("questions re-asked", summary["reasked_questions"]),
        ("old-key states still accepted after the promotion", summary["old_key_states_accepted"]),
        *task_rows(summary),
    ]
    hand_backs = ", ".join(f"{k} {v}" for k, v in sorted(summary["hand_backs"].items())) or "none"
    rounds = ", ".join(f"{k} {v}" for k, v in sorted(summary["rounds_by_end"].items()))
    steps = "\n".join(f"| {s['at_s']:.1f} s | {s['name']} | {s['took_s']:.1f} s |" for s in summary["steps"])
    problems = verdict(summary)
    return "\n".join(
        [
            "# Rolling upgrade walkthrough",
            "",
            "| figure | value |",
            "|---|---:|",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
            f"Hand-backs (rounds ended with only a requestState), by reason: {hand_backs}.",
            f"All rounds, by how they ended: {rounds}.",
            f"Completed by version: {summary['completed_by_version']}. Run length: {summary['duration_s']} s.",
            "",
            "| at | upgrade step | took |",
            "|---:|---|---:|",
            steps,
            "",
            "![timeline](timeline.png)",
            "",
            *prometheus_section(summary),
            "**Verdict:** "
            + ("nothing lost, nothing asked twice, nothing wrong." if not problems else "; ".join(problems)),
            "",
        ]
    )


def plot(inputs: Inputs, path: Path) -> None:
    """Throughput per version and per instance, hand-backs by reason and errors over time, steps marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = inputs.started
    span = max(1, int(inputs.ended - t0) + 1)
    by_version: dict[str, list[int]] = defaultdict(lambda: [0] * span)
    by_instance: dict[str, list[int]] = defaultdict(lambda: [0] * span)
    by_reason: dict[str, list[int]] = defaultdict(lambda: [0] * span)
    errors = [0] * span
    for event in inputs.events:
        second = min(span - 1, max(0, int(event["end"] - t0)))
        if not event["ok"]:
            errors[second] += 1
            continue
        last = event["hops"][-1] if event["hops"] else {}
        by_version[f"v{last.get('version')}"][second] += 1
        by_instance[str(last.get("instance"))][second] += 1
        at = event["start"]
        for hop in event["hops"]:
            at += hop["ms"] / 1000
            if hop["reason"] in HAND_BACK_REASONS:
                by_reason[hop["reason"]][min(span - 1, max(0, int(at - t0)))] += 1

    tasks_by_status = _tasks_by_status(inputs.events, t0, span)
    seconds = list(range(span))
    fig, (ax1, ax2, ax4, ax3) = plt.subplots(4, 1, figsize=(11, 11), sharex=True)
    for name, series in sorted(by_version.items()):
        ax1.plot(seconds, series, linewidth=2.2, label=f"completed by {name}")
    for name, series in sorted(by_instance.items()):
        ax1.plot(seconds, series, linewidth=0.8, alpha=0.5, linestyle=":", label=name)
    ax1.set_ylabel("requests / s")
    ax1.set_title("Throughput per version (thick) and per instance (dotted)")
    ax1.legend(fontsize=7, ncol=4, loc="lower left")
    for reason, series in sorted(by_reason.items()):
        ax2.plot(seconds, series, label=reason)
    ax2.set_ylabel("hand-backs / s")
    ax2.set_title("Rounds handed back to the client, by reason")
    ax2.legend(fontsize=8, loc="upper left")
    for status, series in tasks_by_status.items():
        ax4.plot(seconds, series, label=status, drawstyle="steps-post")
    ax4.set_ylabel("tasks")
    ax4.set_title("Tasks by status (in flight: as their clients last saw them; ended: per second)")
    ax4.legend(fontsize=8, loc="upper left")
    ax3.bar(seconds, errors, color="crimson")
    ax3.set_ylim(bottom=0, top=max(1, max(errors)))
    ax3.set_ylabel("errors / s")
    ax3.set_title(f"Failed or wrong requests (total {sum(errors)})")
    ax3.set_xlabel("seconds since the load started")
    top = ax1.get_ylim()[1]
    for n, step in enumerate(inputs.steps):
        x = step["ended"] - t0  # the moment the step took effect (a drain done, a key retired)
        for ax in (ax1, ax2, ax4, ax3):
            ax.axvline(x, color="grey", linewidth=0.8, linestyle="--")
        # Staggered heights: steps that follow each other closely stay readable.
        ax1.annotate(step["name"], (x, top * (0.95 - 0.12 * (n % 4))), fontsize=7, ha="left", color="dimgrey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _tasks_by_status(events: list[dict[str, Any]], t0: float, span: int) -> dict[str, list[int]]:
    """Per second: the tasks in each in-flight status (the last change their client saw), and those that ended."""
    series: dict[str, list[int]] = {status: [0] * span for status in TASK_STATUSES}
    ended: dict[str, list[int]] = {}

    def second(at: float) -> int:
        return min(span - 1, max(0, int(at - t0)))

    for event in events:
        task = _task(event)
        if task is None:
            continue
        changes = [(str(status), float(at)) for status, at in task["statuses"]]
        for n, (status, at) in enumerate(changes):
            if status not in TASK_STATUSES:
                ended.setdefault(status, [0] * span)[second(at)] += 1
                continue
            until = changes[n + 1][1] if n + 1 < len(changes) else float(event["end"])
            for s in range(second(at), second(until)):
                series[status][s] += 1
    return {**series, **{f"{status} (per s)": counts for status, counts in sorted(ended.items())}}


def prometheus_section(summary: dict[str, Any]) -> list[str]:
    """Prometheus's view beside the Locust recorder's (nothing when Prometheus did not watch)."""
    seen = summary.get("prometheus")
    if seen is None:
        return []
    locust, scraped = summary["completed_by_version"], seen["calls_by_version"]
    versions = sorted(set(locust) | set(scraped))
    drained = versions[:-1]  # the rolling update stopped every worker of the older versions
    allowance = allowance_for_drains(
        sum(locust.values()), summary.get("duration_s", 0.0), seen.get("scrape_interval_s", 0.0)
    )
    differ = disagreements(locust, scraped, {version: allowance for version in drained})
    return [
        "## What Prometheus saw",
        "",
        "| version | completed (Locust) | calls ended (Prometheus) |",
        "|---|---:|---:|",
        *(f"| {v} | {locust.get(v, 0)} | {scraped.get(v, 0)} |" for v in versions),
        "",
        f"States refused (Prometheus): {seen['states_refused']}.",
        "The two agree." if not differ else "They disagree: " + "; ".join(differ) + ".",
        "",
    ]


def write_report(inputs: Inputs, out: Path) -> dict[str, Any]:
    summary = summarize(inputs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    plot(inputs, out / "timeline.png")
    return summary
