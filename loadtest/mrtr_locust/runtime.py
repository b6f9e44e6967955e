"""This process's statistics and events file: where users record what each request did."""

from __future__ import annotations

import json
import os
from typing import IO

from mrtr_locust.stats import MrtrStats, RequestRecord

EVENTS_ENV = "MRTR_LOCUST_EVENTS"
"""Path of a JSON-lines file: one line per completed or failed logical request run in this process."""

SUMMARY_ENV = "MRTR_LOCUST_SUMMARY"
"""Path of the JSON summary written at quit (local runs and the master)."""

STOP_FILE_ENV = "MRTR_LOCUST_STOP_FILE"
"""Path a driver creates to end a headless run early, the way `--run-time` ends it (the chaos run uses it)."""

STATS = MrtrStats()
"""Counts of this process's requests; on a master, the workers' reports merged."""


class EventsFile:
    """Appends one JSON line per request to `$MRTR_LOCUST_EVENTS`, if set (opened on first use)."""

    def __init__(self) -> None:
        self._file: IO[str] | None = None

    def write(self, rec: RequestRecord) -> None:
        path = os.environ.get(EVENTS_ENV)
        if not path:
            return
        if self._file is None:
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open for the whole run)
        self._file.write(json.dumps(rec.as_json(), separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


EVENTS = EventsFile()


def record(rec: RequestRecord) -> None:
    STATS.record(rec)
    EVENTS.write(rec)
