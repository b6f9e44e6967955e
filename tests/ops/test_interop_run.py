"""One row of the interop matrix end to end: the MCP Python SDK's client against a real local cluster.

The other rows need the npm clients and the FastMCP-tasks environment that
`scripts/interop` installs (it runs them all in `scripts/test`); this row needs
only the workspace, so the orchestration is also covered by pytest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mrtr_ops.interop.catalog import MCP_SDK, Feature
from mrtr_ops.interop.run import Options, run_matrix
from mrtr_ops.interop.runner import Toolbox
from mrtr_ops.interop.verdict import Verdict


@pytest.mark.slow
def test_the_mcp_python_sdk_row_gets_every_exact_answer(tmp_path: Path) -> None:
    tools = Toolbox(
        node=tmp_path / "no-node",
        npm_dir=tmp_path / "no-npm",
        tasks_python=tmp_path / "no-env" / "bin" / "python",
        work_dir=tmp_path / "run",
    )
    said: list[str] = []
    outcome = run_matrix(Options(tools, only=frozenset({MCP_SDK.id}), timings=False), say=said.append)

    verdicts = {feature: outcome.cells[(MCP_SDK.id, feature)].verdict for feature in MCP_SDK.features}
    expected = {feature: Verdict.PASS for feature in MCP_SDK.features}
    expected[Feature.URL_ELICITATION] = Verdict.REFUSED  # anonymous: nobody to bind the vault flow to
    assert verdicts == expected, {f.value: outcome.cells[(MCP_SDK.id, f)].detail for f in MCP_SDK.features}
    assert not outcome.failed
    assert outcome.versions["mcp"] == "2.3.0"
    assert "instances" in outcome.cells[(MCP_SDK.id, Feature.HANDBACK)].detail
    assert any("MCP Python SDK client:" in line for line in said)
