"""The load: Locust's `McpUser` calling the scenario's tools through the proxy, one plain record per call.

Locust runs in a process of its own (`load_process`): importing it patches the standard library with
gevent, and the check's threads, subprocesses and Docker client stay unpatched here. The process
writes one JSON line per finished call; `stop` asks it (SIGTERM) to let the calls in flight finish
and start no new one, as Locust's graceful stop does. A refused state is not restarted by the client
(`restart_unreadable_state=False`), so the server's refusal shows.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrtr_fleet_check.scenario import Scenario
from mrtr_locust.mcp_calls import McpCallRecord

ROUNDS = frozenset({"round:input_required", "round:hand_back"})
"""The statistics names of the exchanges that ended an `input_required` round."""
STOP_TIMEOUT = 120.0
"""Seconds a call in flight has to finish after the stop (a round's answer may take 60 s)."""


class LoadFailed(RuntimeError):
    """The load's process ended without its records (its log's last lines in the message)."""


@dataclass(frozen=True)
class CallRecord:
    tool: str
    arguments: dict[str, Any]
    rounds: int
    hand_backs: int
    """Rounds that came back `input_required` with no question: the server handed its progress back."""
    questions: dict[str, int]
    """How often each input-request key was asked in this call."""
    structured: Any = None
    text: str = ""
    is_error: bool = False
    error: str | None = None
    """A clear error the server answered (its message)."""
    lost: str | None = None
    """Why the call neither completed nor got a clear error (a timeout, undelivered rounds)."""
    instances: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    """The versions the server named (its `X-Worker-Version`), in order of first visit."""
    finished_by: str | None = None
    """The version that gave the last answer, when the server names it: the one whose answer the call must equal."""

    @property
    def completed(self) -> bool:
        return self.error is None and self.lost is None


def record_of(record: McpCallRecord) -> CallRecord:
    """The check's view of what `McpUser` saw of one call."""
    result = record.result
    outcome: dict[str, Any] = {}
    if result is not None:
        outcome = {"structured": result.structured, "text": result.text, "is_error": result.is_error}
    elif record.error_code is not None:
        outcome = {"error": record.error_message or record.error}
    else:
        outcome = {"lost": record.error or "no answer"}
    return CallRecord(
        tool=record.tool,
        arguments=dict(record.arguments),
        rounds=sum(1 for name in record.rounds if name in ROUNDS),
        hand_backs=record.rounds.count("round:hand_back"),
        questions=dict(Counter(record.questions)),
        instances=list(record.instances),
        versions=list(record.versions),
        finished_by=record.last_version,
        **outcome,
    )


class Load:
    """`users` Locust users calling `host` + `mcp_path` until `stop`; `join` returns the records."""

    def __init__(self, host: str, mcp_path: str, scenario: Scenario, *, users: int, work_dir: Path) -> None:
        self._argv = [sys.executable, "-m", "mrtr_fleet_check.load_process"]
        self._host, self._mcp_path, self._scenario, self._users = host, mcp_path, scenario, users
        work_dir.mkdir(parents=True, exist_ok=True)
        self._plan, self._records, self._log = (work_dir / name for name in ("load.json", "records.jsonl", "load.log"))
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()

    def start(self) -> Load:
        token = self._scenario.tokens[0] if self._scenario.tokens else None
        plan = {
            "host": self._host,
            "mcp_path": self._mcp_path,
            "users": self._users,
            "token": token,
            "records": str(self._records),
            "calls": [call.mapping() for call in self._scenario.calls],
        }
        self._plan.write_text(json.dumps(plan, indent=2), encoding="utf-8")
        self._records.write_text("", encoding="utf-8")
        with self._log.open("wb") as log:
            self._process = subprocess.Popen([*self._argv, str(self._plan)], stdout=log, stderr=subprocess.STDOUT)
        return self

    def stop(self, after: float = 0.0) -> None:
        """End the load once `after` more seconds have passed: the calls in flight finish, no new one starts."""
        if after > 0:
            self._stopping.wait(after)
        self._stopping.set()
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)

    def count(self) -> int:
        """Calls finished so far (the process must still be running: one that ended early is a failure)."""
        if self._process is not None and self._process.poll() is not None and not self._stopping.is_set():
            raise LoadFailed(f"the load's process ended early (exit {self._process.returncode}):\n{self._tail()}")
        with self._records.open("rb") as records:
            return sum(1 for line in records if line.endswith(b"\n"))

    def join(self) -> list[CallRecord]:
        assert self._process is not None, "join before start"
        try:
            code = self._process.wait(timeout=STOP_TIMEOUT + 30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            raise LoadFailed(f"the load did not stop within {STOP_TIMEOUT + 30:g} s:\n{self._tail()}") from None
        if code != 0:
            raise LoadFailed(f"the load's process failed (exit {code}):\n{self._tail()}")
        lines = self._records.read_text(encoding="utf-8").splitlines()
        return [CallRecord(**json.loads(line)) for line in lines if line]

    def _tail(self, lines: int = 20) -> str:
        return "\n".join(self._log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def as_json(record: CallRecord) -> str:
    return json.dumps(asdict(record), default=str)
