"""The clients' side of a history: every operation as invoked and as completed, one JSON line each.

An operation (`f`) is a task creation (`create`), a task followed to its end
(`final`), a final read of a task after the run (`read`) or a plain MRTR call
(`mrtr`). Each is written twice, Jepsen's way: `invoke` when it is sent,
then `ok` (it happened: the value is what the client saw), `fail` (it surely
did not happen: a definite refusal) or `info` (unknown: the reply never came,
or an error that does not say whether the write landed). A creation that
ends `info` may have created a task nobody knows the id of: it counts as
indeterminate, never as lost. Times are Unix seconds (the host's clock, which
is also the local Redis's).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


@dataclass(frozen=True)
class Op:
    process: str
    """Who: a producer (`p1`), the fault driver (`driver`: its toxic tasks) or the final reader (`reader`)."""
    type: str
    """invoke, ok, fail or info."""
    f: str
    """create, final, read or mrtr."""
    key: str
    """The operation's own id (its invoke and completion share it)."""
    time: float
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    task: str | None = None
    """The task id (create: once acknowledged; final and read: the task followed or read)."""
    value: dict[str, Any] = field(default_factory=dict)
    """What came back: a status, a result's structured content and step count, an error."""
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {}, "")}


class OpLog:
    """Appends operations to a JSON-lines file, flushed line by line (a killed producer loses nothing written)."""

    def __init__(self, path: Path, process: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.process = process
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._keys = 0

    def close(self) -> None:
        self._file.close()

    def new_key(self) -> str:
        with self._lock:
            self._keys += 1
            return f"{self.process}-{self._keys}"

    def write(self, type_: str, f: str, key: str, **fields: Any) -> Op:
        op = Op(self.process, type_, f, key, time.time(), **fields)
        line = json.dumps(op.as_json(), separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
        return op


def read_ops(paths: Iterable[Path]) -> list[Op]:
    """Every operation of the given logs, by time (a line cut short by a kill is skipped)."""
    ops = [op for path in paths if path.exists() for op in _read(path)]
    return sorted(ops, key=lambda op: op.time)


def _read(path: Path) -> Iterator[Op]:
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        yield Op(
            process=doc["process"],
            type=doc["type"],
            f=doc["f"],
            key=doc["key"],
            time=float(doc["time"]),
            tool=doc.get("tool", ""),
            arguments=doc.get("arguments", {}),
            task=doc.get("task"),
            value=doc.get("value", {}),
            error=doc.get("error"),
        )
