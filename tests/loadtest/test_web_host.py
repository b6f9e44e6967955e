"""Every start from the web UI runs against the host it was given (issue 21: Locust kept the first run's host).

Real Locust processes in web UI mode (a local runner, and a master with one worker) are driven through
the web API a browser uses (`POST /swarm` with `host`, `POST /stop`) against two real workers, A and B.
Users that went on running used to call the first host for ever, and a start with the host field emptied
still called the last host; now each call goes to the host of the run going now, and a run without a
host fails each call saying where to give one. Which worker served a call is read from the suite's
events file (the `X-Worker-Id` of each hop), or for the smoke file from Locust's own counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_locust.target import NO_HOST
from mrtr_ops.local.process import LOOPBACK, WorkerSpec, free_port
from mrtr_ops.waiting import wait_until
from tests.conftest import StartWorker
from tests.support.compose_files import compose_project, default_locustfile
from tests.support.paths import ROOT

SUITE = default_locustfile(compose_project()["services"]["locust-master"])
"""The file the compose `loadtest` profile runs by default: the full suite, with its MRTR tabs."""
SMOKE = ROOT / "loadtest" / "smoke.py"
WAIT = 120.0
"""Seconds any one thing may take to be seen (a busy machine starts Locust slowly); no wait is a sleep."""
MRTR_TABS = ("MRTR checks", "MRTR hops", "MRTR rounds")
CLASS = "ShortCallsUser"
"""`echo` calls only: cheap, and each names the worker that answered."""


class LocustProcess:
    """One `python -m locust` process, its output in a file, killed at the end."""

    def __init__(self, work: Path, name: str, args: list[str], env: dict[str, str]) -> None:
        self.log = work / f"{name}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "locust", *args],
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"Locust exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class WebUi:
    """The web API of a Locust started with its web UI, as the browser's start form uses it."""

    def __init__(self, port: int, process: LocustProcess) -> None:
        self.http = httpx.Client(base_url=f"http://{LOOPBACK}:{port}", timeout=10)
        self.process = process
        wait_until(self._up, timeout=WAIT, interval=0.2, what="the Locust web UI")

    def _up(self) -> bool:
        self.process.alive()
        try:
            return self.http.get("/").status_code == 200
        except httpx.TransportError:
            return False

    def start(self, host: str, users: int = 2) -> None:
        form = {"user_count": str(users), "spawn_rate": str(users), "host": host}
        answer = self.http.post("/swarm", data=form).json()
        assert answer["success"], answer
        assert answer["host"] == host, answer

    def stop(self) -> None:
        assert self.http.post("/stop").json()["success"]

    def stats(self) -> dict[str, Any]:
        self.process.alive()
        stats: dict[str, Any] = self.http.get("/stats/requests").json()
        return stats


class Events:
    """The suite's events file: one line per call, with the workers it visited and its error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text().split("\n")
        return [json.loads(line) for line in lines[:-1] if line]

    def after(self, mark: int) -> list[dict[str, Any]]:
        return self.all()[mark:]

    def wait(self, what: str, test: Callable[[list[dict[str, Any]]], bool], mark: int, ui: WebUi) -> int:
        """Wait until the calls made since `mark` pass `test`; the new mark."""

        def seen() -> int | None:
            ui.process.alive()
            events = self.after(mark)
            return mark + len(events) if test(events) else None

        return wait_until(seen, timeout=WAIT, interval=0.2, what=what)


def _settled_on(instance: str, calls: int = 4) -> Callable[[list[dict[str, Any]]], bool]:
    """The last `calls` calls all went to `instance` and succeeded: every user follows the new host."""
    return lambda events: (
        len(events) >= calls and all(e["instances"] == [instance] and e["ok"] for e in events[-calls:])
    )


def _no_host(events: list[dict[str, Any]]) -> bool:
    return len(events) >= 2 and all(not e["ok"] and NO_HOST in (e["error"] or "") for e in events[-2:])


@pytest.fixture(scope="module")
def two_workers(start_worker: StartWorker) -> tuple[WorkerSpec, WorkerSpec]:
    return start_worker()[0], start_worker()[0]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def started() -> Iterator[list[LocustProcess]]:
    processes: list[LocustProcess] = []
    yield processes
    for process in processes:
        process.stop()


def _follow_hosts(ui: WebUi, events: Events, a: WorkerSpec, b: WorkerSpec) -> None:
    """Host A, then B while the users run, then a start with the host field emptied, then A after a stop."""
    ui.start(a.url)
    mark = events.wait(f"calls to {a.instance_id}", _settled_on(a.instance_id), 0, ui)
    ui.start(b.url)  # the start form again, users still running
    mark = events.wait(f"every user to call {b.instance_id}, the new host", _settled_on(b.instance_id), mark, ui)
    ui.start("")
    mark = events.wait("calls failing for want of a host", _no_host, mark, ui)
    ui.stop()
    ui.start(a.url)
    events.wait(f"calls to {a.instance_id} after a stop", _settled_on(a.instance_id), mark, ui)
    ui.stop()


def test_a_local_web_ui_run_follows_every_host_it_is_given(
    two_workers: tuple[WorkerSpec, WorkerSpec], work: Path, started: list[LocustProcess]
) -> None:
    a, b = two_workers
    port, events = free_port(), Events(work / "events.jsonl")
    args = ["-f", str(SUITE), "--web-host", LOOPBACK, "--web-port", str(port), "--host", a.url, CLASS]
    started.append(LocustProcess(work, "local", args, {"MRTR_LOCUST_EVENTS": str(events.path)}))
    ui = WebUi(port, started[0])
    page = ui.http.get("/").text
    assert all(tab in page for tab in MRTR_TABS), "the web UI of the file compose runs has the MRTR tabs"
    _follow_hosts(ui, events, a, b)


def test_the_workers_of_a_distributed_run_follow_every_host_the_master_is_given(
    two_workers: tuple[WorkerSpec, WorkerSpec], work: Path, started: list[LocustProcess]
) -> None:
    a, b = two_workers
    port, master_port, events = free_port(), free_port(), Events(work / "events.jsonl")
    master = ["-f", str(SUITE), "--master", "--master-bind-host", LOOPBACK, "--master-bind-port", str(master_port)]
    master += ["--web-host", LOOPBACK, "--web-port", str(port), "--host", a.url, CLASS]
    started.append(LocustProcess(work, "master", master, {}))
    worker = ["-f", str(SUITE), "--worker", "--master-host", LOOPBACK, "--master-port", str(master_port), CLASS]
    started.append(LocustProcess(work, "worker", worker, {"MRTR_LOCUST_EVENTS": str(events.path)}))
    ui = WebUi(port, started[0])
    wait_until(lambda: len(ui.stats().get("workers") or []) == 1, timeout=WAIT, interval=0.2, what="the worker")
    _follow_hosts(ui, events, a, b)


def test_the_smoke_users_follow_a_new_host_too(
    two_workers: tuple[WorkerSpec, WorkerSpec], work: Path, started: list[LocustProcess]
) -> None:
    """The smoke file's users: a run on a port nobody listens on fails; given a live host, they succeed."""
    _, live = two_workers
    port = free_port()
    args = ["-f", str(SMOKE), "--web-host", LOOPBACK, "--web-port", str(port)]
    started.append(LocustProcess(work, "smoke", args, {}))
    ui = WebUi(port, started[0])
    ui.start(f"http://{LOOPBACK}:{free_port()}")
    wait_until(lambda: _counts(ui)[1] > 0, timeout=WAIT, interval=0.2, what="calls to the dead host to fail")
    ui.start(live.url)  # the users are still running
    assert ui.http.post("/stats/reset").status_code == 200
    wait_until(_succeeding(ui), timeout=WAIT, interval=0.2, what="calls to the live host to succeed")


def _succeeding(ui: WebUi) -> Callable[[], bool]:
    def check() -> bool:
        requests, failures = _counts(ui)
        return requests - failures >= 4

    return check


def _counts(ui: WebUi) -> tuple[int, int]:
    """Requests and failures so far (Locust's aggregated row)."""
    total = next(row for row in ui.stats()["stats"] if row["name"] == "Aggregated")
    return int(total["num_requests"]), int(total["num_failures"])
