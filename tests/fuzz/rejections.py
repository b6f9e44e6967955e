"""What a refused `requestState` looks like on the wire, and how a case counts the refusal."""

from __future__ import annotations

from typing import Any

from tests.fuzz.calls import Call
from tests.fuzz.oracle import Verdict
from tests.fuzz.target import FuzzTarget, rejections_added

FROZEN = {"code": -32602, "message": "Invalid or expired requestState", "data": {"reason": "invalid_request_state"}}
"""The SDK's one answer to every bad state: the precise reason goes to the log and the metric only."""


def assert_rejected(verdict: Verdict, *, oversized: bool = False) -> None:
    """The frozen -32602 with HTTP 400 (for a state over the size limit, -32602 naming the limit, with the frozen
    reason): never a result, least of all a complete one."""
    if verdict.kind == "result":
        result = verdict.message["result"]
        kind = "an input_required round" if result.get("resultType") == "input_required" else "a COMPLETE result"
        raise AssertionError(f"a forged state was accepted and produced {kind}: {result}")
    assert verdict.status == 400, verdict
    error = verdict.message["error"]
    if not oversized:
        assert error == FROZEN, verdict.message
        return
    data = error["data"]
    assert (error["code"], data["reason"], data["limit"]) == (-32602, "invalid_request_state", "requestStateBytes")
    assert data["got"] > data["max"], error


def present_and_count(
    target: FuzzTarget, call: Call, params: dict[str, Any], *, headers: dict[str, str] | None = None
) -> tuple[Verdict, dict[str, float]]:
    """Send one request; its verdict and the rejections it added to the worker's metric, by reason."""
    before = target.rejections()
    verdict = target.call(call, params, headers=headers)
    return verdict, rejections_added(before, target.rejections())
