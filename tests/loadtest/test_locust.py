"""The Locust suite end to end: real Locust processes against a local cluster of mixed versions (1, 2, 1).

Every run starts at once against one cluster (the runs overlap, so the fleet
is busier than any one of them makes it): a headless run of the checked
classes, the login scenario with the web UI, a run given a wrong answer
table, a master with one worker, and a run left to the suite's own caps.

No run assumes the machine's speed. The driver watches each run's events file
(and the web UI) and ends the run with `MRTR_LOCUST_STOP_FILE` once it has
shown what the tests read; `--run-time` only bounds a run that never gets
there. The master starts when its worker has joined (`--expect-workers`).
Timings are never asserted: the p95 bounds are lifted out of reach.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_locust.limits import P95_OPTIONS, flag
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.process import LOOPBACK, free_port
from mrtr_protocol.rounds import HAND_BACK_REASONS
from tests.support.paths import ROOT

LOCUSTFILE = ROOT / "loadtest" / "locustfile.py"
WRONG_TABLE = Path(__file__).with_name("wrong_table_locustfile.py")
RUN_TIME_BOUND = 240
"""Seconds after which a run ends by itself if the driver has not stopped it (it then fails the tests)."""
WORKER_WAIT = 240
"""`--expect-workers-max-wait`: how long the master waits for its worker to join (a busy machine is slow)."""
PROCESS_WAIT = WORKER_WAIT + RUN_TIME_BOUND + 120
"""Seconds the driver waits for every Locust process to end before it kills them."""
CHECKED = ("ShortCallsUser", "ComputeUser", "ElicitationUser", "SamplingRootsUser", "TaskUser")
DISTRIBUTED = ("ShortCallsUser", "ComputeUser", "ElicitationUser")
pytestmark = pytest.mark.slow  # a cluster and six Locust processes
NO_TIMING_BOUNDS = [f"{flag(dest)}=3600000" for dest in P95_OPTIONS]
EVENT_KEYS = {"start", "end", "user_class", "name", "ok", "wrong", "error", "questions", "reasked", "hops"}
EVENT_KEYS |= {"instances", "versions", "bytes", "task"}
TASK_KEYS = {"id", "statuses", "final", "workers"}
HOP_KEYS = {"instance", "version", "reason", "ms", "status"}


def _read_events(path: Path) -> list[dict[str, Any]]:
    """The complete lines of an events file (a line still being written is left for the next read)."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    return [json.loads(line) for line in lines[:-1] if line]


@dataclass
class Run:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    summary_path: Path
    events_path: Path
    stop_path: Path
    done: Callable[[Run], bool] | None = None
    """When the run has shown what the tests read; the driver then stops it. None: it stops by itself."""
    ui: list[dict[str, Any]] = field(default_factory=list)
    """Snapshots of the web UI taken while the run was going (login run only)."""

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def summary(self) -> dict[str, Any]:
        assert self.summary_path.exists(), f"{self.name}: no summary written\n{self.output[-3000:]}"
        doc: dict[str, Any] = json.loads(self.summary_path.read_text())
        return doc

    def events(self) -> list[dict[str, Any]]:
        return _read_events(self.events_path)


def _locust(name: str, work: Path, command: str, *, host: str | None, done: Callable[[Run], bool] | None) -> Run:
    """Start `python -m locust <command>` in the repository, its summary, events, stop file and output in `work`."""
    log, summary, events = work / f"{name}.log", work / f"{name}-summary.json", work / f"{name}-events.jsonl"
    stop = work / f"{name}.stop"
    env = {
        **os.environ,
        "MRTR_LOCUST_SUMMARY": str(summary),
        "MRTR_LOCUST_EVENTS": str(events),
        "MRTR_LOCUST_STOP_FILE": str(stop),
    }
    argv = [sys.executable, "-m", "locust", *shlex.split(command), *(["--host", host] if host else [])]
    with log.open("wb") as out:
        process = subprocess.Popen([*argv, *NO_TIMING_BOUNDS], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Run(name, process, log, summary, events, stop, done)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    config = ClusterConfig(
        port=0,
        work_dir=tmp_path_factory.mktemp("cluster"),
        worker_env={"MRTR_WORKER_MAX_SLICE_MS": "300", "MRTR_WORKER_MIN_SLICE_MS": "50"},
        versions=(1, 2, 1),
    )
    with LocalCluster(config) as started:
        yield started


# --- when a run has shown enough -------------------------------------------------------------------


def _checked_done(run: Run) -> bool:
    """Every class ran, a round was handed back, a request crossed versions, every instance served, a task
    asked its question (`estimate_pi ask_to_refine`) and was answered, and Locust's CSV table shows requests."""
    events = run.events()
    return (
        {e["user_class"] for e in events} == set(CHECKED)
        and any(e["name"] == "task estimate_pi ask_to_refine" for e in events)
        and any(h["reason"] in HAND_BACK_REASONS for e in events for h in e["hops"])
        and any(len(e["versions"]) >= 2 for e in events)
        and len({i for e in events for i in e["instances"]}) == 3
        and bool(_csv_rows_with_requests(run))
    )


def _csv_rows_with_requests(run: Run) -> list[dict[str, str]]:
    """The rows of Locust's `--csv` table that count requests.

    Locust rewrites the table once a second while the run goes and not again when it quits, so a run
    that has shown everything else within its first second would leave a table of zeros (a row being
    rewritten as it is read is left out)."""
    table = run.log.parent / f"{run.name}_stats.csv"
    if not table.exists():
        return []
    with table.open(newline="") as rows:
        counted = [row for row in csv.DictReader(rows) if (row.get("Request Count") or "").isdigit()]
    return [row for row in counted if int(row["Request Count"])]


def _login_done(run: Run) -> bool:
    """A login crossed versions, version 2 asked for Microsoft, and the web UI showed requests while running."""
    events = run.events()
    return (
        any(len(e["versions"]) >= 2 for e in events)
        and any("microsoft_login" in e["questions"] for e in events)
        and bool(run.ui)
        and _shown_checks(run.ui[-1])["requests"] > 0
    )


def _wrong_done(run: Run) -> bool:
    return len(run.events()) >= 2


WORKER_LOST = "The last worker went missing, stopping test."
"""Locust's master, when its only worker sent no heartbeat for 3 s: the run is over (the test then fails)."""


def _master_done(worker: Run) -> Callable[[Run], bool]:
    """The master has its worker's figures once the worker has recorded requests of every class."""
    return lambda master: {e["user_class"] for e in worker.events()} == set(DISTRIBUTED) or WORKER_LOST in master.output


def _shown_checks(snapshot: dict[str, Any]) -> dict[str, Any]:
    checks = next(tab["data"] for tab in snapshot["stats"]["extended_stats"] if tab["key"] == "mrtr-checks")
    return {row["figure"]: row["value"] for row in checks}


def _snapshot_ui(run: Run, ui: httpx.Client) -> None:
    """Look at the web UI as a browser would, keeping what it showed while the run was going."""
    try:
        stats = ui.get("/stats/requests").json()
        if stats.get("state") != "running":
            return
        page = ui.get("/").text
        summary = ui.get("/mrtr/summary.json").json()
    except (httpx.HTTPError, ValueError):
        return
    run.ui.append({"stats": stats, "page": page, "summary": summary})


def _drive(started: list[Run], login: Run, web_port: int) -> None:
    """Until every run has ended: stop each run once it has shown enough; watch the login run's web UI."""
    deadline = time.monotonic() + PROCESS_WAIT
    with httpx.Client(base_url=f"http://{LOOPBACK}:{web_port}", timeout=5) as ui:
        while any(run.process.poll() is None for run in started) and time.monotonic() < deadline:
            if login.process.poll() is None:
                _snapshot_ui(login, ui)
            for run in started:
                if run.done is not None and not run.stop_path.exists() and run.process.poll() is None and run.done(run):
                    run.stop_path.touch()
            time.sleep(0.5)


@pytest.fixture(scope="module")
def runs(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    work = tmp_path_factory.mktemp("locust")
    host = cluster.url
    master_port, web_port = free_port(), free_port()
    suite, wrong_table = shlex.quote(str(LOCUSTFILE)), shlex.quote(str(WRONG_TABLE))
    headless = f"--headless --only-summary -f {suite}"
    bound = f"-t {RUN_TIME_BOUND}s"
    worker = _locust(
        "worker",
        work,
        f"-f {suite} --worker --master-host {LOOPBACK} --master-port {master_port}",
        host=None,
        done=None,
    )
    started = [
        _locust(
            "checked",
            work,
            # --stop-timeout: a task the run stopped mid-way would count as lost; users finish theirs first.
            f"{headless} -u 8 -r 8 {bound} --stop-timeout 60 --csv {shlex.quote(str(work / 'checked'))}"
            f" {' '.join(CHECKED)}",
            host=host,
            done=_checked_done,
        ),
        _locust(
            "login",
            work,
            f"-f {suite} --autostart --autoquit 0 -u 3 -r 3 {bound} LoginUser"
            f" --web-host {LOOPBACK} --web-port {web_port}",
            host=host,
            done=_login_done,
        ),
        _locust(
            "wrong", work, f"--headless --only-summary -f {wrong_table} -u 1 -r 1 {bound}", host=host, done=_wrong_done
        ),
        _locust(
            "master",
            work,
            f"{headless} --master --expect-workers 1 --expect-workers-max-wait {WORKER_WAIT}"
            f" --master-bind-host {LOOPBACK} --master-bind-port {master_port}"
            f" -u 6 -r 6 {bound} {' '.join(DISTRIBUTED)}",
            host=host,
            done=_master_done(worker),
        ),
        worker,
        _locust(
            "capped",
            work,
            f"{headless} -u 5 -r 5 --mrtr-max-users 2 --mrtr-max-run-time 6 ShortCallsUser",
            host=host,
            done=None,
        ),
    ]
    by_name = {run.name: run for run in started}
    try:
        _drive(started, by_name["login"], web_port)
    finally:
        for run in started:
            if run.process.poll() is None:
                run.process.kill()
            run.process.wait()
    return by_name


def _check_event_line(event: dict[str, Any]) -> None:
    assert set(event) == EVENT_KEYS, event
    assert isinstance(event["start"], float)
    assert event["end"] >= event["start"]
    assert isinstance(event["user_class"], str)
    assert isinstance(event["name"], str)
    assert isinstance(event["ok"], bool)
    assert isinstance(event["wrong"], bool)
    assert event["error"] is None if event["ok"] else isinstance(event["error"], str)
    assert all(isinstance(key, str) for key in event["questions"] + event["reasked"])
    assert event["hops"], event
    assert isinstance(event["bytes"], int)
    assert event["bytes"] > 0 if event["ok"] else event["bytes"] >= 0
    task = event["task"]
    if event["user_class"] != "TaskUser":
        assert task is None
    else:
        assert set(task) == TASK_KEYS
        assert all(isinstance(status, str) and isinstance(at, float) for status, at in task["statuses"])
        assert task["final"] == (task["statuses"][-1][0] if task["statuses"] else None)
    for hop in event["hops"]:
        assert set(hop) == HOP_KEYS, hop
        assert isinstance(hop["reason"], str)
        assert isinstance(hop["ms"], float)
    assert event["instances"] == list(dict.fromkeys(h["instance"] for h in event["hops"] if h["instance"]))
    assert event["versions"] == list(dict.fromkeys(h["version"] for h in event["hops"] if h["version"]))


def test_a_headless_run_checks_every_answer_and_passes(runs: dict[str, Run]) -> None:
    run = runs["checked"]
    assert run.returncode == 0, run.output[-4000:]
    summary = run.summary()
    assert summary["requests"] > 0
    assert (summary["failures"], summary["wrong_answers"], summary["reasked_questions"]) == (0, 0, 0)
    assert summary["requests_both_versions"] > 0
    assert set(summary["end_reasons"]) & set(HAND_BACK_REASONS), summary["end_reasons"]
    assert set(summary["versions_seen"]) == {"1", "2"}
    assert len(summary["instances_seen"]) == 3
    assert sum(summary["hops_histogram"].values()) == summary["requests"]
    # A round ends complete, or (a call that became a task) with the task created.
    assert summary["end_reasons"]["complete"] + summary["end_reasons"].get("task", 0) == summary["requests"]
    assert set(summary["latency_by_class"]) == set(CHECKED)
    for latency in [*summary["latency_by_class"].values(), *summary["latency_by_name"].values()]:
        assert latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert summary["thresholds"]["passed"] is True
    assert "MRTR summary" in run.output
    assert "thresholds: passed" in run.output


def test_the_events_file_has_one_line_per_request(runs: dict[str, Run]) -> None:
    run = runs["checked"]
    events = run.events()
    assert len(events) == run.summary()["requests"]
    for event in events:
        _check_event_line(event)
    assert all(event["ok"] and not event["wrong"] for event in events)
    refined = [e for e in events if e["name"] == "estimate_pi ask_to_refine"]
    assert all(e["questions"] == ["refine"] for e in refined)


def test_the_task_user_runs_its_calls_as_tasks_with_right_answers(runs: dict[str, Run]) -> None:
    """Every TaskUser call became a task, completed with the right answer; its slices' workers are recorded."""
    run = runs["checked"]
    tasks = [e for e in run.events() if e["user_class"] == "TaskUser"]
    assert tasks
    assert all(e["ok"] and e["task"]["id"] and e["task"]["final"] == "completed" for e in tasks), tasks[:2]
    assert all(e["task"]["statuses"][0][0] in ("working", "input_required") for e in tasks)
    for event in tasks:
        workers = event["task"]["workers"]
        assert workers, event
        assert all(isinstance(instance, str) and version in (1, 2) for instance, version in workers), workers
    refined = [e for e in tasks if e["name"] == "task estimate_pi ask_to_refine"]
    assert refined
    assert all("input_required" in [status for status, _ in e["task"]["statuses"]] for e in refined)
    assert all([key.rpartition("-")[0] for key in e["questions"]] == ["refine"] for e in refined)
    assert len({e["task"]["id"] for e in tasks}) == len(tasks), "task ids are never reused"
    figures = run.summary()["tasks"]
    assert figures["tasks_created"] == figures["tasks_completed"] == len(tasks)
    assert (figures["tasks_wrong"], figures["tasks_lost"]) == (0, 0)
    assert figures["tasks_resumed_elsewhere"] == sum(len({w[0] for w in e["task"]["workers"]}) > 1 for e in tasks)


def test_locusts_size_column_shows_the_bytes_each_call_carried(runs: dict[str, Run]) -> None:
    """Locust's "Average size (bytes)": the response bodies of the call's rounds, not a count of hops."""
    run = runs["checked"]
    events = run.events()
    assert run.summary()["bytes"] == sum(e["bytes"] for e in events)
    for event in events:
        assert event["bytes"] > 30 * len(event["hops"]), event  # a JSON-RPC reply is never under 30 bytes
    # Locust's own table (--csv): every row's "Average Content Size", the "Aggregated" one included.
    rows = _csv_rows_with_requests(run)
    assert rows
    assert all(float(row["Average Content Size"]) > 30 for row in rows), rows
    aggregated = next(row for row in rows if row["Name"] == "Aggregated")
    sizes = [event["bytes"] for event in events]
    assert min(sizes) <= float(aggregated["Average Content Size"]) <= max(sizes)


def test_the_login_scenario_on_mixed_versions_loses_nothing_and_asks_nothing_twice(runs: dict[str, Run]) -> None:
    summary = runs["login"].summary()
    assert summary["requests"] > 0
    assert summary["failed_requests"] == 0
    assert summary["reasked_questions"] == 0
    assert summary["requests_both_versions"] > 0
    assert summary["questions_by_key"].get("microsoft_login", 0) > 0, "version 2 asks for the Microsoft login"
    assert set(summary["failure_kinds"]) <= {"WrongAnswer"}
    for event in runs["login"].events():
        _check_event_line(event)


def test_the_login_scenario_on_mixed_versions_gives_only_right_answers(runs: dict[str, Run]) -> None:
    summary = runs["login"].summary()
    assert summary["wrong_answers"] == 0, [e["error"] for e in runs["login"].events() if e["wrong"]][:3]


def test_the_web_ui_shows_the_mrtr_figures_while_the_run_goes(runs: dict[str, Run]) -> None:
    snapshots = runs["login"].ui
    assert snapshots, runs["login"].output[-3000:]
    last = snapshots[-1]
    tabs = {tab["key"] for tab in last["stats"]["extended_stats"]}
    assert tabs == {"mrtr-checks", "mrtr-hops", "mrtr-rounds", "mrtr-fleet", "mrtr-latency"}
    assert '"extended_tabs"' in last["page"]
    assert "MRTR checks" in last["page"]
    shown = _shown_checks(last)
    assert shown["requests"] > 0
    assert "requests that visited both versions" in shown
    assert "re-asked questions" in shown
    assert last["summary"]["requests"] >= shown["requests"] > 0


def test_a_wrong_answer_fails_the_run(runs: dict[str, Run]) -> None:
    run = runs["wrong"]
    assert run.returncode not in (0, None), run.output[-3000:]
    summary = run.summary()
    assert summary["wrong_answers"] > 0
    assert summary["failures"] == summary["wrong_answers"]
    assert summary["failed_requests"] == 0
    assert summary["thresholds"]["passed"] is False
    assert {"check": "wrong_answers", "value": summary["wrong_answers"], "limit": 0, "ok": False} in summary[
        "thresholds"
    ]["checks"]
    assert "WrongAnswer(" in run.output
    assert "thresholds: FAILED" in run.output
    assert all(e["wrong"] and e["error"].startswith("WrongAnswer: result {'count': 78498}") for e in run.events())


def test_a_master_aggregates_its_workers_figures(runs: dict[str, Run]) -> None:
    master, worker = runs["master"], runs["worker"]
    assert master.returncode == 0, master.output[-4000:]
    summary = master.summary()
    assert summary["run"]["distributed"] is True
    assert summary["run"]["workers"] == 1
    assert "reported as ready. 1 workers connected" in master.output
    assert "did not say goodbye" not in master.output
    assert WORKER_LOST not in master.output, "the worker sent no heartbeat for 3 s: its master dropped it"
    assert not worker.summary_path.exists(), "only the master writes the summary"
    events = worker.events()
    assert summary["requests"] == len(events) > 0
    assert summary["failures"] == 0
    assert summary["hops"] == sum(len(e["hops"]) for e in events)
    assert summary["end_reasons"] == dict(Counter(h["reason"] for e in events for h in e["hops"]))
    assert summary["instances_seen"] == dict(Counter(i for e in events for i in e["instances"]))
    assert summary["requests_both_versions"] == sum(len(e["versions"]) >= 2 for e in events)
    by_class = Counter(e["user_class"] for e in events)
    assert {k: v["requests"] for k, v in summary["latency_by_class"].items()} == dict(by_class)
    assert "MRTR summary" in master.output


def test_without_a_run_time_the_suite_caps_the_run_and_the_users(runs: dict[str, Run]) -> None:
    run = runs["capped"]
    assert run.returncode == 0, run.output[-3000:]
    assert "this run stops after 6 s" in run.output
    assert "caps the run at 2" in run.output
    assert "(2 total users)" in run.output
    summary = run.summary()
    assert summary["requests"] > 0
    assert summary["run"]["ended"] - summary["run"]["started"] < 60, "the cap, not the driver, ended the run"
