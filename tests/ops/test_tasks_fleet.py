"""Tasks through the real proxy over three workers and one Redis: the faults a fleet meets, one cluster for all.

Each test drives tasks through the proxy as a client would (its own principal, so the per-principal cap
of one test never touches another) and observes the fleet from outside: the slice queue in Redis (which
worker holds a task's slice right now), the workers' step counters and `/readyz`. Every wait is on an
event, bounded; nothing sleeps. These replace the single-worker fault tests `tests/worker` had (kill,
drain, Redis down, cancel): through the proxy, over several workers, is how the fleet meets them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from mrtr_ops.chaos.fleet import LocalChaosFleet
from mrtr_ops.chaos.plan import PlannedFault
from mrtr_ops.chaos.run import ChaosRun
from mrtr_ops.chaos.watch import HandBackMeter
from mrtr_ops.history.store_events import StoreEvent, read_events
from mrtr_ops.local.cluster import LocalCluster
from mrtr_ops.waiting import wait_until
from mrtr_worker.compute.computation import run_uninterrupted
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import COUNT_PRIMES, KNOWN_COUNTS
from mrtr_worker.config import WorkerSettings
from mrtr_worker.tasks.store import GROUP
from tests.ops.conftest import MakeCluster
from tests.worker.tasks.tasks_support import RpcError, TaskClient

PREFIX = "fleet:"
STREAM = f"{PREFIX}slices"
MAX_LIVE = 8
DEFAULT_POLL_MS = WorkerSettings.model_fields["task_poll_interval_ms"].default
"""The refusal's retry hint: the tasks' poll interval (not set here)."""
ENV = {
    "MRTR_WORKER_REDIS_PREFIX": PREFIX,
    "MRTR_WORKER_TASK_SLICE_MS": "300",
    "MRTR_WORKER_TASK_LEASE_MS": "3000",
    "MRTR_WORKER_MAX_LIVE_TASKS": str(MAX_LIVE),
    "MRTR_WORKER_TASK_HISTORY_MAX": "100000",
}
"""Short slices (a task of a few seconds hops several times), a short lease (a slice a live worker could not
commit returns soon), and the history of begins and commits (`mrtr_ops.history.store_events`)."""

LONG = {"limit": 100_000_000, "segment": 1_000_000}
LONG_STEPS = COUNT_PRIMES.total_steps(COUNT_PRIMES.initial(LONG))
ASKING = {"samples": 20_000, "seed": 7, "ask_to_refine": True, "chunk": 5_000}
"""estimate_pi pausing in input_required: a live task that costs no CPU while it waits."""
STEPS_METRIC = "mrtr_worker_compute_steps_total"


@pytest.fixture(scope="module")
def fleet(make_cluster: MakeCluster) -> LocalCluster:
    return make_cluster(workers=3, worker_env=ENV, auth=True, ready_timeout=180)  # a busy machine: slow starts


@pytest.fixture(scope="module")
def queue(fleet: LocalCluster) -> Iterator[redis.Redis]:
    """A plain Redis client on the fleet's store: to see which worker holds a slice (the stream's pending list)."""
    assert fleet.redis is not None
    client = redis.Redis.from_url(fleet.redis.url, decode_responses=True, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def open_client(fleet: LocalCluster) -> Iterator[Callable[..., TaskClient]]:
    """Task clients through the proxy, one principal each (closed after the test)."""
    opened: list[TaskClient] = []

    def open_(subject: str, **kwargs: Any) -> TaskClient:
        opened.append(TaskClient(fleet.url, token=fleet.issuer.mint(subject), **kwargs))
        return opened[-1]

    yield open_
    for client in opened:
        client.close()


# --- observing the fleet ---------------------------------------------------------------------------------------


def _holders(queue: redis.Redis, task_ids: set[str]) -> dict[str, str]:
    """Task id -> the worker holding its slice right now (leased to it, not yet acknowledged)."""
    held: dict[str, str] = {}
    pending: list[dict[str, Any]] = queue.xpending_range(STREAM, GROUP, min="-", max="+", count=100)
    for entry in pending:
        messages: list[Any] = queue.xrange(STREAM, min=entry["message_id"], max=entry["message_id"])  # type: ignore[assignment]
        task = str(messages[0][1].get("task")) if messages else None
        if task in task_ids:
            held[str(task)] = str(entry["consumer"])
    return held


def _queued(queue: redis.Redis, task_id: str) -> bool:
    """Whether any slice of the task is in the stream (waiting or held)."""
    messages: list[Any] = queue.xrange(STREAM)  # type: ignore[assignment]  # redis-py's sync/async union
    return any(fields.get("task") == task_id for _, fields in messages)


def _holder_among(queue: redis.Redis, workers: set[str], client: TaskClient, task_ids: list[str]) -> str:
    """One of `workers` holding a slice of a task in `task_ids`; a new task joins them now and then until one does
    (the other workers may take every slice for a while, or the tasks finish first)."""

    def holding() -> str | None:
        return next((w for w in _holders(queue, set(task_ids)).values() if w in workers), None)

    for _ in range(6):
        task_ids.append(client.create("count_primes", LONG))
        try:
            return wait_until(holding, timeout=10, interval=0.02, what=f"one of {sorted(workers)} holding a slice")
        except TimeoutError:
            continue
    raise AssertionError(f"none of {sorted(workers)} took a slice of {len(task_ids)} tasks")


def _steps(fleet: LocalCluster, workers: list[str], tool: str = "count_primes") -> float:
    return sum(fleet.worker_metric(w, STEPS_METRIC, tool=tool) for w in workers)


def _checkpoint(task: dict[str, Any]) -> int:
    """Steps in the task's last checkpoint, from its statusMessage ("N steps done; last slice on wX")."""
    message = task.get("statusMessage") or "0 steps"
    return int(message.split(" ", 1)[0])


def _wait_checkpoint(client: TaskClient, task_id: str, at_least: int = 1) -> int:
    return wait_until(
        lambda: steps if (steps := _checkpoint(client.get(task_id))) >= at_least else None,
        timeout=60,
        interval=0.05,
        what=f"task {task_id} to checkpoint {at_least} steps",
    )


def _compute_meta(task: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = task["result"]["_meta"]["mrtr-cluster.dev/compute"]
    return meta


def _assert_exact_count(task: dict[str, Any]) -> dict[str, Any]:
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"] == {"count": KNOWN_COUNTS[LONG["limit"]]}
    meta = _compute_meta(task)
    assert meta["steps"] == LONG_STEPS  # steps count at commit: a redone slice is not counted twice
    return meta


def _readyz_store(fleet: LocalCluster, state: str) -> list[dict[str, Any]] | None:
    bodies = []
    for handle in list(fleet.workers.values()):
        response = httpx.get(f"{handle.url}/readyz", timeout=5)
        assert response.status_code == 200, response.text  # Redis never takes a worker out of rotation
        bodies.append(response.json()["tasks"])
    return bodies if all(body.get("store") == state for body in bodies) else None


def _fails_with_store_unavailable(call: Callable[[], object]) -> None:
    with pytest.raises(RpcError) as raised:
        call()
    assert raised.value.status < 500  # a JSON-RPC error, never a 500
    assert raised.value.code == -32603
    assert raised.value.data == {"reason": "task_store_unavailable", "retryable": True}
    assert "Task store unavailable" in raised.value.message


# --- faults ---------------------------------------------------------------------------------------------------


def _events(queue: redis.Redis, task_id: str) -> list[StoreEvent]:
    return [event for event in read_events(queue, PREFIX) if event.task == task_id]


def _assert_ranges_tile(events: list[StoreEvent], total: int) -> None:
    """The landed commits' step ranges follow one another from 0 to `total`: none committed twice, none missing."""
    at = 0
    for event in sorted((e for e in events if e.landed), key=lambda e: e.rev):
        assert event.steps_from == at, [(e.worker, e.outcome, e.rev, e.steps_from, e.steps_to) for e in events]
        at = event.steps_to
    assert at == total


def _checkpoint_at(events: list[StoreEvent], rev: int) -> int:
    """Steps in the task's record at revision `rev` (what a slice begun there started from)."""
    return next((e.steps_to for e in events if e.landed and e.rev == rev), 0)


def _slices(fleet: LocalCluster, workers: list[str], outcome: str) -> float:
    return sum(fleet.worker_metric(w, "mrtr_worker_task_slices_total", outcome=outcome) for w in workers)


def _frozen_holder(fleet: LocalCluster, queue: redis.Redis, task_id: str) -> Callable[[], str | None]:
    def frozen() -> str | None:
        """The worker holding the slice, stopped (SIGSTOP) while it still holds it: it cannot commit any more."""
        holder = _holders(queue, {task_id}).get(task_id)
        if holder is None or holder not in fleet.workers:
            return None
        fleet.pause_worker(holder)
        if _holders(queue, {task_id}).get(task_id) == holder:
            return holder
        fleet.resume_worker(holder)  # it committed in between: try the next slice
        return None

    return frozen


def test_a_worker_killed_mid_slice_loses_only_that_slice_and_a_survivor_takes_it_without_the_lease(
    fleet: LocalCluster, queue: redis.Redis, open_client: Callable[..., TaskClient]
) -> None:
    """kill -9 closes the victim's Redis connections: a survivor sees it dead and claims the slice at once (a
    takeover, not the lease's XAUTOCLAIM), from the last checkpoint; steps count only at commit."""
    client = open_client("killed")
    task_id = client.create("count_primes", LONG)
    _wait_checkpoint(client, task_id)
    victim = wait_until(_frozen_holder(fleet, queue, task_id), timeout=30, interval=0.02, what="a holder to freeze")
    survivors = [w for w in fleet.workers if w != victim]
    try:
        executed_before = _steps(fleet, survivors)
        taken_before, reclaimed_before = _slices(fleet, survivors, "taken_over"), _slices(fleet, survivors, "reclaimed")
        fleet.kill_worker(victim)  # SIGKILL mid-slice (frozen only so the figures above are exact)
        done = client.wait_status(task_id, timeout=120)
        meta = _assert_exact_count(done)
        assert meta["visited"][-1][0] != victim
        events = _events(queue, task_id)
        _assert_ranges_tile(events, LONG_STEPS)
        last = [e for e in events if e.kind == "begin" and e.worker == victim][-1]
        assert not [e for e in events if e.landed and e.token == last.token], "the killed slice never committed"
        taker = next(e for e in events if e.kind == "begin" and e.message == last.message and e.worker != victim)
        assert taker.deliveries >= 2
        assert taker.token > last.token
        checkpoint = _checkpoint_at(events, last.rev)
        assert 0 < checkpoint < LONG_STEPS
        # The others resumed from the last checkpoint: they ran exactly the steps after it, so all that was
        # lost is what the victim did since (its current slice), and nothing before it ran twice.
        assert _steps(fleet, survivors) - executed_before == LONG_STEPS - checkpoint
        assert _slices(fleet, survivors, "taken_over") > taken_before  # seen dead, not waited out
        assert _slices(fleet, survivors, "reclaimed") == reclaimed_before
    finally:
        fleet.kill_worker(victim)  # (if an assertion came first: never leave it stopped)
        fleet.restart_worker(victim)  # a supervisor's restart: same identity, back in rotation
    assert not _queued(queue, task_id)


def test_a_zombie_woken_after_its_slice_was_taken_is_fenced_and_its_steps_never_count(
    fleet: LocalCluster, queue: redis.Redis, open_client: Callable[..., TaskClient]
) -> None:
    """SIGSTOP the worker running a slice past its heartbeat: another worker takes the slice over (fencing token
    bumped); SIGCONT: the woken worker's boundary check or commit is refused, it counts none of its steps, and
    the task's step ranges are each committed once."""
    client = open_client("zombie")
    everyone = list(fleet.workers)
    executed_before = _steps(fleet, everyone)
    task_id = client.create("count_primes", LONG)
    _wait_checkpoint(client, task_id)
    fenced_before = {w: fleet.worker_metric(w, "mrtr_worker_task_slices_total", outcome="fenced") for w in everyone}
    zombie = wait_until(_frozen_holder(fleet, queue, task_id), timeout=30, interval=0.02, what="a holder to freeze")
    try:
        frozen = [e for e in _events(queue, task_id) if e.kind == "begin" and e.worker == zombie][-1]

        def taken_over() -> StoreEvent | None:
            return next(
                (e for e in _events(queue, task_id) if e.kind == "begin" and e.message == frozen.message
                 and e.worker != zombie),
                None,
            )  # fmt: skip

        taker = wait_until(taken_over, timeout=60, interval=0.02, what="another worker to take the frozen slice")
        assert taker.token > frozen.token
    finally:
        fleet.resume_worker(zombie)
    done = client.wait_status(task_id, timeout=120)
    _assert_exact_count(done)
    events = _events(queue, task_id)
    _assert_ranges_tile(events, LONG_STEPS)
    assert not [e for e in events if e.landed and e.token == frozen.token], "the zombie's slice never committed"
    wait_until(
        lambda: fleet.worker_metric(zombie, "mrtr_worker_task_slices_total", outcome="fenced") > fenced_before[zombie],
        timeout=30,
        interval=0.05,
        what="the woken worker to find its slice fenced",
    )
    # Steps count only at commit: over the whole task, every worker together counted each step exactly once.
    assert _steps(fleet, everyone) - executed_before == LONG_STEPS
    refused = [e for e in events if e.kind == "commit" and e.worker == zombie and e.token == frozen.token]
    assert all(e.outcome == "fenced" for e in refused)


def test_redis_restarted_mid_task_the_task_resumes_and_task_calls_fail_clearly_meanwhile(
    fleet: LocalCluster, open_client: Callable[..., TaskClient]
) -> None:
    assert fleet.redis is not None
    client = open_client("outage")
    plain = open_client("outage", capabilities={})  # the same principal, without the tasks extension
    task_id = client.create("count_primes", LONG)
    checkpoint = _wait_checkpoint(client, task_id, at_least=LONG_STEPS // 4)
    everyone = list(fleet.workers)
    executed_before = _steps(fleet, everyone)

    fleet.redis.stop()  # SIGTERM: Redis writes its append-only file out
    try:
        _fails_with_store_unavailable(lambda: client.get(task_id))
        _fails_with_store_unavailable(lambda: client.update(task_id, {"refine-1": {"action": "accept"}}))
        _fails_with_store_unavailable(lambda: client.cancel(task_id))
        _fails_with_store_unavailable(lambda: client.call_tool("count_primes", {"limit": 1_000}))
        # Everything but tasks works through the proxy: a tool of the demo pack, a computation as MRTR rounds.
        assert plain.call_tool("echo", {"text": "still here"})["structuredContent"] == {"text": "still here"}
        small = plain.call_tool("hash_chain", {"seed": "x", "iterations": 10})
        assert small["resultType"] == "complete"
        assert "structuredContent" in small
        down = wait_until(lambda: _readyz_store(fleet, "unreachable"), timeout=30, what="/readyz to report Redis")
        assert all(body["reason"] for body in down)  # and says why
    finally:
        fleet.redis.start()  # the same data directory and port: the append-only file brings every task back

    after = client.get(task_id)
    assert after["status"] == "working"  # the cancel during the outage never happened
    assert _checkpoint(after) >= checkpoint
    done = client.wait_status(task_id, timeout=120)
    _assert_exact_count(done)
    executed = _steps(fleet, everyone) - executed_before
    assert LONG_STEPS - checkpoint <= executed < LONG_STEPS  # resumed from its checkpoint, not from the start
    wait_until(lambda: _readyz_store(fleet, "ok"), timeout=30, what="/readyz to see Redis again")


def test_the_chaos_runs_redis_restart_leaves_the_tasks_in_flight_to_complete(
    fleet: LocalCluster, open_client: Callable[..., TaskClient]
) -> None:
    """The chaos run's `redis` fault, as the run does it, on this fleet: a restart quick enough that the
    workers' retries ride it out; the task in flight goes on from its checkpoint."""
    client = open_client("chaos")
    task_id = client.create("count_primes", LONG)
    _wait_checkpoint(client, task_id)
    chaos_fleet = LocalChaosFleet(fleet)
    record = ChaosRun(chaos_fleet, fleet.lb, HandBackMeter(chaos_fleet), seed=1).fault(PlannedFault("redis", 0.0, 0.0))
    assert record.error is None
    assert (record.kind, record.victim) == ("redis", "store")
    evidence = record.evidence
    assert evidence["old_pid_gone"]
    assert evidence["new_pid"] not in (None, evidence["old_pid"])
    assert record.recovered is not None  # every worker reported the store reachable again
    _assert_exact_count(client.wait_status(task_id, timeout=120))


def test_drained_workers_hand_their_slices_back_through_a_v1_v2_v1_replacement(
    fleet: LocalCluster, queue: redis.Redis, open_client: Callable[..., TaskClient]
) -> None:
    """A rolling upgrade's step, there and back: start a worker of the other version, drain one holding a
    slice (SIGTERM's path: `/admin/drain`). Tasks are in flight at each drain, so they cross both versions."""
    client = open_client("rolled")
    task_ids: list[str] = []
    for version in (2, 1):
        fleet.add_worker(version)
        old = {w for w, h in fleet.workers.items() if h.spec.version != version}
        victim = _holder_among(queue, old, client, task_ids)
        fleet.drain_worker(victim)  # returns once the process has exited
        pending = {c["name"]: c["pending"] for c in queue.xpending(STREAM, GROUP)["consumers"]}
        assert pending.get(victim, 0) == 0, "the drain handed its slice back: nothing waits for its lease"
    versions_seen: set[int] = set()
    for task_id in task_ids:
        meta = _assert_exact_count(client.wait_status(task_id, timeout=120))
        versions_seen |= {version for _, version in meta["visited"]}
    assert versions_seen == {1, 2}, "slices ran on both versions"
    assert sorted(h.spec.version for h in fleet.workers.values()) == [1, 1, 1]


# --- the task surface through the proxy -----------------------------------------------------------------------


def test_cancel_settles_a_running_task_and_one_waiting_for_input(
    fleet: LocalCluster, queue: redis.Redis, open_client: Callable[..., TaskClient]
) -> None:
    client = open_client("canceller")
    running = client.create("count_primes", LONG)
    _wait_checkpoint(client, running)
    asking = client.create("estimate_pi", ASKING)
    client.wait_status(asking, "input_required", timeout=30)
    for task_id in (running, asking):
        assert client.cancel(task_id)["resultType"] == "complete"
        cancelled = client.wait_status(task_id, timeout=10)
        assert cancelled["status"] == "cancelled"
        assert not {"result", "error", "inputRequests"} & set(cancelled)
        assert client.cancel(task_id)["resultType"] == "complete"  # idempotent: the same empty ack
        assert client.get(task_id)["status"] == "cancelled"
    # The running computation stopped at its next step boundary: no slice of it is left anywhere.
    wait_until(lambda: not _queued(queue, running), timeout=10, interval=0.05, what="the cancelled slice to go")
    assert client.get(running)["status"] == "cancelled"  # and the runner never overwrote the cancel


def test_another_principal_gets_the_unknown_task_answer(open_client: Callable[..., TaskClient]) -> None:
    alice, mallory = open_client("alice"), open_client("mallory")
    task_id = alice.create("estimate_pi", ASKING)
    paused = alice.wait_status(task_id, "input_required", timeout=30)
    unknown = secrets.token_urlsafe(24)
    calls: dict[str, Callable[[TaskClient, str], object]] = {
        "get": lambda c, t: c.get(t),
        "update": lambda c, t: c.update(t, {key: {"action": "decline"} for key in paused["inputRequests"]}),
        "cancel": lambda c, t: c.cancel(t),
    }
    for name, call in calls.items():
        answers = []
        for target in (task_id, unknown):
            with pytest.raises(RpcError) as raised:
                call(mallory, target)
            error = raised.value
            answers.append((error.status, error.code, error.data, error.message.replace(target[:80], "ID")))
        assert answers[0] == answers[1], name
        assert answers[0][1] == -32602
    assert alice.get(task_id)["inputRequests"] == paused["inputRequests"]  # untouched by mallory's calls
    alice.cancel(task_id)


def test_a_flood_past_the_cap_is_refused_clearly_and_earlier_tasks_go_on(
    open_client: Callable[..., TaskClient],
) -> None:
    flood, bystander = open_client("flood"), open_client("bystander")
    task_ids = [flood.create("estimate_pi", ASKING) for _ in range(MAX_LIVE)]
    with pytest.raises(RpcError) as raised:
        flood.create("estimate_pi", ASKING)
    assert raised.value.status == 400
    assert raised.value.code == -32600
    assert raised.value.data == {"reason": "task_limit", "max": MAX_LIVE, "retryAfterMs": DEFAULT_POLL_MS}
    assert f"at most {MAX_LIVE}" in raised.value.message
    other = bystander.create("estimate_pi", ASKING)  # the cap is per principal

    first = flood.wait_status(task_ids[0], "input_required", timeout=30)
    (key,) = first["inputRequests"]
    flood.update(task_ids[0], {key: {"action": "accept", "content": {"refine": True}}})
    done = flood.wait_status(task_ids[0], timeout=60)
    expected, steps = run_uninterrupted(ESTIMATE_PI, {**ASKING, "samples": 40_000, "ask_to_refine": False})
    assert done["result"]["structuredContent"] == expected
    assert _compute_meta(done)["steps"] == steps
    for task_id in task_ids[1:]:
        assert flood.wait_status(task_id, "input_required", timeout=30)["status"] == "input_required"
    task_ids.append(flood.create("estimate_pi", ASKING))  # the finished task gave its place back
    for task_id in task_ids[1:]:
        flood.cancel(task_id)
    bystander.cancel(other)
