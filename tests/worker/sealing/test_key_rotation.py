"""Key rotation on a live worker: states sealed under a key stay valid until that key is retired, then die.

This is the response to a leaked key: add a new key, promote it, and retire
the leaked one; from the reload on, nothing sealed under the old key opens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_ops.local.process import WorkerSpec
from mrtr_worker.sealing.keyring import KeyRing, new_ring, new_secret
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

ELICIT: dict[str, Any] = {"elicitation": {}}
LINK = {"name": "link_accounts", "arguments": {}}
GITHUB = {"github_login": {"action": "accept", "content": {"name": "octocat"}}}


@pytest.fixture
def ring_file(tmp_path: Path) -> Path:
    path = tmp_path / "ring.json"
    path.write_text(new_ring("old").dumps())
    return path


@pytest.fixture
def rotating(start_worker: StartWorker, ring_file: Path) -> Iterator[tuple[WorkerSpec, McpHttp]]:
    spec, _ = start_worker(keyring_path=ring_file)
    mcp = McpHttp(f"{spec.url}/mcp")
    yield spec, mcp
    mcp.close()


def _reload(spec: WorkerSpec, ring_file: Path, ring: KeyRing) -> dict[str, Any]:
    ring_file.write_text(ring.dumps())
    response = httpx.post(f"{spec.url}/admin/keyring/reload")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _resume(mcp: McpHttp, state: str) -> dict[str, Any]:
    params = {**LINK, "requestState": state, "inputResponses": GITHUB}
    return mcp.call("tools/call", params, capabilities=ELICIT).message


def test_retiring_a_key_kills_every_state_sealed_under_it(
    rotating: tuple[WorkerSpec, McpHttp], ring_file: Path
) -> None:
    spec, mcp = rotating
    sealed_under_old = mcp.call("tools/call", LINK, capabilities=ELICIT).result["requestState"]
    ring = KeyRing.parse(ring_file.read_text())

    promoted = ring.with_key("new", new_secret()).promoted("new")
    assert _reload(spec, ring_file, promoted)["primary_key"] == "new"
    assert _resume(mcp, sealed_under_old)["result"]["resultType"] == "input_required"  # still opens

    sealed_under_new = mcp.call("tools/call", LINK, capabilities=ELICIT).result["requestState"]
    assert _reload(spec, ring_file, promoted.without_key("old"))["keys"] == ["new"]

    refused = _resume(mcp, sealed_under_old)
    assert "result" not in refused
    assert refused["error"]["message"] == "Invalid or expired requestState"
    assert _resume(mcp, sealed_under_new)["result"]["resultType"] == "input_required"
