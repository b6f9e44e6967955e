"""The plaintext layout inside `requestState`, and how it changes across worker versions.

Two layouts exist:

* format 1: `{"fmt": 1, "data": {...}, "hops": n, "visited": [[id, version], ...]}`
* format 2: `{"fmt": 2, "data": {...}, "trace": {"hops": n, "visited": [...]}}`

Version 1 reads and writes format 1 only. Version 2 reads both and writes
format 1 until the whole fleet is on version 2 and an operator switches it
(`POST /admin/state-format?write=2`): expand, then contract, so an old
instance never meets a layout it cannot read. Version 2 also stamps
`sealed_at` (a field version 1 does not know); every version carries fields
it does not know forward untouched when it re-seals. A layout no instance
reads gets a clear error asking the client to start again, never a guess.

`pace` (a computation's step rate so far and its moves off stragglers, see
`Pace`) is an optional top-level field in both formats: a state without it
reads as no pace, and a build that predates it carries it forward as an
unknown field, so it needed no expand/contract step of its own.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

READABLE_FORMATS: dict[int, frozenset[int]] = {1: frozenset({1}), 2: frozenset({1, 2})}
"""State formats each worker version can read."""

MAX_VISITED = 32
"""Visited instances kept in the trace; older entries are dropped (the hop count stays exact)."""


class UnreadableState(MCPError):
    """A state this worker cannot interpret: the client must start the call again."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            code=INVALID_PARAMS,
            message=f"requestState not understood ({detail}); start the call again without it",
            data={"reason": "unreadable_request_state", "restart": True},
        )


@dataclass(frozen=True)
class Pace:
    """The step rate a computation saw on the instances it ran on, and how often it left a straggler.

    Written by the compute engine at the end of a round; `compute.policy` compares an instance's
    own rate with it to notice it is slow without any shared store.
    """

    rate: float
    """Steps per second, exponentially weighted over the measured slices."""
    samples: int
    """Slices folded into `rate` (0: nothing measured yet)."""
    moves: int = 0
    """Straggler hand-backs so far: capped per request, and they do not age it towards priority."""
    fled: str | None = None
    """The instance it last left as a straggler: a round landing there again is handed on at once."""

    def wire(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"rate": round(self.rate, 3), "n": self.samples, "moves": self.moves}
        if self.fled is not None:
            doc["fled"] = self.fled
        return doc

    @classmethod
    def parse(cls, raw: object) -> Pace | None:
        """The field as read, or None if absent or not understood: a hint never makes a state unreadable."""
        if not isinstance(raw, dict):
            return None
        rate, samples, moves, fled = raw.get("rate"), raw.get("n"), raw.get("moves", 0), raw.get("fled")
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not math.isfinite(rate) or rate < 0:
            return None
        if type(samples) is not int or type(moves) is not int or samples < 0 or moves < 0:
            return None
        return cls(float(rate), samples, moves, fled if isinstance(fled, str) else None)


@dataclass
class Trace:
    """Rounds this request has ended so far and the instances that served them."""

    hops: int = 0
    visited: list[list[Any]] = field(default_factory=list)
    pace: Pace | None = None

    @property
    def fair_hops(self) -> int:
        """Hops that age the request towards priority: moves off a straggler were for its own good."""
        return max(0, self.hops - (self.pace.moves if self.pace is not None else 0))

    def record(self, instance_id: str, version: int) -> None:
        self.hops += 1
        self.visited.append([instance_id, version])
        del self.visited[:-MAX_VISITED]


@dataclass(frozen=True)
class Decoded:
    fmt: int
    data: dict[str, Any]
    trace: Trace
    extra: dict[str, Any]
    """Top-level fields this worker does not interpret, carried forward on re-seal."""


class StateLayout:
    """Reads the formats a worker version understands; writes the one currently chosen."""

    def __init__(self, version: int, write_format: int = 1) -> None:
        self.version = version
        self.readable = READABLE_FORMATS[version]
        self.write_format = 1
        self.set_write_format(write_format)

    def set_write_format(self, fmt: int) -> None:
        """Switch the layout written from now on (the contract step of a rollout)."""
        if type(fmt) is not int or fmt not in self.readable:  # not a list (unhashable), not True (== 1)
            raise ValueError(
                f"version {self.version} cannot write state format {fmt}; it reads {sorted(self.readable)}"
            )
        self.write_format = fmt

    def encode(self, data: Mapping[str, Any], trace: Trace, extra: Mapping[str, Any]) -> str:
        doc: dict[str, Any] = dict(extra)
        if trace.pace is not None:
            doc["pace"] = trace.pace.wire()
        if self.version >= 2:
            doc["sealed_at"] = round(time.time(), 3)
        if self.write_format == 1:
            doc.pop("trace", None)
            doc.update(fmt=1, data=dict(data), hops=trace.hops, visited=trace.visited)
        else:
            doc.pop("hops", None)
            doc.pop("visited", None)
            doc.update(fmt=2, data=dict(data), trace={"hops": trace.hops, "visited": trace.visited})
        return json.dumps(doc, separators=(",", ":"))

    def decode(self, plaintext: str | None) -> Decoded:
        if plaintext is None:
            return Decoded(self.write_format, {}, Trace(), {})
        try:
            doc = json.loads(plaintext)
            fmt = doc.pop("fmt")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise UnreadableState("malformed plaintext") from None
        if type(fmt) is not int or fmt not in self.readable:  # not a list (unhashable), not True (== 1)
            raise UnreadableState(f"state format {fmt!r}; worker version {self.version} reads {sorted(self.readable)}")
        try:
            data = doc.pop("data")
            if fmt == 1:
                hops, visited = doc.pop("hops"), doc.pop("visited")
            else:
                trace = doc.pop("trace")
                hops, visited = trace["hops"], trace["visited"]
        except (KeyError, TypeError):
            raise UnreadableState("malformed plaintext") from None
        if not isinstance(data, dict) or not isinstance(hops, int) or not isinstance(visited, list):
            raise UnreadableState("malformed plaintext")
        pace = Pace.parse(doc.pop("pace", None))
        return Decoded(fmt, data, Trace(hops=hops, visited=visited, pace=pace), doc)
