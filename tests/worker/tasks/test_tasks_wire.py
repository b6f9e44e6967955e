"""The tasks extension on the wire, check by check as the pinned conformance suite (0.2.0-alpha.12) reads it.

One real worker with the conformance and compute packs and a real Redis; the checks are the
`tasks-*` scenarios' (see the suite's `tasks.js`), plus the compute pack's tasks (exact results)
and a worker without Redis (nothing advertised, `tasks/*` unknown).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.compute.computation import run_uninterrupted
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import KNOWN_COUNTS
from tests.conftest import StartWorker
from tests.support.wire import parse_body
from tests.worker.tasks.tasks_support import EXT, EXTENSION_ID, FORMS_AND_EXT, RpcError, TaskClient

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
ENVELOPE = ("taskId", "status", "result", "error", "inputRequests")
PACKS = ("demo", "compute", "conformance")


@pytest.fixture(scope="module")
def tasks_worker(start_worker: StartWorker, redis_server: RedisServer) -> WorkerSpec:
    env = {"MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": "wire:"}
    return start_worker(tool_packs=PACKS, env=env)[0]


@pytest.fixture
def client(tasks_worker: WorkerSpec) -> Iterator[TaskClient]:
    c = TaskClient(tasks_worker.url)
    yield c
    c.close()


@pytest.fixture
def plain(tasks_worker: WorkerSpec) -> Iterator[TaskClient]:
    """A client that does not declare the extension."""
    c = TaskClient(tasks_worker.url, capabilities={})
    yield c
    c.close()


def _assert_empty_ack(ack: dict[str, object]) -> None:
    assert ack["resultType"] == "complete"
    assert not [key for key in ENVELOPE if key in ack], ack


# tasks-lifecycle


def test_sync_tool_is_not_a_task(client: TaskClient) -> None:
    result = client.call_tool("greet", {"name": "World"})
    assert result["resultType"] == "complete"
    assert "taskId" not in result
    assert result["content"][0]["text"] == "Hello, World!"


def test_create_result_is_flat_and_complete_inlines_result(client: TaskClient) -> None:
    created = client.call_tool("slow_compute", {"seconds": 1, "label": "lifecycle"})
    assert created["resultType"] == "task"
    assert "task" not in created
    for field in ("result", "error", "inputRequests", "requestState", "ttl", "pollInterval"):
        assert field not in created
    assert created["status"] == "working"
    assert ISO.match(created["createdAt"])
    assert ISO.match(created["lastUpdatedAt"])
    assert isinstance(created["ttlMs"], int)
    assert created["ttlMs"] > 0
    assert isinstance(created["pollIntervalMs"], int)
    assert created["pollIntervalMs"] > 0
    task_id = created["taskId"]
    working = client.get(task_id)  # durably created: an immediate read resolves
    assert working["taskId"] == task_id
    assert working["resultType"] == "complete"
    assert "requestState" not in working
    assert "result" not in working
    done = client.wait_status(task_id)
    assert done["status"] == "completed", done
    assert done["result"]["resultType"] == "complete"  # the tool's own result shape (official clients check it)
    assert done["result"]["content"]
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})
    assert "requestState" not in done
    assert client.get(task_id)["status"] == "completed"  # still readable after it ended


def test_tool_error_is_completed_with_is_error(client: TaskClient) -> None:
    done = client.wait_status(client.create("failing_job"))
    assert done["status"] == "completed"
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["isError"] is True


def test_protocol_error_is_failed_with_error(client: TaskClient) -> None:
    done = client.wait_status(client.create("protocol_error_job"))
    assert done["status"] == "failed"
    assert "result" not in done
    assert isinstance(done["error"]["code"], int)
    assert isinstance(done["error"]["message"], str)


def test_cancel_is_an_empty_ack_and_settles_cancelled(client: TaskClient) -> None:
    task_id = client.create("slow_compute", {"seconds": 60, "label": "cancel"})
    client.wait_status(task_id, "working")
    _assert_empty_ack(client.cancel(task_id))
    assert client.wait_status(task_id, timeout=10)["status"] == "cancelled"
    _assert_empty_ack(client.cancel(task_id))  # idempotent on a terminal task


def test_cancel_on_completed_task_is_the_same_ack(client: TaskClient) -> None:
    task_id = client.create("slow_compute", {"seconds": 0.2})
    assert client.wait_status(task_id)["status"] == "completed"
    _assert_empty_ack(client.cancel(task_id))
    assert client.get(task_id)["status"] == "completed"


# tasks-capability-negotiation, tasks-required-task-error


def test_extension_is_advertised(client: TaskClient) -> None:
    capabilities = client.request("server/discover", {})["capabilities"]
    assert EXTENSION_ID in capabilities["extensions"]
    assert "tasks" not in capabilities


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_need_the_extension(plain: TaskClient, method: str) -> None:
    params: dict[str, object] = {"taskId": "gate-test"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    with pytest.raises(RpcError) as raised:
        plain.request(method, params)
    assert raised.value.code == -32021


def test_optional_tool_without_extension_answers_at_once(plain: TaskClient, client: TaskClient) -> None:
    result = plain.call_tool("slow_compute", {"seconds": 0, "label": "no-ext"})
    assert result["resultType"] == "complete"
    assert "taskId" not in result
    assert result["content"]
    opted_in = plain.call_tool("slow_compute", {"seconds": 1}, capabilities=EXT)  # the per-request opt-in
    assert opted_in["resultType"] == "task"
    _assert_empty_ack(client.cancel(opted_in["taskId"]))


def test_required_tool_without_extension_is_32021(plain: TaskClient) -> None:
    with pytest.raises(RpcError) as raised:
        plain.call_tool("failing_job")
    assert raised.value.code == -32021
    assert EXTENSION_ID in raised.value.data["requiredCapabilities"]["extensions"]


# tasks-mrtr-input


def test_input_required_then_update_resumes(client: TaskClient) -> None:
    task_id = client.create("confirm_delete", {"filename": "mrtr-input.txt"})
    paused = client.wait_status(task_id, "input_required", timeout=5)
    assert "requestState" not in paused
    keys = list(paused["inputRequests"])
    assert keys
    assert paused["inputRequests"][keys[0]]["method"] == "elicitation/create"
    answers = {key: {"action": "accept", "content": {"confirm": True}} for key in keys}
    _assert_empty_ack(client.update(task_id, answers))
    done = client.wait_status(task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Deleted mrtr-input.txt"


def test_partial_answers_keep_the_rest_outstanding(client: TaskClient) -> None:
    task_id = client.create("multi_input")
    paused = client.wait_status(task_id, "input_required", timeout=5)
    first, second = list(paused["inputRequests"])
    _assert_empty_ack(client.update(task_id, {first: {"action": "accept", "content": {"name": "p1", "confirm": True}}}))
    now = client.get(task_id)
    assert now["status"] == "input_required"
    assert list(now["inputRequests"]) == [second]
    client.update(task_id, {second: {"action": "accept", "content": {"name": "p2", "confirm": True}}})
    assert client.wait_status(task_id)["status"] == "completed"


def test_update_ignores_unknown_keys(client: TaskClient) -> None:
    task_id = client.create("confirm_delete", {"filename": "rt.txt"})
    before = client.wait_status(task_id, "input_required", timeout=5)
    _assert_empty_ack(client.update(task_id, {"unknown-key": {"ignored": True}}))
    after = client.get(task_id)
    assert after["status"] == "input_required"
    assert after["inputRequests"] == before["inputRequests"]
    _assert_empty_ack(client.cancel(task_id))
    assert client.get(task_id)["status"] == "cancelled"  # cancelled while input_required


# tasks-request-headers, tasks-dispatch-and-envelope


def test_mcp_name_must_match_task_id(client: TaskClient) -> None:
    task_id = client.create("slow_compute", {"seconds": 60})
    assert client.get(task_id, headers={"Mcp-Method": "tasks/get", "Mcp-Name": task_id})["taskId"] == task_id
    with pytest.raises(RpcError) as raised:
        client.get(task_id, headers={"Mcp-Name": "sep-2663-wrong-task-id"})
    assert raised.value.code == -32020
    with pytest.raises(RpcError) as mismatch:
        client.call_tool("greet", {"name": "x"}, headers={"Mcp-Method": "tasks/get"})
    assert mismatch.value.code == -32020
    client.cancel(task_id)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_task_call_without_mcp_name_is_a_header_mismatch(client: TaskClient, method: str) -> None:
    task_id = client.create("slow_compute", {"seconds": 60})
    params = {"taskId": task_id, "_meta": request_meta(FORMS_AND_EXT)}
    if method == "tasks/update":
        params["inputResponses"] = {}
    headers = request_headers(method)  # no params: Mcp-Method only, no Mcp-Name
    assert "Mcp-Name" not in headers
    response = client.http.post(client.url, content=encode_request(1, method, params), headers=headers)
    assert response.status_code == 400
    error = parse_body(response)["error"]
    assert error["code"] == -32020
    assert "Mcp-Name header missing" in error["message"]
    assert client.get(task_id)["status"] == "working"  # refused before it acted: the cancel did not happen
    client.cancel(task_id)


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_removed_methods_are_unknown(client: TaskClient, method: str) -> None:
    with pytest.raises(RpcError) as raised:
        client.request(method, {"taskId": "tasks-conformance-isolation-probe"} if method == "tasks/result" else {})
    assert raised.value.code == -32601


def test_legacy_task_param_is_ignored(client: TaskClient) -> None:
    result = client.call_tool("greet", {"name": "legacy"}, params={"task": {"ttl": 60000, "pollInterval": 100}})
    assert result["resultType"] == "complete"
    assert "taskId" not in result


def test_unknown_task_is_32602(client: TaskClient) -> None:
    for task_id in ("no-such-task", "A" * 32):
        with pytest.raises(RpcError) as raised:
            client.get(task_id)
        assert raised.value.code == -32602


# tasks-mrtr-composition and the demo's


def test_mrtr_round_then_task(client: TaskClient) -> None:
    first = client.call_tool("test_tool_with_task")
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    key = next(iter(first["inputRequests"]))
    answer = {key: {"action": "accept", "content": {"name": "Alice"}}}
    second = client.call_tool(
        "test_tool_with_task", params={"inputResponses": answer, "requestState": first["requestState"]}
    )
    assert second["resultType"] == "task"
    assert "requestState" not in second
    assert "inputRequests" not in second
    done = client.wait_status(second["taskId"])
    assert done["status"] == "completed"
    assert "Alice" in done["result"]["content"][0]["text"]


def test_demo_prime_report_composes_rounds_and_task(client: TaskClient) -> None:
    first = client.call_tool("prime_report")
    assert first["resultType"] == "input_required"
    answer = {"report": {"action": "accept", "content": {"name": "Ada", "limit": 1_000_000}}}
    second = client.call_tool("prime_report", params={"inputResponses": answer, "requestState": first["requestState"]})
    done = client.wait_status(second["taskId"])
    assert done["result"]["structuredContent"] == {"name": "Ada", "limit": 1_000_000, "count": KNOWN_COUNTS[1_000_000]}


# The compute pack as tasks.


def test_count_primes_task_is_exact(client: TaskClient, tasks_worker: WorkerSpec) -> None:
    task_id = client.create("count_primes", {"limit": 2_000_000, "segment": 100_000})
    done = client.wait_status(task_id, timeout=60)
    assert done["result"]["structuredContent"] == {"count": KNOWN_COUNTS[2_000_000]}
    assert done["result"]["_meta"]["mrtr-cluster.dev/compute"]["steps"] == 20
    assert done["statusMessage"] == f"20 steps done; completed on {tasks_worker.instance_id}"  # not the last slice's
    metrics = httpx.get(f"{tasks_worker.url}/metrics", timeout=10).text
    assert 'mrtr_worker_task_slices_total{outcome="completed"}' in metrics
    assert 'mrtr_worker_compute_steps_total{tool="count_primes"}' in metrics


def test_count_primes_without_extension_stays_mrtr(plain: TaskClient) -> None:
    result = plain.call_tool("count_primes", {"limit": 1000})
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"count": 168}


def test_estimate_pi_task_asks_and_resumes(client: TaskClient) -> None:
    arguments = {"samples": 20_000, "seed": 7, "ask_to_refine": True, "chunk": 5_000}
    task_id = client.create("estimate_pi", arguments)
    paused = client.wait_status(task_id, "input_required", timeout=30)
    (key,) = paused["inputRequests"]
    client.update(task_id, {key: {"action": "accept", "content": {"refine": True}}})
    done = client.wait_status(task_id, timeout=60)
    expected, steps = run_uninterrupted(ESTIMATE_PI, {**arguments, "samples": 40_000, "ask_to_refine": False})
    assert done["result"]["structuredContent"] == expected
    assert done["result"]["_meta"]["mrtr-cluster.dev/compute"]["steps"] == steps


def test_no_redis_no_extension(start_worker: StartWorker) -> None:
    spec, _ = start_worker(tool_packs=PACKS)
    c = TaskClient(spec.url, capabilities=FORMS_AND_EXT)
    try:
        capabilities = c.request("server/discover", {})["capabilities"]
        assert EXTENSION_ID not in (capabilities.get("extensions") or {})
        with pytest.raises(RpcError) as raised:
            c.get("A" * 32)
        assert raised.value.code == -32601
        assert c.call_tool("slow_compute", {"seconds": 0})["resultType"] == "complete"
        assert c.call_tool("failing_job")["isError"] is True
    finally:
        c.close()


def test_answers_are_size_capped(client: TaskClient) -> None:
    task_id = client.create("confirm_delete", {"filename": "big.txt"})
    (key,) = client.wait_status(task_id, "input_required", timeout=5)["inputRequests"]
    with pytest.raises(RpcError) as raised:
        client.update(task_id, {key: {"action": "accept", "content": {"confirm": True, "pad": "x" * 40_000}}})
    assert raised.value.code == -32602
    assert raised.value.data["limit"] == "answerBytes"
    assert client.get(task_id)["status"] == "input_required"  # nothing was folded
    client.cancel(task_id)
