"""The sealed requestState: any instance of the fleet opens it, nothing else gets through.

Forgeries below are made the way an attacker who holds a valid token would
(tampering, truncating, replaying it elsewhere) and, for the envelope claims,
the way only a key holder could (re-sealing with a changed claim), which is
what proves each claim is checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server.request_state import AESGCMRequestStateCodec

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.metrics_page import MetricsPage
from mrtr_protocol.instance import WORKER_ID_HEADER
from mrtr_worker.sealing.keyring import KeyRing, new_ring
from tests.conftest import McpTo, StartWorker
from tests.support.wire import McpHttp

ELICIT: dict[str, Any] = {"elicitation": {}}
LINK = {"name": "link_accounts", "arguments": {}}
GITHUB = {"github_login": {"action": "accept", "content": {"name": "octocat"}}}
GOOGLE = {"google_login": {"action": "accept", "content": {"name": "octo"}}}


@pytest.fixture(scope="module")
def pair(worker: WorkerSpec, start_worker: StartWorker) -> tuple[WorkerSpec, WorkerSpec]:
    """Two instances sharing the fleet's ring and audience (the session's default worker is one of them)."""
    return worker, start_worker()[0]


def _link_round(mcp: McpHttp, state: str | None = None, answers: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = dict(LINK)
    if state is not None:
        params["requestState"] = state
    if answers is not None:
        params["inputResponses"] = answers
    return mcp.call("tools/call", params, capabilities=ELICIT).message


def test_a_state_sealed_on_one_instance_completes_on_another(
    pair: tuple[WorkerSpec, WorkerSpec], mcp_to: McpTo
) -> None:
    a, b = (mcp_to(spec) for spec in pair)
    first = a.call("tools/call", LINK, capabilities=ELICIT)
    assert first.headers[WORKER_ID_HEADER] == pair[0].instance_id
    state = first.result["requestState"]

    second = b.call("tools/call", {**LINK, "requestState": state, "inputResponses": GITHUB}, capabilities=ELICIT)
    assert second.headers[WORKER_ID_HEADER] == pair[1].instance_id
    assert list(second.result["inputRequests"]) == ["google_login"]  # github travelled in the state

    third = a.call(
        "tools/call",
        {**LINK, "requestState": second.result["requestState"], "inputResponses": GOOGLE},
        capabilities=ELICIT,
    )
    assert third.result["structuredContent"] == {"linked": {"github_login": "octocat", "google_login": "octo"}}


# --- rejections -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(start_worker: StartWorker) -> WorkerSpec:
    """A worker that sees only the bad states of this module, so its rejection metrics are exact."""
    return start_worker()[0]


@pytest.fixture
def mcp(guarded: WorkerSpec) -> Iterator[McpHttp]:
    client = McpHttp(f"{guarded.url}/mcp")
    yield client
    client.close()


def _fresh_state(mcp: McpHttp) -> str:
    state: str = _link_round(mcp)["result"]["requestState"]
    return state


def _assert_rejected(message: dict[str, Any]) -> None:
    assert "result" not in message, "a bad state must never yield a result"
    assert message["error"]["code"] == -32602
    assert message["error"]["message"] == "Invalid or expired requestState"


def _present(mcp: McpHttp, state: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None) -> int:
    ex = mcp.call("tools/call", {**(params or LINK), "requestState": state}, capabilities=caps or ELICIT)
    _assert_rejected(ex.message)
    return ex.status


def _flip(state: str, at: int) -> str:
    chars = list(state)
    chars[at] = "A" if chars[at] != "A" else "B"
    return "".join(chars)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda s: _flip(s, len(s) // 2), id="bit-flip-in-ciphertext"),
        pytest.param(lambda s: _flip(s, 4), id="flip-in-key-id"),
        pytest.param(lambda s: s + "-TAMPERED", id="suffix"),
        pytest.param(lambda s: s[: len(s) - 10], id="truncated"),
        pytest.param(lambda s: s[:3], id="prefix-only"),
        pytest.param(lambda s: "v2" + s[2:], id="other-format-prefix"),
        pytest.param(lambda s: "not a token at all", id="garbage"),
    ],
)
def test_a_tampered_state_is_rejected_with_400(mcp: McpHttp, mutate: Callable[[str], str]) -> None:
    assert _present(mcp, mutate(_fresh_state(mcp))) == 400


def _reseal(state: str, ring: KeyRing, change: Callable[[dict[str, Any]], None]) -> str:
    codec = AESGCMRequestStateCodec(ring.sealing_order())
    claims = json.loads(codec.unseal(state))
    change(claims)
    return codec.seal(json.dumps(claims).encode())


def test_an_expired_state_is_rejected(mcp: McpHttp, keyring: KeyRing) -> None:
    def expire(claims: dict[str, Any]) -> None:
        claims["iat"], claims["exp"] = claims["iat"] - 3600, claims["iat"] - 1

    assert _present(mcp, _reseal(_fresh_state(mcp), keyring, expire)) == 400


def test_a_state_bound_to_a_principal_is_rejected_for_anyone_else(mcp: McpHttp, keyring: KeyRing) -> None:
    def bind_to_someone(claims: dict[str, Any]) -> None:
        claims["p"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

    _present(mcp, _reseal(_fresh_state(mcp), keyring, bind_to_someone))


def test_a_state_for_another_tool_is_rejected(mcp: McpHttp) -> None:
    haiku = {"name": "write_haiku", "arguments": {"topic": "rain"}}
    _present(mcp, _fresh_state(mcp), haiku, {"sampling": {}, **ELICIT})


def test_a_state_for_other_arguments_is_rejected(mcp: McpHttp) -> None:
    caps: dict[str, Any] = {"sampling": {}}
    first = mcp.call("tools/call", {"name": "write_haiku", "arguments": {"topic": "rain"}}, capabilities=caps)
    state = first.result["requestState"]
    _present(mcp, state, {"name": "write_haiku", "arguments": {"topic": "snow"}}, caps)


def test_a_state_from_another_service_sharing_the_keys_is_rejected(
    mcp: McpHttp, start_worker: StartWorker, mcp_to: McpTo
) -> None:
    other_service, _ = start_worker(env={"MRTR_WORKER_AUDIENCE": "another-service"})
    foreign = _fresh_state(mcp_to(other_service))
    _present(mcp, foreign)


def test_a_state_sealed_under_a_foreign_key_is_rejected(
    mcp: McpHttp, start_worker: StartWorker, mcp_to: McpTo, tmp_path: Path
) -> None:
    foreign_ring = tmp_path / "foreign.json"
    foreign_ring.write_text(new_ring("elsewhere").dumps())
    other_fleet, _ = start_worker(keyring_path=foreign_ring)
    _present(mcp, _fresh_state(mcp_to(other_fleet)))


def test_an_oversized_state_is_rejected_before_decoding(mcp: McpHttp) -> None:
    """Refused by its length with the limit in `data`, like the other limits (counted as `oversized` below)."""
    ex = mcp.call("tools/call", {**LINK, "requestState": "v1." + "A" * 70_000}, capabilities=ELICIT)
    assert ex.status == 400
    assert "result" not in ex.message
    assert ex.error["code"] == -32602
    limit = {"reason": "invalid_request_state", "limit": "requestStateBytes", "max": 64 * 1024, "got": 70_003}
    assert ex.error["data"] == limit
    assert "70003 bytes (at most 65536)" in ex.error["message"]


@pytest.mark.parametrize("fmt", [99, [1], {"v": 1}, True, "1"], ids=repr)
def test_a_state_layout_the_worker_cannot_read_asks_the_client_to_start_again(
    mcp: McpHttp, keyring: KeyRing, fmt: object
) -> None:
    """Any format the worker does not read, not only a future number (a list made it raise: found by fuzzing)."""

    def future_layout(claims: dict[str, Any]) -> None:
        inner = json.loads(claims["s"])
        inner["fmt"] = fmt
        claims["s"] = json.dumps(inner)

    ex = mcp.call(
        "tools/call", {**LINK, "requestState": _reseal(_fresh_state(mcp), keyring, future_layout)}, capabilities=ELICIT
    )
    assert ex.status == 400
    assert ex.error["code"] == -32602
    assert ex.error["data"] == {"reason": "unreadable_request_state", "restart": True}
    assert "start the call again" in ex.error["message"]


def test_every_rejection_reason_is_counted_and_logged(guarded: WorkerSpec, log_dir: Path) -> None:
    """Runs after the rejections above (module order): the precise reasons reach the metric and the log."""
    metrics = MetricsPage.parse(httpx.get(f"{guarded.url}/metrics").text)
    counted = metrics.by_label("mrtr_worker_state_rejections_total", "reason")
    for reason in ("tampered", "malformed", "unknown_key", "expired", "foreign_principal", "foreign_request"):
        assert counted.get(reason, 0) >= 1, (reason, counted)
    assert counted["foreign_audience"] == 1
    assert counted["oversized"] == 1
    log = (log_dir / f"{guarded.instance_id}.log").read_text()
    assert "requestState rejected on tools/call: expired" in log
    assert "Traceback" not in log
