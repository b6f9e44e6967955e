"""The interop report: the matrix, the gaps once each with their sources, the timings, and the README table."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mrtr_ops.interop.catalog import FASTMCP_TASKS, TS_CLIENT, Feature, Run, runs
from mrtr_ops.interop.gaps import GAPS
from mrtr_ops.interop.report import README_END, README_START, Outcome, document, readme_table, update_readme
from mrtr_ops.interop.timing import OUR_RULE, TS_RULE, Timing
from mrtr_ops.interop.verdict import Cell, Citation, Verdict

TS = Run(TS_CLIENT, False)
TS_BEARER = Run(TS_CLIENT, True)
FM_TASKS = Run(FASTMCP_TASKS, False)
WHEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GAP_REASON = GAPS[0].reason


def outcome(ts_handback: Verdict = Verdict.PASS) -> Outcome:
    cells = {(TS.id, f): Cell(Verdict.PASS, "fine") for f in TS_CLIENT.features}
    cells[(TS.id, Feature.HANDBACK)] = Cell(ts_handback, "what happened")
    cells[(TS.id, Feature.URL_ELICITATION)] = Cell(Verdict.REFUSED, "anonymous")
    cells.update({(TS_BEARER.id, f): Cell(Verdict.PASS, "fine") for f in TS_CLIENT.features})
    citation = (Citation("fastmcp_tasks/client_models.py", 108),)
    cells.update(
        {
            (FM_TASKS.id, f): Cell(Verdict.GAP, "omits it", citation, explanation=GAP_REASON)
            for f in FASTMCP_TASKS.features
        }
    )
    timings = (
        Timing("TypeScript SDK client", 5, 2800.0, 1010.0, TS_RULE, Citation("x.mjs", 5154)),
        Timing("mrtr_client (ours)", 5, 1700.0, 2.0, OUR_RULE),
    )
    versions = {"@modelcontextprotocol/client": "2.4.0", "fastmcp-tasks": "4.1.4", "fastmcp": "4.1.6"}
    return Outcome((TS, TS_BEARER, FM_TASKS), cells, versions, timings, 300, WHEN)


def test_a_clean_run_says_so_and_shows_every_cell() -> None:
    text = document(outcome())
    assert "no failure on the server side" in text
    assert "| hand-backs across instances (`count_primes`) | pass | pass | · |" in text
    assert "| URL-mode elicitation (`connect_vault`) | refused | pass | · |" in text
    assert "`@modelcontextprotocol/client` 2.4.0" in text


def test_a_failure_is_bold_in_the_matrix_and_in_the_verdict() -> None:
    bad = outcome(Verdict.FAIL)
    assert bad.failed
    text = document(bad)
    assert "FAILED on the server side" in text
    assert "| **FAIL** |" in text


def test_a_gap_is_explained_once_with_its_source_line() -> None:
    text = document(outcome())
    gaps_section = text.split("## Client gaps", 1)[1].split("## Hand-backs", 1)[0]
    assert gaps_section.count(GAP_REASON.rstrip(".")) == 1
    assert "`fastmcp_tasks/client_models.py:108`" in gaps_section


def test_the_timings_set_each_clients_pause_beside_ours() -> None:
    text = document(outcome()).split("## Hand-backs", 1)[1]
    assert "| TypeScript SDK client | 5 | 4 | 2.80 s | 1010 ms | 252 ms |" in text
    assert "`x.mjs:5154`" in text
    assert "1000 ms |" in text  # what the rule alone costs over 4 hand-backs
    assert "Ours idled 2 ms" in text


def test_the_readme_table_summarises_each_row() -> None:
    table = readme_table(outcome())
    assert "| TypeScript SDK client | `@modelcontextprotocol/client` 2.4.0 | 6/7 pass, 1 refused by design, " in table
    assert "with a bearer token: 7/7 pass |" in table
    assert "0/5 pass, 5 client gap; gap: omits `Mcp-Name`" in table


def test_update_readme_replaces_only_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{README_START}\nold table\n{README_END}\nafter\n")
    assert update_readme(readme, "new table")
    assert readme.read_text() == f"before\n{README_START}\nnew table\n{README_END}\nafter\n"
    unmarked = tmp_path / "OTHER.md"
    unmarked.write_text("nothing here\n")
    assert not update_readme(unmarked, "new table")
    assert unmarked.read_text() == "nothing here\n"


def test_the_project_readme_has_the_markers() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert text.index(README_START) < text.index(README_END)


def test_each_bearer_run_follows_its_anonymous_one() -> None:
    ids = [run.id for run in runs()]
    assert ids.index("ts-client+bearer") == ids.index("ts-client") + 1
    assert ids.index("ext-tasks+bearer") == ids.index("ext-tasks") + 1
    assert len(ids) == len(set(ids))
