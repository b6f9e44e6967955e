"""The fleet check's verdicts on a TypeScript SDK server (`examples/servers/typescript-sdk`), with and without a codec.

Real processes: the pinned Node runs the example with the SDK's npm packages (`scripts/example-servers-setup`,
which `scripts/test` runs first and this module runs again: it is idempotent and prints the node binary).
"""

from __future__ import annotations

import secrets
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.fleetcheck.test_fleet_check_e2e import ROOT, run_check

pytestmark = pytest.mark.slow  # starts Node instances, the proxy and the load as processes

TYPESCRIPT_SDK = ROOT / "examples" / "servers" / "typescript-sdk"


@pytest.fixture(scope="module")
def server() -> str:
    """The example's command line, `{port}` in it, on the pinned Node."""
    node = subprocess.run(
        [str(ROOT / "scripts" / "example-servers-setup")], capture_output=True, text=True, check=True, timeout=300
    ).stdout.strip()
    return f"{node} {TYPESCRIPT_SDK / 'server.mjs'} --port {{port}}"


def _with_keys(keys: str, server: str) -> str:
    return f"sh -c {shlex.quote(f'REQUEST_STATE_KEYS={keys} exec {server}')}"


def test_without_its_codec_a_tampered_state_is_accepted(server: str, tmp_path: Path) -> None:
    status, report, printed = run_check(tmp_path, server, TYPESCRIPT_SDK / "scenario.toml", "tampered_accepted")
    assert report["verdict"] == "tampered_accepted", printed
    assert status == 0
    assert report["probes"]["tampered"].startswith("accepted")
    assert report["probes"]["across_instances"].startswith("accepted")  # nothing sealed, so nothing refused
    assert report["requests"] == report["completed"] > 0


def test_with_its_codec_and_a_shared_key_ring_it_passes_and_version_2_adds_a_key(server: str, tmp_path: Path) -> None:
    old, new = secrets.token_hex(32), secrets.token_hex(32)
    status, report, printed = run_check(
        tmp_path,
        _with_keys(old, server),
        TYPESCRIPT_SDK / "scenario.toml",
        "pass",
        v2=_with_keys(f"{old},{new}", server),
    )
    assert report["verdict"] == "pass", printed
    assert status == 0
    assert report["probes"]["tampered"] == "refused: Invalid or expired requestState"
    assert report["probes"]["after_upgrade"].startswith("accepted")
    assert report["requests"] == report["completed"] > 0
