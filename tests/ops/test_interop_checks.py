"""The interop matrix judging driver records: the exact answer passes, anything else fails, refusals are exact."""

from __future__ import annotations

from typing import Any

from mrtr_ops.interop import scenario
from mrtr_ops.interop.catalog import EXT_TASKS, INSPECTOR, TS_CLIENT, Feature, Run
from mrtr_ops.interop.checks import Context, judge
from mrtr_ops.interop.verdict import Verdict
from mrtr_worker.vault.tool import ANONYMOUS

ANON = Context(Run(TS_CLIENT, False))
BEARER_FLOW = "Fl0w1dOfTheVaultPage"


def tool_record(
    structured: dict[str, Any], *, text: str = "", meta: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }
    if meta is not None:
        value["_meta"] = meta
    return {"ok": True, "value": value, "asked": [], "exchanges": [], **extra}


def asked_forms(*messages: str) -> list[dict[str, Any]]:
    return [{"method": "elicitation/create", "params": {"mode": "form", "message": m}} for m in messages]


def test_the_exact_logins_asked_once_each_pass() -> None:
    record = tool_record(scenario.linked_logins(), asked=asked_forms(*scenario.login_questions()))
    assert judge(Feature.ELICITATION, record, ANON).verdict is Verdict.PASS


def test_a_wrong_login_fails_and_says_what_differed() -> None:
    record = tool_record({"linked": {"github_login": "someone-else"}}, asked=asked_forms(*scenario.login_questions()))
    cell = judge(Feature.ELICITATION, record, ANON)
    assert cell.verdict is Verdict.FAIL
    assert "someone-else" in cell.detail


def test_a_question_asked_twice_fails() -> None:
    questions = scenario.login_questions()
    record = tool_record(scenario.linked_logins(), asked=asked_forms(*questions, questions[0]))
    assert judge(Feature.ELICITATION, record, ANON).verdict is Verdict.FAIL


def test_a_missing_record_fails() -> None:
    assert judge(Feature.SAMPLING, None, ANON).verdict is Verdict.FAIL


def test_a_client_error_fails() -> None:
    record = {"ok": False, "error": {"type": "SdkError", "message": "boom"}, "asked": [], "exchanges": []}
    cell = judge(Feature.ROOTS, record, ANON)
    assert cell.verdict is Verdict.FAIL
    assert "boom" in cell.detail


def handback_record(visited: list[str], workers: list[str | None]) -> dict[str, Any]:
    meta = {"mrtr-cluster.dev/compute": {"steps": 40, "hops": len(visited) - 1, "visited": [[v, 1] for v in visited]}}
    exchanges = [{"method": "tools/call", "worker": w, "status": 200} for w in workers]
    return tool_record({"count": scenario.primes(scenario.PRIMES_LIMIT)}, meta=meta, exchanges=exchanges)


def test_a_computation_handed_back_across_instances_passes() -> None:
    record = handback_record(["w1", "w2", "w3"], ["w1", "w2", "w3"])
    cell = judge(Feature.HANDBACK, record, ANON)
    assert cell.verdict is Verdict.PASS, cell.detail
    assert "w1 → w2 → w3" in cell.detail


def test_a_computation_that_never_left_one_instance_fails() -> None:
    record = handback_record(["w1", "w1"], ["w1", "w1"])
    assert judge(Feature.HANDBACK, record, ANON).verdict is Verdict.FAIL


def test_round_workers_that_disagree_with_the_state_fail() -> None:
    record = handback_record(["w1", "w2"], ["w1", "w3"])
    cell = judge(Feature.HANDBACK, record, ANON)
    assert cell.verdict is Verdict.FAIL
    assert "X-Worker-Id" in cell.detail


def test_a_wrong_count_fails() -> None:
    record = handback_record(["w1", "w2"], ["w1", "w2"])
    record["value"]["structuredContent"] = {"count": scenario.primes(scenario.PRIMES_LIMIT) + 1}
    assert judge(Feature.HANDBACK, record, ANON).verdict is Verdict.FAIL


def vault_record(text: str, structured: dict[str, Any] | None, *, error: bool, asked: list[Any]) -> dict[str, Any]:
    value: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if structured is not None:
        value["structuredContent"] = structured
    return {"ok": True, "value": value, "asked": asked, "exchanges": []}


def test_the_anonymous_vault_refusal_is_refused_by_design() -> None:
    record = vault_record(ANONYMOUS, None, error=True, asked=[])
    assert judge(Feature.URL_ELICITATION, record, ANON).verdict is Verdict.REFUSED


def test_another_anonymous_vault_error_fails() -> None:
    record = vault_record("connect_vault is unavailable", None, error=True, asked=[])
    assert judge(Feature.URL_ELICITATION, record, ANON).verdict is Verdict.FAIL


def bearer_vault(completed: dict[str, str]) -> tuple[dict[str, Any], Context]:
    url = f"http://127.0.0.1:9/vault/connect?flow={BEARER_FLOW}"
    asked = [{"method": "elicitation/create", "params": {"mode": "url", "message": "Open it", "url": url}}]
    structured = {
        "flow": BEARER_FLOW,
        "connected": True,
        "keyRef": scenario.vault_key_ref(),
        "completedBy": scenario.VAULT_SUBJECT,
    }
    return vault_record("Vault connected", structured, error=False, asked=asked), Context(
        Run(TS_CLIENT, True), completed_flows=completed
    )


def test_a_vault_connected_after_the_page_was_completed_passes() -> None:
    record, context = bearer_vault({BEARER_FLOW: scenario.VAULT_SUBJECT})
    assert judge(Feature.URL_ELICITATION, record, context).verdict is Verdict.PASS


def test_a_vault_connected_without_the_page_being_completed_fails() -> None:
    record, context = bearer_vault({})
    assert judge(Feature.URL_ELICITATION, record, context).verdict is Verdict.FAIL


def task_record(**value: Any) -> dict[str, Any]:
    return {"ok": True, "value": {"kind": "task", "taskId": "t1", **value}, "asked": [], "exchanges": []}


def test_the_question_inside_a_task_answered_by_update_passes() -> None:
    question, result = scenario.estimate_pi()
    record = task_record(status="completed", result={"resultType": "complete", "structuredContent": result})
    record["asked"] = [
        {"kind": "elicitation", "params": {"message": question}, "scope": "task", "delivery": "task-update"}
    ]
    record["exchanges"] = [{"method": "tools/call"}, {"method": "tasks/update"}]
    assert judge(Feature.TASK_INPUT, record, Context(Run(EXT_TASKS, False))).verdict is Verdict.PASS


def test_the_refined_estimate_is_the_doubled_run() -> None:
    _, result = scenario.estimate_pi()
    assert result["samples"] == 2 * scenario.PI_ARGUMENTS["samples"]


def test_a_push_without_the_acknowledged_task_fails() -> None:
    count = {"structuredContent": {"count": scenario.primes(scenario.PUSH_PRIMES_LIMIT)}}
    record = task_record(
        status="completed", result=count, acknowledged=[{}], pushes=[{"status": "completed", "result": count}]
    )
    assert judge(Feature.TASK_PUSH, record, Context(Run(EXT_TASKS, False))).verdict is Verdict.FAIL


def test_a_push_with_the_acknowledged_task_and_the_result_passes() -> None:
    count = {"structuredContent": {"count": scenario.primes(scenario.PUSH_PRIMES_LIMIT)}}
    pushes = [{"status": "working", "result": None}, {"status": "completed", "result": count}]
    record = task_record(
        status="completed", result=count, acknowledged=[{"taskIds": ["t1"]}], pushes=pushes, streamEnded=True
    )
    assert judge(Feature.TASK_PUSH, record, Context(Run(EXT_TASKS, False))).verdict is Verdict.PASS
    record["value"]["streamEnded"] = False
    assert judge(Feature.TASK_PUSH, record, Context(Run(EXT_TASKS, False))).verdict is Verdict.FAIL


def test_a_cancel_the_server_did_not_record_fails() -> None:
    record = task_record(status="cancelled", serverStatus="working")
    record["exchanges"] = [{"method": "tasks/cancel"}]
    assert judge(Feature.TASK_CANCEL, record, Context(Run(EXT_TASKS, False))).verdict is Verdict.FAIL


def test_the_inspectors_legacy_default_is_refused_by_design_only_with_the_exact_refusal() -> None:
    context = Context(Run(INSPECTOR, False))
    refusal = (
        'Error POSTing to endpoint: {"error": {"code": -32020, "message": "MCP-Protocol-Version header required"}}'
    )
    refused = {"ok": False, "error": {"type": "cli", "message": refusal}}
    assert judge(Feature.LEGACY_DEFAULT, refused, context).verdict is Verdict.REFUSED
    served = {"ok": True, "value": {"tools": []}}
    assert judge(Feature.LEGACY_DEFAULT, served, context).verdict is Verdict.FAIL
    other = {"ok": False, "error": {"type": "cli", "message": "connection refused"}}
    assert judge(Feature.LEGACY_DEFAULT, other, context).verdict is Verdict.FAIL


def test_the_inspectors_tool_list_must_match_the_servers() -> None:
    context = Context(Run(INSPECTOR, False), tool_names=frozenset({"echo", "count_primes"}))
    tools: list[dict[str, str]] = [{"name": "echo"}]
    record = {"ok": True, "value": {"tools": tools}}
    assert judge(Feature.TOOLS_LIST, record, context).verdict is Verdict.FAIL
    tools.append({"name": "count_primes"})
    assert judge(Feature.TOOLS_LIST, record, context).verdict is Verdict.PASS
