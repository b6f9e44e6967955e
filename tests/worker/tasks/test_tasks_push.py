"""Push for tasks: `notifications/tasks` on a `subscriptions/listen` stream, fed from Redis.

Two real workers sharing one real Redis (and trusting the development issuer, so tasks have
principals). A listen is read frame by frame as it arrives, in a thread, the way a client would.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import ManagedProcess, WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_protocol.tasks import (
    LISTEN_TASK_IDS,
    SUBSCRIPTION_ID_META_KEY,
    SUBSCRIPTIONS_ACKNOWLEDGED,
    SUBSCRIPTIONS_LISTEN,
    TASKS_NOTIFICATION,
)
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.conftest import StartWorker
from tests.worker.tasks.tasks_support import EXT, RpcError, TaskClient

PREFIX = "push:"


class Listen:
    """One `subscriptions/listen` POST, its frames collected as they arrive (a thread reads the stream)."""

    def __init__(
        self, base_url: str, task_ids: list[str], *, token: str | None = None, capabilities: dict[str, Any] = EXT
    ) -> None:
        self.request_id = secrets.randbelow(1 << 30)
        params = {"notifications": {LISTEN_TASK_IDS: task_ids}, "_meta": request_meta(capabilities)}
        extra = {"Authorization": f"Bearer {token}"} if token else {}
        self._body = encode_request(self.request_id, SUBSCRIPTIONS_LISTEN, params)
        self._headers = request_headers(SUBSCRIPTIONS_LISTEN, params, extra)
        self._url = f"{base_url}/mcp"
        self.frames: list[dict[str, Any]] = []
        self.status: int | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(30.0, read=60.0)) as http,
                http.stream("POST", self._url, content=self._body, headers=self._headers) as response,
            ):
                self.status = response.status_code
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    self.frames.append(json.loads(response.read()))
                    return
                data: list[str] = []
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line and data:
                        self.frames.append(json.loads("\n".join(data)))
                        data = []
        finally:
            self.ended.set()

    def wait_ended(self, timeout: float = 20.0) -> list[dict[str, Any]]:
        wait_until(lambda: self.ended.is_set() or None, timeout=timeout, what="the listen stream to end")
        return self.frames

    def pushes(self) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f.get("method") == TASKS_NOTIFICATION]

    def wait_push(self, status: str, timeout: float = 20.0) -> dict[str, Any]:
        return wait_until(
            lambda: next((p for p in self.pushes() if p["status"] == status), None),
            timeout=timeout,
            what=f"a push with status {status}",
        )


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def workers(
    start_worker: StartWorker, redis_server: RedisServer, issuer: tuple[DevIssuer, Path]
) -> list[tuple[WorkerSpec, ManagedProcess]]:
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
    }
    return [start_worker(tool_packs=("conformance",), env=env) for _ in range(2)]


@pytest.fixture
def alice(issuer: tuple[DevIssuer, Path]) -> str:
    return issuer[0].mint("alice")


@pytest.fixture
def clients(workers: list[tuple[WorkerSpec, ManagedProcess]], alice: str) -> Iterator[list[TaskClient]]:
    made = [TaskClient(spec.url, token=alice) for spec, _ in workers]
    yield made
    for client in made:
        client.close()


def _final(frames: list[dict[str, Any]], request_id: int) -> dict[str, Any]:
    """The listen's completion result: the last frame, a response to the listen, stamped with its id."""
    last = frames[-1]
    assert last.get("id") == request_id, last
    assert "result" in last, last
    assert last["result"]["_meta"][SUBSCRIPTION_ID_META_KEY] == request_id
    return dict(last["result"])


def test_a_change_made_on_b_reaches_a_listener_on_a(
    workers: list[tuple[WorkerSpec, ManagedProcess]], clients: list[TaskClient], alice: str
) -> None:
    (a, _), _ = workers
    on_a, on_b = clients
    task_id = on_a.create("slow_compute", {"seconds": 120})
    listen = Listen(a.url, [task_id], token=alice)
    first = listen.wait_push("working")  # the current state comes first, before any change
    ack = listen.frames[0]
    assert ack["method"] == SUBSCRIPTIONS_ACKNOWLEDGED
    assert ack["params"]["notifications"] == {LISTEN_TASK_IDS: [task_id]}
    assert first["taskId"] == task_id
    assert first["_meta"][SUBSCRIPTION_ID_META_KEY] == listen.request_id

    on_b.cancel(task_id)  # the change is worker B's write; A hears of it only through Redis
    cancelled = listen.wait_push("cancelled")
    read = on_b.get(task_id)
    assert {k: v for k, v in cancelled.items() if k != "_meta"} == {  # the full DetailedTask, as tasks/get says
        k: v for k, v in read.items() if k not in ("_meta", "resultType")
    }
    frames = listen.wait_ended()  # every watched task is terminal: a graceful end
    assert _final(frames, listen.request_id)["resultType"] == "complete"
    assert listen.status == 200


def test_another_principal_learns_nothing(
    workers: list[tuple[WorkerSpec, ManagedProcess]], clients: list[TaskClient], issuer: tuple[DevIssuer, Path]
) -> None:
    (a, _), (b, _) = workers
    task_id = clients[0].create("slow_compute", {"seconds": 120})
    bob = issuer[0].mint("bob")
    made_up = secrets.token_urlsafe(24)
    try:
        seen = []
        for ids in ([task_id], [made_up]):
            listen = Listen(b.url, ids, token=bob)
            frames = listen.wait_ended()
            assert [f.get("method") for f in frames[:-1]] == [SUBSCRIPTIONS_ACKNOWLEDGED]
            assert frames[0]["params"]["notifications"] == {LISTEN_TASK_IDS: []}
            _final(frames, listen.request_id)
            seen.append([f.get("method", "result") for f in frames])
        assert seen[0] == seen[1]  # another principal's task and a made-up id: the same stream

        anonymous = Listen(a.url, [task_id]).wait_ended()
        assert anonymous[0]["params"]["notifications"] == {LISTEN_TASK_IDS: []}
    finally:
        clients[0].cancel(task_id)


def test_a_listen_without_the_extension_is_refused(
    workers: list[tuple[WorkerSpec, ManagedProcess]], alice: str
) -> None:
    (a, _), _ = workers
    listen = Listen(a.url, ["x" * 32], token=alice, capabilities={})
    (reply,) = listen.wait_ended()
    assert reply["error"]["code"] == -32021, reply
    with pytest.raises(RpcError) as refused:
        TaskClient(a.url, token=alice).request(SUBSCRIPTIONS_LISTEN, {"notifications": {LISTEN_TASK_IDS: "x"}})
    assert refused.value.code == -32602


def test_drain_ends_the_stream(
    workers: list[tuple[WorkerSpec, ManagedProcess]], clients: list[TaskClient], alice: str
) -> None:
    """Last in the module: worker B drains (and exits)."""
    _, (b, process) = workers
    task_id = clients[0].create("slow_compute", {"seconds": 120})
    try:
        listen = Listen(b.url, [task_id], token=alice)
        listen.wait_push("working")
        assert httpx.post(f"{b.url}/admin/drain", timeout=10).status_code == 200
        frames = listen.wait_ended()
        assert _final(frames, listen.request_id)["resultType"] == "complete"
        assert clients[0].get(task_id)["status"] == "working"  # the task goes on; only the stream ended
        wait_until(
            lambda: (process.popen is not None and process.popen.poll() is not None) or None,
            timeout=30,
            what="the drained worker to exit",
        )
    finally:
        clients[0].cancel(task_id)
