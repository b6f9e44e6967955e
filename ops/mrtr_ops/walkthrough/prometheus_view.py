"""What Prometheus saw of a walkthrough, beside what the Locust recorder saw.

Two independent witnesses of one run: Locust records every call it made and the version that finished
it; the workers count the calls they finished, and Prometheus (`--prometheus`) scraped those counters.
The report sets them side by side and says where they disagree. A worker's counters start at zero
with the worker, so each one's highest sample over the run is all it counted: a worker that joined under
load counts from its first call although Prometheus scraped it seconds later (`increase` would lose those),
and one drained during the upgrade still counts by its last sample. On compose a new container may get
the address of one just stopped, so one `instance` is first a version 1 worker, then a version 2 one:
each sample is labelled with the version that instance ran at that moment (a subquery at every second)
before the highest is taken, so the two workers' counts stay apart.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx

from mrtr_ops.waiting import wait_until

CALLS_ENDED = (
    'mrtr_worker_requests_total{method=~"tools/call|prompts/get|resources/read", outcome=~"complete|tool_error|task"}'
)
"""Requests that can take MRTR rounds (tools, prompts, resources) a worker ended (a result, the tool's own
error, or handed over as a task), as `mrtr:calls:rate1m` counts them: what Locust counts as completed, by
version (a task by the version that created it, so the two may differ by the tasks finished across the
upgrade)."""

TOLERANCE = 0.1
"""A version's counts agree when they differ by at most this share of Locust's (at least 5 calls): the calls a
drained worker ended after its last scrape are Locust's alone."""


def _query(http: httpx.Client, url: str, expr: str, at: float) -> dict[str, float]:
    reply = http.get(f"{url}/api/v1/query", params={"query": expr, "time": f"{at:.3f}"})
    reply.raise_for_status()
    return {s["metric"].get("version", ""): float(s["value"][1]) for s in reply.json()["data"]["result"]}


def _timeline(http: httpx.Client, url: str, started: float, ended: float) -> dict[str, list[list[float]]]:
    params = {"query": "sum by (version) (mrtr:calls:rate1m)", "start": f"{started:.3f}", "end": f"{ended:.3f}"}
    reply = http.get(f"{url}/api/v1/query_range", params={**params, "step": "5"})
    reply.raise_for_status()
    return {
        s["metric"].get("version", ""): [[round(float(t) - started, 1), round(float(v), 2)] for t, v in s["values"]]
        for s in reply.json()["data"]["result"]
    }


def collect(url: str, started: float, ended: float) -> dict[str, Any]:
    """Calls by version (in total and over time) and states refused, as Prometheus recorded them."""
    with httpx.Client(timeout=30.0) as http:
        wait_until(
            lambda: _query(http, url, "min(timestamp(mrtr_worker_info))", time.time()).get("", 0.0) > ended,
            timeout=30,
            interval=0.5,
            what="a Prometheus scrape of every worker after the run's end",
        )
        at = time.time()
        window = f"{int(at - started) + 30}s"
        calls = _query(http, url, _counted_by_version(CALLS_ENDED, window), at)
        refused = _query(http, url, f"sum({_counted_by_version('mrtr_worker_state_rejections_total', window)})", at)
        return {
            "scrape_interval_s": scrape_interval(http, url),
            "calls_by_version": {version: round(count) for version, count in sorted(calls.items())},
            "states_refused": round(refused.get("", 0.0)),
            "calls_per_s_by_version": _timeline(http, url, started, ended),
        }


def _counted_by_version(counter: str, window: str) -> str:
    """PromQL: by version, what every worker's `counter` reached over `window` (each worker's highest sample)."""
    versioned = f"{counter} * on (job, instance) group_left (version) mrtr_worker_info"
    return f"sum by (version) (max_over_time(({versioned})[{window}:1s]))"


def disagreements(
    locust: dict[str, int], prometheus: dict[str, int], unscraped: dict[str, float] | None = None
) -> list[str]:
    """Where the two witnesses' calls by version differ beyond `TOLERANCE` (empty: they agree).

    `unscraped`: by version, how many more calls Prometheus may miss: those its drained workers ended after
    their last scrape die with their counters (`allowance_for_drains`). Prometheus never counts more than Locust
    by more than the tolerance.
    """
    found = []
    for version in sorted(set(locust) | set(prometheus)):
        seen, scraped = locust.get(version, 0), prometheus.get(version, 0)
        allowed = max(5, TOLERANCE * seen)
        missed = (unscraped or {}).get(version, 0.0)
        if seen - scraped > allowed + missed or scraped - seen > allowed:
            found.append(f"version {version}: Locust {seen}, Prometheus {scraped}")
    return found


def allowance_for_drains(calls: int, seconds: float, scrape_interval_s: float) -> float:
    """Calls the drained workers of a rolling update may end after their last scrape: one scrape interval of the
    fleet's calls in all (each of N drained workers ends about 1/N of them, for at most one interval)."""
    return calls / seconds * scrape_interval_s if seconds > 0 else 0.0


def scrape_interval(http: httpx.Client, url: str) -> float:
    """The Prometheus's global scrape interval in seconds (its default, 60, if its configuration names none)."""
    reply = http.get(f"{url}/api/v1/status/config")
    reply.raise_for_status()
    found = re.search(r"scrape_interval:\s*(\d+)s\b", reply.json()["data"]["yaml"])
    return float(found.group(1)) if found else 60.0
