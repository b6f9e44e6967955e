"""The clients' own gaps, each recognised by its exact symptom and cited to the line of the installed source.

The server stays strict: a client that breaks a MUST gets the server's clear
error, and the matrix records the client's gap instead of failing the run, but
only when the record shows exactly that gap's symptom (anything else is judged
normally). Citations are resolved at run time by finding an anchor text in the
installed, pinned package, so the line number is the one of the version that
ran; an anchor that cannot be found fails the run (the entry needs updating).
Quirks are the same for things that do not stop the feature (they become notes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mrtr_ops.interop.catalog import Feature
from mrtr_ops.interop.verdict import Cell, Citation, Verdict

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Anchor:
    """A line of an installed package, found by its text: `root` names the tree, `path` a glob under it."""

    root: str
    path: str
    text: str


@dataclass(frozen=True)
class KnownGap:
    row: str
    features: tuple[Feature, ...]
    summary: str
    """One line, for the README's table."""
    reason: str
    anchors: tuple[Anchor, ...]
    shows: Callable[[Record | None], bool]
    """Whether a record shows exactly this gap's symptom."""
    unsupported: bool = False
    """The client has no way to do it at all: the driver is not asked, and the cell says so."""


@dataclass(frozen=True)
class Quirk:
    """A client behaviour worth a note beside a passing cell."""

    row: str
    feature: Feature
    note: str
    anchors: tuple[Anchor, ...]
    shows: Callable[[Record], bool]


ROOTS = ("npm", "venv", "tasks-venv")
"""The trees anchors live in: the npm install, the workspace's site-packages, the FastMCP-tasks environment's."""


def _error(record: Record | None) -> Mapping[str, Any]:
    if record is None or record.get("ok"):
        return {}
    error: Mapping[str, Any] = record.get("error") or {}
    return error


def _refused_for_missing_mcp_name(record: Record | None) -> bool:
    """The server's -32020 for a `tasks/*` request sent without `Mcp-Name` (and the request really lacked it)."""
    error = _error(record)
    if error.get("code") != -32020 or "Mcp-Name header missing" not in str(error.get("message")):
        return False
    assert record is not None
    exchanges = record.get("exchanges", [])
    created = [x for x in exchanges if x.get("method") == "tools/call" and x.get("status") == 200]
    tasks_requests = [x for x in exchanges if str(x.get("method", "")).startswith("tasks/")]
    return (
        bool(created and tasks_requests)
        and tasks_requests[-1].get("name") is None
        and tasks_requests[-1].get("status") == 400
    )


_FASTMCP_TASKS_NAME_HEADER = (
    "its `tasks/get`, `tasks/update` and `tasks/cancel` request classes declare no `name_param`, so the SDK's "
    "`send_request` adds no `Mcp-Name` header; the tasks extension says a client MUST send `Mcp-Name` equal to "
    "`taskId` on `tasks/*`. The server keeps the rule and answers HTTP 400 with -32020 (`Mcp-Name header missing; "
    "it must equal params.taskId …`); the call that created the task succeeded, so nothing is lost but the client's "
    "view of it"
)

GAPS: tuple[KnownGap, ...] = (
    KnownGap(
        row="fastmcp-tasks",
        features=(Feature.TASK_RESULT, Feature.TASK_INPUT, Feature.TASK_CANCEL, Feature.PRIME_REPORT),
        summary="omits `Mcp-Name` on `tasks/*` (a MUST), so the server answers -32020",
        reason=_FASTMCP_TASKS_NAME_HEADER,
        anchors=(
            Anchor("tasks-venv", "fastmcp_tasks/client_models.py", "class GetTaskRequest("),
            Anchor("tasks-venv", "mcp/client/session.py", "if (key := type(request).name_param) is not None"),
        ),
        shows=_refused_for_missing_mcp_name,
    ),
    KnownGap(
        row="fastmcp-tasks",
        features=(Feature.TASK_PUSH,),
        summary="no push: its tasks client only polls `tasks/get`",
        reason="its tasks client has no `subscriptions/listen`: it drives a task by polling `tasks/get`",
        anchors=(Anchor("tasks-venv", "fastmcp_tasks/client.py", "async def _drive_to_terminal("),),
        shows=lambda record: record is None,
        unsupported=True,
    ),
)

QUIRKS: tuple[Quirk, ...] = (
    Quirk(
        row="ext-tasks",
        feature=Feature.TASK_PUSH,
        note=(
            "the SDK's `listen()` reports `honoredFilter` `{}`: its subscription-filter schema knows only the core "
            "keys and drops the extension's `taskIds`, which the server's acknowledgement listed (checked on the wire)"
        ),
        anchors=(Anchor("npm", "@modelcontextprotocol/client/dist/src-*.mjs", "const SubscriptionFilterSchema$1 = "),),
        shows=lambda record: (
            bool(record.get("ok"))
            and record["value"].get("honoredFilter") == {}
            and bool(record["value"].get("acknowledged"))
        ),
    ),
)


_TASK_ID_QUOTED = re.compile(r"'[A-Za-z0-9_-]{16,}'")
"""A task id quoted in an error message (left out of the report: it differs every run)."""


def _seen(record: Record | None) -> str:
    """The symptom as the client reported it."""
    error = _error(record)
    if not error:
        return ""
    message = _TASK_ID_QUOTED.sub("'…'", str(error.get("message")))
    return f"; it reported `{message}`"


class AnchorMissing(Exception):
    """A cited text is not in the installed package: the pin moved, and the entry needs updating."""


class GapBook:
    """The known gaps and quirks, citing lines in the installed trees named by `roots`."""

    def __init__(
        self, roots: Mapping[str, Path], gaps: Sequence[KnownGap] = GAPS, quirks: Sequence[Quirk] = QUIRKS
    ) -> None:
        self.roots = dict(roots)
        self.gaps = tuple(gaps)
        self.quirks = tuple(quirks)

    def unsupported(self, row: str) -> frozenset[Feature]:
        """Features a row's client cannot do at all (its driver is not asked to)."""
        return frozenset(f for gap in self.gaps if gap.row == row and gap.unsupported for f in gap.features)

    def match(self, row: str, feature: Feature, record: Record | None) -> Cell | None:
        """The gap cell when the record shows a known gap of this client here, else None."""
        for gap in self.gaps:
            if gap.row == row and feature in gap.features and gap.shows(record):
                try:
                    citations = tuple(self.cite(anchor) for anchor in gap.anchors)
                except AnchorMissing as missing:
                    return Cell(Verdict.FAIL, f"known gap seen, but its citation is stale: {missing}")
                return Cell(Verdict.GAP, gap.summary + _seen(record), citations, explanation=gap.reason)
        return None

    def annotate(self, row: str, feature: Feature, record: Record | None, cell: Cell) -> Cell:
        """A passing cell with the notes of the quirks its record shows."""
        if record is None or cell.verdict is not Verdict.PASS:
            return cell
        for quirk in self.quirks:
            if quirk.row == row and quirk.feature == feature and quirk.shows(record):
                try:
                    citations = tuple(self.cite(anchor) for anchor in quirk.anchors)
                except AnchorMissing as missing:
                    return Cell(Verdict.FAIL, f"known quirk seen, but its citation is stale: {missing}")
                cell = replace(cell, notes=(*cell.notes, quirk.note), citations=(*cell.citations, *citations))
        return cell

    def cite(self, anchor: Anchor) -> Citation:
        """The first line containing the anchor's text, in the first file its glob finds under its root."""
        root = self.roots.get(anchor.root)
        if root is None:
            raise AnchorMissing(f"no {anchor.root} tree to look in for {anchor.path}")
        for path in sorted(root.glob(anchor.path)):
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if anchor.text in line:
                    return Citation(str(path.relative_to(root)), number)
        raise AnchorMissing(f"{anchor.text!r} is not in {anchor.root}:{anchor.path}")


def summaries(row: str) -> list[str]:
    """The README lines for a row's gaps."""
    return [gap.summary for gap in GAPS if gap.row == row]
