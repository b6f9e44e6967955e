"""The whole check, as a user runs it (`mrtr-fleet-check`), against our worker and against an SDK server.

Real processes all the way: the check starts the instances from their command lines, our proxy in
front, drives the load and rolls to version 2; the test reads its exit status and its JSON report.
"""

from __future__ import annotations

import json
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_worker.sealing.keyring import new_ring

pytestmark = pytest.mark.slow  # starts instances, the proxy and the load as processes

ROOT = Path(__file__).parents[2]
PYTHON_SDK = ROOT / "examples" / "servers" / "python-sdk"
PYTHON_SDK_SERVER = f"{sys.executable} -m uvicorn --app-dir {PYTHON_SDK} python_sdk_server:app --port {{port}}"
FASTMCP = ROOT / "examples" / "servers" / "fastmcp"
FASTMCP_SERVER = f"{sys.executable} -m uvicorn --app-dir {FASTMCP} fastmcp_server:app --port {{port}}"
ADOPT = ROOT / "examples" / "servers" / "adopt-python-sdk"
ADOPT_SERVER = f"{sys.executable} -m uvicorn --app-dir {ADOPT} adopt_server:app --port {{port}}"

WORKER_SCENARIO = """
name = "mrtr-worker"
tokens = [{alice!r}, {bob!r}]

[[call]]
tool = "link_accounts"    # a question a round; version 2 asks one login more

[[call]]
tool = "count_primes"     # hand-backs with no question
arguments = {{ limit = 300000 }}
"""


def run_check(
    tmp_path: Path, v1: str, scenario: Path, expect: str, v2: str | None = None
) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    argv = [
        str(Path(sys.executable).parent / "mrtr-fleet-check"),
        *("--v1", v1, *(("--v2", v2) if v2 else ()), "--instances", "2", "--scenario", str(scenario)),
        *("--duration", "5", "--users", "3"),
        *("--report", str(report), "--work-dir", str(tmp_path / "work"), "--expect", expect),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert report.exists(), done.stderr
    return done.returncode, json.loads(report.read_text()), done.stdout


def test_our_worker_passes_through_a_rolling_update(tmp_path: Path) -> None:
    ring = tmp_path / "keyring.json"
    ring.write_text(new_ring("fleet-check").dumps())
    ring.chmod(0o600)
    scenario = tmp_path / "worker.toml"
    issuer = DevIssuer.generate()
    issuer.write(tmp_path / "issuer")
    scenario.write_text(WORKER_SCENARIO.format(alice=issuer.mint("alice"), bob=issuer.mint("bob")))
    settings = (
        "MRTR_WORKER_PORT={port} MRTR_WORKER_HOST=127.0.0.1 MRTR_WORKER_INSTANCE_ID=$MCP_INSTANCE "
        f"MRTR_WORKER_VERSION=$MCP_VERSION MRTR_WORKER_KEYRING_FILE={ring} MRTR_WORKER_ALLOW_ANONYMOUS=false "
        f"MRTR_WORKER_JWT_PUBLIC_KEY_FILE={tmp_path / 'issuer' / PUBLIC_KEY_NAME} MRTR_WORKER_TOOL_PACKS=demo,compute"
    )
    v1 = f"sh -c {shlex.quote(f'{settings} exec {sys.executable} -m mrtr_worker')}"
    status, report, printed = run_check(tmp_path, v1, scenario, "pass")
    assert report["verdict"] == "pass", printed
    assert status == 0
    assert report["requests"] == report["completed"] > 0
    assert report["visited_both_versions"] > 0  # the update happened under load: calls begun on v1 ended on v2
    assert report["questions_asked_twice"] == 0
    assert report["hand_backs"] > 0
    assert report["probes"]["session_free_2026_07_28"] == "yes"
    assert report["probes"]["across_instances"].startswith("accepted")
    assert report["probes"]["after_upgrade"].startswith("accepted")
    assert report["probes"]["tampered"].startswith("refused")
    assert report["probes"]["foreign_principal"].startswith("refused")  # alice's state under bob's token
    assert "verdict: pass" in printed


def test_an_sdk_server_with_its_default_key_is_refused_across_instances(tmp_path: Path) -> None:
    status, report, printed = run_check(
        tmp_path, PYTHON_SDK_SERVER, PYTHON_SDK / "scenario.toml", "refused_across_instances"
    )
    assert status == 0, printed
    assert report["verdict"] == "refused_across_instances"
    assert report["probes"]["across_instances"] == "refused: Invalid or expired requestState"
    assert '"Invalid or expired requestState"' in report["explanation"]  # the server's own words, quoted
    assert report["failures"] > 0
    assert report["server_errors"][0]["message"] == "Invalid or expired requestState"


def _with_keys(keys: str, server: str = PYTHON_SDK_SERVER) -> str:
    return f"sh -c {shlex.quote(f'REQUEST_STATE_KEYS={keys} exec {server}')}"


def test_an_sdk_server_with_a_shared_key_ring_passes_and_version_2_adds_a_key(tmp_path: Path) -> None:
    """The SDK's documented rotation, first phase: version 2 opens with a new key too, still seals with the old."""
    old, new = secrets.token_hex(32), secrets.token_hex(32)
    status, report, printed = run_check(
        tmp_path, _with_keys(old), PYTHON_SDK / "scenario.toml", "pass", v2=_with_keys(f"{old},{new}")
    )
    assert report["verdict"] == "pass", printed
    assert status == 0
    assert report["probes"]["across_instances"].startswith("accepted")
    assert report["probes"]["after_upgrade"].startswith("accepted")
    assert report["probes"]["tampered"].startswith("refused")
    assert report["requests"] == report["completed"] > 0
    assert report["visited_both_versions"] is None  # the SDK names no version on its answers: nothing to count


def test_version_2_sealing_with_a_key_version_1_lacks_is_refused_after_the_upgrade(tmp_path: Path) -> None:
    """Skipping the rotation's first phase: version 2 seals with the new key at once, and version 1 instances still
    in rotation refuse what it sealed, so requests break mid-update (the check names it)."""
    old, new = secrets.token_hex(32), secrets.token_hex(32)
    status, report, printed = run_check(
        tmp_path, _with_keys(old), PYTHON_SDK / "scenario.toml", "refused_after_upgrade", v2=_with_keys(new)
    )
    assert report["verdict"] == "refused_after_upgrade", printed
    assert status == 0


def test_a_fastmcp_server_as_its_examples_show_is_refused_across_instances(tmp_path: Path) -> None:
    status, report, printed = run_check(tmp_path, FASTMCP_SERVER, FASTMCP / "scenario.toml", "refused_across_instances")
    assert report["verdict"] == "refused_across_instances", printed
    assert status == 0
    assert report["probes"]["across_instances"] == "refused: Invalid or expired requestState"


def test_a_fastmcp_server_given_a_shared_key_ring_passes(tmp_path: Path) -> None:
    """Two questions over two rounds, the answers checked by their text (FastMCP also wraps it as structured)."""
    keys = _with_keys(secrets.token_hex(32), FASTMCP_SERVER)
    status, report, printed = run_check(tmp_path, keys, FASTMCP / "scenario.toml", "pass")
    assert report["verdict"] == "pass", printed
    assert status == 0
    assert report["requests"] == report["completed"] > 0
    assert report["wrong_answers"] == 0
    assert report["questions_asked_twice"] == 0


def test_a_plain_sdk_server_that_hands_back_with_the_fleets_key_ring_passes(tmp_path: Path) -> None:
    """docs/adopt.md's example: computations checkpoint into requestState and hand back under load."""
    ring = tmp_path / "ring.json"
    ring.write_text(new_ring("adopt").dumps())
    v1 = f"sh -c {shlex.quote(f'MRTR_KEYRING_FILE={ring} exec {ADOPT_SERVER}')}"
    status, report, printed = run_check(tmp_path, v1, ADOPT / "scenario.toml", "pass")
    assert report["verdict"] == "pass", printed
    assert status == 0
    assert report["requests"] == report["completed"] > 0
    assert report["wrong_answers"] == 0
    assert report["hand_backs"] > 0  # the computations moved between rounds, as sealed states
    assert report["probes"]["across_instances"].startswith("accepted")
    assert report["probes"]["tampered"].startswith("refused")
