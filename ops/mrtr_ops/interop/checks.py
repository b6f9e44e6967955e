"""Judge one driver record: the exact answer due, or the exact refusal, or a known gap of the client.

A record is what a driver printed for one feature: `ok` with the client's
result (`value`, in wire shape) or its `error`, the questions it was `asked`,
and its HTTP `exchanges` (method, Mcp-Name, the worker that answered). Every
check compares with `scenario`'s expected values; anything else is a failure
on the server's side unless `gaps` recognises the client's own shortcoming.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrtr_ops.interop import scenario
from mrtr_ops.interop.catalog import Feature, Run
from mrtr_ops.interop.gaps import GapBook
from mrtr_ops.interop.verdict import Cell, Mismatch, expect, expect_equal, failed, passed, refused
from mrtr_ops.vault_page import flow_of
from mrtr_protocol.tasks import COMPUTE_META_KEY
from mrtr_worker.vault.tool import ANONYMOUS

Record = Mapping[str, Any]


@dataclass
class Context:
    """What the checks need beyond the record: the run, the server's tool list, the flows the page completed."""

    run: Run
    tool_names: frozenset[str] = frozenset()
    completed_flows: Mapping[str, str] = field(default_factory=dict)
    """Vault flows the page was completed for (flow id to the subject signed in)."""
    gaps: GapBook | None = None


def judge(feature: Feature, record: Record | None, context: Context) -> Cell:
    """The cell for one feature of one run."""
    gap = context.gaps.match(context.run.row.id, feature, record) if context.gaps is not None else None
    if gap is not None:
        return gap
    if record is None:
        return failed("the driver printed no record for this feature (see the driver's log)")
    try:
        cell = _CHECKS[feature](record, context)
    except Mismatch as wrong:
        return failed(str(wrong))
    except (KeyError, IndexError, TypeError) as missing:
        return failed(f"the answer lacks what was expected ({type(missing).__name__}: {missing}); {_brief(record)}")
    return context.gaps.annotate(context.run.row.id, feature, record, cell) if context.gaps is not None else cell


def _brief(record: Record) -> str:
    shown = record.get("value") if record.get("ok") else record.get("error")
    text = repr(shown)
    return text if len(text) <= 300 else text[:300] + "…"


def _value(record: Record) -> Any:
    """The client's result, or a mismatch naming its error."""
    expect(bool(record.get("ok")), f"the client raised {record.get('error')}")
    return record["value"]


def _tool_result(record: Record) -> Mapping[str, Any]:
    value = _value(record)
    expect(value.get("isError") is not True, f"the tool answered an error: {value.get('content')}")
    return value  # type: ignore[no-any-return]


def _text(result: Mapping[str, Any]) -> str:
    return str(result["content"][0]["text"])


_KINDS = {"elicitation": "elicitation/create", "sampling": "sampling/createMessage", "roots": "roots/list"}
"""ext-tasks names an input request by kind; the other drivers by its method."""


def _asked(record: Record, method: str = "elicitation/create") -> list[Mapping[str, Any]]:
    """The input requests of one method the client was asked during the feature, in order."""
    return [e for e in record.get("asked", []) if e.get("method", _KINDS.get(str(e.get("kind")))) == method]


def _messages(asked: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(entry["params"]["message"]) for entry in asked]


def _calls(record: Record, method: str = "tools/call") -> list[Mapping[str, Any]]:
    return [x for x in record.get("exchanges", []) if x.get("method") == method]


# --- the MRTR paths ----------------------------------------------------------------------------------


def _elicitation(record: Record, context: Context) -> Cell:
    result = _tool_result(record)
    expect_equal(result.get("structuredContent"), scenario.linked_logins(), "structured result")
    expect_equal(_messages(_asked(record)), scenario.login_questions(), "questions asked")
    rounds = _calls(record)
    return passed(f"both logins asked once each and linked, {len(rounds)} rounds on {_workers(rounds)}")


def _sampling(record: Record, context: Context) -> Cell:
    result = _tool_result(record)
    expect_equal(result.get("structuredContent"), {"topic": scenario.HAIKU_TOPIC, "haiku": scenario.HAIKU}, "result")
    expect_equal(_text(result), scenario.HAIKU, "text")
    asked = _asked(record, "sampling/createMessage")
    expect_equal(len(asked), 1, "sampling requests")
    wanted = scenario.haiku_request()
    got = asked[0]["params"]
    expect_equal((got.get("messages"), got.get("maxTokens")), (wanted["messages"], wanted["maxTokens"]), "request")
    return passed("the client's model answer came back as the haiku, asked once")


def _roots(record: Record, context: Context) -> Cell:
    result = _tool_result(record)
    roots = list(scenario.ROOTS)
    expect_equal(result.get("structuredContent"), {"roots": roots, "count": len(roots)}, "result")
    expect_equal(len(_asked(record, "roots/list")), 1, "roots requests")
    return passed(f"its {len(roots)} roots listed, asked once")


def _handback(record: Record, context: Context) -> Cell:
    result = _tool_result(record)
    expect_equal(result.get("structuredContent"), {"count": scenario.primes(scenario.PRIMES_LIMIT)}, "result")
    compute = result["_meta"][COMPUTE_META_KEY]
    visited = [str(instance) for instance, _version in compute["visited"]]
    expect(len(set(visited)) >= 2, f"one instance served every round ({visited}): no hand-back crossed instances")
    expect_equal(compute["hops"], len(visited) - 1, "hand-backs against instances visited")
    rounds = _calls(record)
    if all(x.get("worker") for x in rounds):  # the headers say who answered each round the client sent
        expect_equal([x["worker"] for x in rounds], visited, "the round's workers (X-Worker-Id) against the state's")
    return passed(
        f"exact count; {len(rounds)} rounds ({compute['hops']} hand-backs) across {' → '.join(visited)},"
        f" {len(set(visited))} instances"
    )


def _prompt(record: Record, context: Context) -> Cell:
    value = _value(record)
    wanted = [{"role": "user", "content": {"type": "text", "text": scenario.greeting()}}]
    expect_equal([_plain_message(m) for m in value["messages"]], wanted, "messages")
    expect_equal(_messages(_asked(record)), ["What should we call you?"], "questions asked")
    return passed("the name asked, then the greeting for it")


def _plain_message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message["content"]
    return {"role": message["role"], "content": {"type": content["type"], "text": content["text"]}}


def _resource(record: Record, context: Context) -> Cell:
    value = _value(record)
    contents = [{"uri": c["uri"], "text": c["text"]} for c in value["contents"]]
    expect_equal(contents, [{"uri": scenario.RESOURCE_URI, "text": scenario.report_text()}], "contents")
    expect_equal(len(_asked(record)), 1, "questions asked")
    return passed("the detail level asked, then the report at that level")


def _url_elicitation(record: Record, context: Context) -> Cell:
    value = _value(record)
    if not context.run.bearer:
        expect(value.get("isError") is True and _text(value) == ANONYMOUS, f"not the anonymous refusal: {value}")
        return refused("anonymous callers are refused with the tool's explanation: nobody to bind the flow to")
    result = _tool_result(record)
    asked = _asked(record)
    expect(len(asked) >= 1 and asked[0]["params"].get("mode") == "url", f"no URL-mode question: {asked}")
    flow = flow_of(str(asked[0]["params"]["url"]))
    expect_equal(context.completed_flows.get(flow), scenario.VAULT_SUBJECT, "who completed the flow on the page")
    subject = scenario.VAULT_SUBJECT
    wanted = {"flow": flow, "connected": True, "keyRef": scenario.vault_key_ref(), "completedBy": subject}
    expect_equal(result.get("structuredContent"), wanted, "result")
    return passed("sent to the vault page, completed there as the same user, then connected")


# --- the tasks extension ------------------------------------------------------------------------------


def _settled(record: Record, status: str) -> Mapping[str, Any]:
    value = _value(record)
    expect_equal(value.get("kind", "task"), "task", "how the call ran")
    expect_equal(value.get("status"), status, f"outcome (error: {value.get('error')})")
    return value  # type: ignore[no-any-return]


def _task_result(record: Record, context: Context) -> Cell:
    if context.run.row.id == "inspector":
        return _inspector_task(record)
    value = _settled(record, "completed")
    result = value["result"]
    expect_equal(result.get("resultType"), "complete", "the inlined result's resultType")
    expect_equal(result.get("structuredContent"), {"count": scenario.primes(scenario.TASK_PRIMES_LIMIT)}, "result")
    slices = result["_meta"][COMPUTE_META_KEY]["visited"]
    polls = len(_calls(record, "tasks/get"))
    return passed(f"completed with the exact count through the default codec; {len(slices)} slice(s), {polls} poll(s)")


def _task_input(record: Record, context: Context) -> Cell:
    value = _settled(record, "completed")
    question, expected = scenario.estimate_pi()
    asked = _asked(record)
    expect_equal(_messages(asked), [question], "the question inside the task")
    expect_equal((asked[0].get("scope"), asked[0].get("delivery")), ("task", "task-update"), "how it was answered")
    expect_equal(len(_calls(record, "tasks/update")), 1, "tasks/update requests")
    expect_equal(value["result"].get("structuredContent"), expected, "result")
    return passed(f"asked inside the task, answered by tasks/update; {expected['samples']} samples as answered")


def _task_cancel(record: Record, context: Context) -> Cell:
    value = _settled(record, "cancelled")
    expect_equal(value.get("serverStatus"), "cancelled", "the server's status after the cancel")
    expect_equal(len(_calls(record, "tasks/cancel")), 1, "tasks/cancel requests")
    return passed("tasks/cancel sent; the server's tasks/get says cancelled")


def _task_push(record: Record, context: Context) -> Cell:
    value = _settled(record, "completed")
    task_id = value["taskId"]
    expect_equal(value.get("acknowledged"), [{"taskIds": [task_id]}], "the listen acknowledgement on the wire")
    pushes = value.get("pushes") or []
    expect(bool(pushes), "no notifications/tasks for the task arrived on the stream")
    last = pushes[-1]
    expect_equal(last.get("status"), "completed", "the last pushed status")
    count = {"count": scenario.primes(scenario.PUSH_PRIMES_LIMIT)}
    expect_equal(last["result"].get("structuredContent"), count, "the pushed result")
    expect_equal(value["result"].get("structuredContent"), count, "the settled result")
    expect_equal(value.get("streamEnded"), True, "the stream ended once the watched task was terminal")
    return passed(f"{len(pushes)} change(s) pushed, the last `completed` with the result; then the stream ended")


def _prime_report(record: Record, context: Context) -> Cell:
    value = _settled(record, "completed")
    asked = _asked(record)
    expect_equal(_messages(asked), [scenario.report_question()], "the MRTR question")
    if "scope" in asked[0]:
        expect_equal(asked[0]["scope"], "request", "where the question was asked (an MRTR round, not the task)")
    text, structured = scenario.prime_report()
    expect_equal(value["result"].get("structuredContent"), structured, "result")
    expect_equal(_text(value["result"]), text, "text")
    return passed("asked by an MRTR round, then counted as a task for the name given")


# --- the Inspector's CLI --------------------------------------------------------------------------------


def _tools_list(record: Record, context: Context) -> Cell:
    value = _value(record)
    names = frozenset(tool["name"] for tool in value["tools"])
    expect_equal(sorted(names), sorted(context.tool_names), "tool names (against the server's own list)")
    return passed(f"all {len(names)} tools listed")


def _tools_call(record: Record, context: Context) -> Cell:
    result = _tool_result(record)
    expect_equal(result.get("structuredContent"), {"text": scenario.ECHO_TEXT}, "result")
    return passed("echoed exactly")


def _inspector_task(record: Record) -> Cell:
    result = _tool_result(record)
    expect_equal(result.get("structuredContent"), {"count": scenario.primes(scenario.INSPECTOR_PRIMES_LIMIT)}, "result")
    meta = result["_meta"][COMPUTE_META_KEY]
    expect("slices" in meta, f"the call did not run as a task: {meta}")
    return passed("ran as a task through the Inspector's own ext-tasks; exact count")


LEGACY_REFUSAL = "MCP-Protocol-Version header required"


def _legacy_default(record: Record, context: Context) -> Cell:
    expect(not record.get("ok"), f"a 2025-era request was served: {_brief(record)}")
    message = str(record["error"].get("message"))
    expect("-32020" in message and LEGACY_REFUSAL in message, f"not the 2025-era refusal: {message}")
    return refused(
        "the CLI speaks 2025-era `initialize` unless told `--protocol-era modern`; the fleet answers such a "
        "request -32020 (`MCP-Protocol-Version header required`), as it does every 2025-era client"
    )


def _workers(exchanges: Sequence[Mapping[str, Any]]) -> str:
    workers = [str(x.get("worker")) for x in exchanges if x.get("worker")]
    return ", ".join(workers) if workers else "(no worker header seen)"


_CHECKS: dict[Feature, Callable[[Record, Context], Cell]] = {
    Feature.ELICITATION: _elicitation,
    Feature.SAMPLING: _sampling,
    Feature.ROOTS: _roots,
    Feature.HANDBACK: _handback,
    Feature.PROMPT: _prompt,
    Feature.RESOURCE: _resource,
    Feature.URL_ELICITATION: _url_elicitation,
    Feature.TASK_RESULT: _task_result,
    Feature.TASK_INPUT: _task_input,
    Feature.TASK_CANCEL: _task_cancel,
    Feature.TASK_PUSH: _task_push,
    Feature.PRIME_REPORT: _prime_report,
    Feature.TOOLS_LIST: _tools_list,
    Feature.TOOLS_CALL: _tools_call,
    Feature.LEGACY_DEFAULT: _legacy_default,
}
