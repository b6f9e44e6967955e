"""`mrtr-call` against a real worker: answers come from --answer, each hop is shown."""

from __future__ import annotations

import json
import subprocess
import sys

from mrtr_ops.local.process import WorkerSpec


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr_client.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_links_accounts_from_preset_answers_and_shows_each_hop(worker: WorkerSpec) -> None:
    done = _cli(
        "--url",
        f"{worker.url}/mcp",
        "--answer",
        "github_login.name=octocat",
        "--answer",
        "google_login.name=octo",
        "link_accounts",
    )
    assert done.returncode == 0, done.stderr
    hop_lines = [line for line in done.stdout.splitlines() if line.startswith("hop ")]
    assert len(hop_lines) == 3
    assert worker.instance_id in hop_lines[0]
    assert "input" in hop_lines[0]
    assert "input" in hop_lines[1]
    assert "complete" in hop_lines[2]
    structured = json.loads(done.stdout[done.stdout.index("{") :])
    assert structured == {"linked": {"github_login": "octocat", "google_login": "octo"}}


def test_the_cli_reports_a_tool_error_with_exit_1(worker: WorkerSpec) -> None:
    done = _cli("--url", f"{worker.url}/mcp", "--yes", "no_such_tool")
    assert done.returncode == 1
    assert "Unknown tool" in done.stdout


def test_the_cli_reports_an_unreachable_server_clearly(worker: WorkerSpec) -> None:
    done = _cli("--url", "http://127.0.0.1:9/mcp", "--yes", "link_accounts")
    assert done.returncode == 1
    assert done.stderr.startswith("mrtr-call: gave up after")
