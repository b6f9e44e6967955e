"""Known client gaps: recognised only by their exact symptom, and cited to the line of the installed source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.interop.catalog import EXT_TASKS, FASTMCP_TASKS, Feature, Run
from mrtr_ops.interop.checks import Context, judge
from mrtr_ops.interop.gaps import Anchor, AnchorMissing, GapBook
from mrtr_ops.interop.verdict import Citation, Verdict


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    """Installed trees in miniature: the anchored lines at known line numbers."""
    venv = tmp_path / "tasks-venv"
    (venv / "fastmcp_tasks").mkdir(parents=True)
    (venv / "fastmcp_tasks" / "client_models.py").write_text("a\nb\nclass GetTaskRequest(Base):\n")
    (venv / "fastmcp_tasks" / "client.py").write_text("x\nasync def _drive_to_terminal(\n")
    (venv / "mcp" / "client").mkdir(parents=True)
    (venv / "mcp" / "client" / "session.py").write_text(
        "\n" * 9 + "        if (key := type(request).name_param) is not None and X:\n"
    )
    npm = tmp_path / "npm"
    (npm / "@modelcontextprotocol" / "client" / "dist").mkdir(parents=True)
    (npm / "@modelcontextprotocol" / "client" / "dist" / "src-AbC.mjs").write_text(
        "one\n\tconst SubscriptionFilterSchema$1 = z.object({\n"
    )
    return {"tasks-venv": venv, "npm": npm, "venv": tmp_path / "venv"}


def refused_tasks_get(*, name: str | None = None, created: int = 200) -> dict[str, Any]:
    return {
        "ok": False,
        "error": {
            "type": "MCPError",
            "code": -32020,
            "message": "Mcp-Name header missing; it must equal params.taskId 'x'",
        },
        "asked": [],
        "exchanges": [
            {"method": "tools/call", "name": "count_primes", "status": created},
            {"method": "tasks/get", "name": name, "status": 400},
        ],
    }


def test_a_tasks_request_without_mcp_name_refused_with_32020_is_the_clients_gap(trees: dict[str, Path]) -> None:
    context = Context(Run(FASTMCP_TASKS, False), gaps=GapBook(trees))
    cell = judge(Feature.TASK_RESULT, refused_tasks_get(), context)
    assert cell.verdict is Verdict.GAP
    assert cell.citations == (
        Citation("fastmcp_tasks/client_models.py", 3),
        Citation("mcp/client/session.py", 10),
    )
    assert "-32020" in cell.detail
    assert "MUST" in cell.explanation


def test_the_same_refusal_when_the_header_was_sent_is_not_the_gap(trees: dict[str, Path]) -> None:
    context = Context(Run(FASTMCP_TASKS, False), gaps=GapBook(trees))
    assert judge(Feature.TASK_RESULT, refused_tasks_get(name="x"), context).verdict is Verdict.FAIL


def test_the_gap_needs_the_task_to_have_been_created(trees: dict[str, Path]) -> None:
    context = Context(Run(FASTMCP_TASKS, False), gaps=GapBook(trees))
    assert judge(Feature.TASK_RESULT, refused_tasks_get(created=500), context).verdict is Verdict.FAIL


def test_another_clients_identical_symptom_is_a_failure(trees: dict[str, Path]) -> None:
    context = Context(Run(EXT_TASKS, False), gaps=GapBook(trees))
    assert judge(Feature.TASK_RESULT, refused_tasks_get(), context).verdict is Verdict.FAIL


def test_what_a_client_cannot_do_at_all_is_not_asked_and_cited(trees: dict[str, Path]) -> None:
    book = GapBook(trees)
    assert book.unsupported("fastmcp-tasks") == {Feature.TASK_PUSH}
    assert book.unsupported("ext-tasks") == frozenset()
    cell = judge(Feature.TASK_PUSH, None, Context(Run(FASTMCP_TASKS, False), gaps=book))
    assert cell.verdict is Verdict.GAP
    assert cell.citations == (Citation("fastmcp_tasks/client.py", 2),)


def test_a_stale_citation_fails_the_cell(tmp_path: Path) -> None:
    context = Context(Run(FASTMCP_TASKS, False), gaps=GapBook({"tasks-venv": tmp_path}))
    cell = judge(Feature.TASK_RESULT, refused_tasks_get(), context)
    assert cell.verdict is Verdict.FAIL
    assert "stale" in cell.detail


def test_cite_finds_the_line_through_a_glob(trees: dict[str, Path]) -> None:
    anchor = Anchor("npm", "@modelcontextprotocol/client/dist/src-*.mjs", "const SubscriptionFilterSchema$1 = ")
    assert GapBook(trees).cite(anchor) == Citation("@modelcontextprotocol/client/dist/src-AbC.mjs", 2)
    with pytest.raises(AnchorMissing):
        GapBook(trees).cite(Anchor("npm", "nothing/*.mjs", "x"))


def test_a_quirk_adds_a_cited_note_to_a_passing_cell(trees: dict[str, Path]) -> None:
    count = {"structuredContent": {"count": 3_001_134}}
    record = {
        "ok": True,
        "asked": [],
        "exchanges": [],
        "value": {
            "kind": "task",
            "taskId": "t1",
            "status": "completed",
            "result": count,
            "honoredFilter": {},
            "acknowledged": [{"taskIds": ["t1"]}],
            "pushes": [{"status": "completed", "result": count}],
            "streamEnded": True,
        },
    }
    cell = judge(Feature.TASK_PUSH, record, Context(Run(EXT_TASKS, False), gaps=GapBook(trees)))
    assert cell.verdict is Verdict.PASS
    assert cell.notes
    assert "taskIds" in cell.notes[0]
    assert cell.citations == (Citation("@modelcontextprotocol/client/dist/src-AbC.mjs", 2),)
