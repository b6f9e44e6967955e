"""The store's side of a history: every slice begun and every commit tried, as the workers' scripts logged them.

Workers started with `MRTR_WORKER_TASK_HISTORY_MAX` > 0 append to the
`history` stream (under their key prefix) in the same Redis script as the
act itself (`mrtr_worker.tasks.leases`): a begin (the slice's fencing token,
how many times it was delivered), a commit that landed (the step range it
wrote and the revision it made), or a commit refused (fenced, or stale). So
the record is exactly what Redis kept, failovers included: an entry exists
if and only if its act did. A stream entry's id starts with Redis's clock in
milliseconds: the time of the act.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from mrtr_worker.tasks.leases import HISTORY_KEY

_PAGE = 5_000


@dataclass(frozen=True)
class StoreEvent:
    kind: str
    """`begin`, `commit`, or `check` (a step boundary refused as fenced: a zombie stopped before its commit)."""
    task: str
    worker: str
    message: str
    """The slice (its stream message id)."""
    token: int
    at_ms: int
    """Redis's clock when it happened (the entry id's milliseconds)."""
    rev: int
    """begin: the revision the slice started from; commit: the revision it made (or would have)."""
    outcome: str = ""
    """commit: `ok`, `fenced` (another worker held the slice) or `stale` (the task moved on: a cancel)."""
    steps_from: int = 0
    steps_to: int = 0
    status: str = ""
    """commit: the status written (working, input_required, completed, failed)."""
    deliveries: int = 0
    """begin: how many times the slice was handed out (more than 1: taken over from another worker)."""

    @property
    def landed(self) -> bool:
        return self.kind == "commit" and self.outcome == "ok"


def event_from(entry_id: str, fields: dict[str, str]) -> StoreEvent:
    return StoreEvent(
        kind=fields["kind"],
        task=fields["task"],
        worker=fields["worker"],
        message=fields["msg"],
        token=int(fields["token"]),
        at_ms=int(entry_id.split("-", 1)[0]),
        rev=int(fields["rev"]),
        outcome=fields.get("outcome", ""),
        steps_from=int(fields.get("from", 0)),
        steps_to=int(fields.get("to", 0)),
        status=fields.get("status", ""),
        deliveries=int(fields.get("deliveries", 0)),
    )


def read_events(client: redis.Redis, prefix: str) -> list[StoreEvent]:
    """Every event of the stream, oldest first (read in pages)."""
    key, start, events = f"{prefix}{HISTORY_KEY}", "-", []
    while True:
        page: Any = client.xrange(key, min=start, max="+", count=_PAGE)
        for entry_id, fields in page:
            events.append(event_from(_text(entry_id), {_text(k): _text(v) for k, v in fields.items()}))
        if len(page) < _PAGE:
            return events
        start = f"({_text(page[-1][0])}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
