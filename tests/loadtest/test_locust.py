"""The Locust suite end to end: real Locust processes against a local cluster of mixed versions (1, 2, 1).

Every run starts at once against one cluster (the runs overlap, so the fleet
is busier than any one of them makes it): a headless run of the checked
classes, the login scenario with the web UI, a run given a wrong answer
table, a master with one worker, and a run left to the suite's own caps.
Timings are never asserted: the p95 bounds are lifted out of reach.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_locust.limits import P95_OPTIONS, flag
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.local.process import LOOPBACK, free_port
from tests.support.paths import ROOT

LOCUSTFILE = ROOT / "loadtest" / "locustfile.py"
WRONG_TABLE = Path(__file__).with_name("wrong_table_locustfile.py")
RUN_TIME = "20s"
SHED_REASONS = {"admission", "pressure", "slice", "drain"}
pytestmark = pytest.mark.slow  # a cluster and six Locust processes
NO_TIMING_BOUNDS = [f"{flag(dest)}=3600000" for dest in P95_OPTIONS]
EVENT_KEYS = {"start", "end", "user_class", "name", "ok", "wrong", "error", "questions", "reasked", "hops"}
EVENT_KEYS |= {"instances", "versions"}
HOP_KEYS = {"instance", "version", "reason", "ms", "status"}


@dataclass
class Run:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    summary_path: Path
    events_path: Path
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
        if not self.events_path.exists():
            return []
        return [json.loads(line) for line in self.events_path.read_text().splitlines()]


def _locust(name: str, work: Path, command: str, *, host: str | None) -> Run:
    """Start `python -m locust <command>` in the repository, its summary, events and output in `work`."""
    log, summary, events = work / f"{name}.log", work / f"{name}-summary.json", work / f"{name}-events.jsonl"
    env = {**os.environ, "MRTR_LOCUST_SUMMARY": str(summary), "MRTR_LOCUST_EVENTS": str(events)}
    argv = [sys.executable, "-m", "locust", *shlex.split(command), *(["--host", host] if host else [])]
    with log.open("wb") as out:
        process = subprocess.Popen([*argv, *NO_TIMING_BOUNDS], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Run(name, process, log, summary, events)


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


def _watch_ui(run: Run, port: int) -> None:
    """Poll the web UI while the run goes, as a browser would, keeping what it showed."""
    with httpx.Client(base_url=f"http://{LOOPBACK}:{port}", timeout=5) as ui:
        while run.process.poll() is None:
            time.sleep(1)
            try:
                stats = ui.get("/stats/requests").json()
                if stats.get("state") != "running":
                    continue
                page = ui.get("/").text
                summary = ui.get("/mrtr/summary.json").json()
            except (httpx.HTTPError, ValueError):
                continue
            run.ui.append({"stats": stats, "page": page, "summary": summary})


@pytest.fixture(scope="module")
def runs(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    work = tmp_path_factory.mktemp("locust")
    host = cluster.url
    master_port, web_port = free_port(), free_port()
    suite, wrong_table = shlex.quote(str(LOCUSTFILE)), shlex.quote(str(WRONG_TABLE))
    headless = f"--headless --only-summary -f {suite}"
    checked = "ShortCallsUser ComputeUser ElicitationUser SamplingRootsUser"
    started = [
        _locust("checked", work, f"{headless} -u 8 -r 8 -t {RUN_TIME} {checked}", host=host),
        _locust(
            "login",
            work,
            f"-f {suite} --autostart --autoquit 0 -u 3 -r 3 -t {RUN_TIME} LoginUser"
            f" --web-host {LOOPBACK} --web-port {web_port}",
            host=host,
        ),
        _locust("wrong", work, f"--headless --only-summary -f {wrong_table} -u 1 -r 1 -t 6s", host=host),
        _locust(
            "master",
            work,
            f"{headless} --master --expect-workers 1 --expect-workers-max-wait 60"
            f" --master-bind-host {LOOPBACK} --master-bind-port {master_port}"
            f" -u 6 -r 6 -t {RUN_TIME} ShortCallsUser ComputeUser ElicitationUser",
            host=host,
        ),
        _locust("worker", work, f"-f {suite} --worker --master-host {LOOPBACK} --master-port {master_port}", host=None),
        _locust(
            "capped", work, f"{headless} -u 5 -r 5 --mrtr-max-users 2 --mrtr-max-run-time 4 ShortCallsUser", host=host
        ),
    ]
    by_name = {run.name: run for run in started}
    try:
        _watch_ui(by_name["login"], web_port)
        for run in started:
            run.process.wait(timeout=120)
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
    assert set(summary["end_reasons"]) & SHED_REASONS, summary["end_reasons"]
    assert set(summary["versions_seen"]) == {"1", "2"}
    assert len(summary["instances_seen"]) == 3
    assert sum(summary["hops_histogram"].values()) == summary["requests"]
    assert summary["end_reasons"]["complete"] == summary["requests"]
    assert set(summary["latency_by_class"]) == {"ShortCallsUser", "ComputeUser", "ElicitationUser", "SamplingRootsUser"}
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
    checks = next(tab["data"] for tab in last["stats"]["extended_stats"] if tab["key"] == "mrtr-checks")
    shown = {row["figure"]: row["value"] for row in checks}
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
    assert "this run stops after 4 s" in run.output
    assert "caps the run at 2" in run.output
    assert "(2 total users)" in run.output
    summary = run.summary()
    assert summary["requests"] > 0
    assert summary["run"]["ended"] - summary["run"]["started"] < 15
