"""The two loads of the failover benchmark, and what each counts as acknowledged and as lost.

* `TaskTraffic`: tasks as users make them, through a cluster's proxy. A
  creation is *acknowledged* when `tools/call` answered `CreateTaskResult`; it
  is *lost* when `tasks/get` still answers "Task not found" once every fault
  is over. Every `tasks/get` answer is remembered per task (its steps done,
  from the status message, and whether it was terminal): an answer showing
  fewer steps than an earlier one, a task seen terminal and then working
  again, or one seen missing and then found, is what a client saw go back
  (a checkpoint lost, or a read answered from an older copy). Every call is
  logged (start, end, outcome), to time how long task calls fail.
* `StoreWriter`: the worker's own `TaskStore` (through Sentinel, with its
  retries and its WAIT policy) writing records and checkpoints as fast as it
  can. A write is *acknowledged* when `create` or `commit` returned (with WAIT
  on: after a replica confirmed it). A creation is *lost* when the record is
  gone; a checkpoint is *lost* when the record's revision is below the last
  acknowledged one, read back once every fault is over (a read during a
  failover can reach an old primary that came back, and see a past the new
  primary does not have).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from redis.exceptions import RedisError

from benchmarks._cluster import PrimesCall
from mrtr_protocol import events
from mrtr_protocol.tasks import TASK_ID_PARAM, TASK_RESULT_TYPE, TASKS_GET, with_tasks
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.compute.primes import KNOWN_COUNTS
from mrtr_worker.redis_link import NotReplicated, RedisTarget, WaitPolicy, parse_sentinels
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, TaskRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.store import Stored, TaskStore, now_ms
from mrtr_worker.tasks.wire import Status

_STEPS = re.compile(r"^(\d+) steps done")
PROBE_SECONDS = 0.25
PROBE_LIMIT = 1_000
"""The probes' tasks: `count_primes` to a thousand, one step."""
MAX_PROBES = 40
"""Probes in flight at most: a failover makes each hang for seconds."""
TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class CallLog:
    """One task call: what it was, when it ran (monotonic seconds), and whether it got its answer."""

    kind: str
    started: float
    ended: float
    ok: bool
    reason: str = ""


@dataclass
class Seen:
    """What the answers so far said of one task."""

    steps: int = 0
    terminal: bool = False
    result: dict[str, Any] | None = None


@dataclass
class TaskTraffic:
    """Creators and one follower on one cluster; `max_live` bounds the unfinished tasks (the principal's cap)."""

    url: str
    call: PrimesCall
    max_live: int = 12
    poll_seconds: float = 0.2
    acknowledged: dict[str, float] = field(default_factory=dict)
    seen: dict[str, Seen] = field(default_factory=dict)
    regressions: list[tuple[str, str]] = field(default_factory=list)
    calls: list[CallLog] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    """Acknowledged tasks `tasks/get` does not find once the faults are over."""
    seen_missing: set[str] = field(default_factory=set)
    """Acknowledged tasks `tasks/get` answered "not found" for at some moment."""
    probes: list[CallLog] = field(default_factory=list)
    """The probes' calls (`_probe`): what the failover's outage is read from."""
    probe_tasks: dict[str, float] = field(default_factory=dict)
    """The one-step tasks the probes created (acknowledged creations too: checked at the end)."""
    _ids: int = 0

    async def run(self, stop: asyncio.Event, creators: int = 2) -> None:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=None)) as http:
            await asyncio.gather(
                *(self._create(http, stop) for _ in range(creators)), self._follow(http, stop), self._probe(http, stop)
            )

    async def _probe(self, http: httpx.AsyncClient, stop: asyncio.Event) -> None:
        """Every `PROBE_SECONDS` a task call that does not wait for the one before: a `tasks/get` of a known
        task and the creation of a one-step task in turn, so a failover shows as a run of failed or stalled
        probes however long each call hangs."""
        pending: set[asyncio.Task[None]] = set()
        tick = 0
        while not stop.is_set():
            if len(pending) < MAX_PROBES:
                probe = asyncio.create_task(self._probe_once(http, create=bool(tick % 2)))
                pending.add(probe)
                probe.add_done_callback(pending.discard)
            tick += 1
            await asyncio.sleep(PROBE_SECONDS)
        await asyncio.gather(*pending, return_exceptions=True)

    async def _probe_once(self, http: httpx.AsyncClient, *, create: bool) -> None:
        if create:
            params = {
                "_meta": request_meta(with_tasks({})),
                "name": "count_primes",
                "arguments": {"limit": PROBE_LIMIT},
            }
            result, _ = await self._rpc(http, "tools/call", params, self.probes)
            if result is not None and result.get("resultType") == TASK_RESULT_TYPE:
                self.probe_tasks[str(result[TASK_ID_PARAM])] = time.monotonic()
            return
        target = next(iter(self.acknowledged), None)
        if target is not None:
            await self._rpc(
                http, TASKS_GET, {TASK_ID_PARAM: target, "_meta": request_meta(with_tasks({}))}, self.probes
            )

    async def finish(self, seconds: float) -> None:
        """Follow every task to its end (for at most `seconds`), then ask once more for each: the final audit."""
        deadline = time.monotonic() + seconds
        async with httpx.AsyncClient(timeout=30) as http:
            while self._live() and time.monotonic() < deadline:
                await self._poll_all(http)
                await asyncio.sleep(self.poll_seconds)
            for task_id in [*self.acknowledged, *self.probe_tasks]:
                await self._get(http, task_id, final=True)

    def all_calls(self) -> list[CallLog]:
        return self.calls + self.probes

    def unfinished(self) -> int:
        return len(self._live())

    def found_again(self) -> int:
        """Tasks seen missing at some moment and found afterwards (a read answered from an older copy)."""
        return len(self.seen_missing - self.lost)

    def correct(self) -> int:
        """Tasks (the probes' included) whose result has the exact prime count."""
        return sum(1 for task_id, s in self.seen.items() if s.result is not None and self._exact(task_id, s.result))

    def wrong(self) -> int:
        """Tasks that completed with any other result."""
        return sum(1 for task_id, s in self.seen.items() if s.result is not None and not self._exact(task_id, s.result))

    def _exact(self, task_id: str, result: dict[str, Any]) -> bool:
        limit = PROBE_LIMIT if task_id in self.probe_tasks else self.call.limit
        return bool(result.get("structuredContent") == {"count": KNOWN_COUNTS[limit]})

    def _live(self) -> list[str]:
        return [t for t in self.acknowledged if t not in self.lost and not self.seen.get(t, Seen()).terminal]

    async def _create(self, http: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if len(self._live()) >= self.max_live:
                await asyncio.sleep(0.05)
                continue
            params = {"_meta": request_meta(with_tasks({})), "name": "count_primes", "arguments": self.call.arguments}
            result, reason = await self._rpc(http, "tools/call", params)
            if result is not None and result.get("resultType") == TASK_RESULT_TYPE:
                task_id = str(result[TASK_ID_PARAM])
                self.acknowledged[task_id] = time.monotonic()
                self._note(task_id, result)
            elif result is not None:
                self.calls[-1] = replace(self.calls[-1], ok=False, reason="not a task")
            if reason:
                await asyncio.sleep(0.1)

    async def _follow(self, http: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._poll_all(http)
            await asyncio.sleep(self.poll_seconds)

    async def _poll_all(self, http: httpx.AsyncClient) -> None:
        for task_id in self._live():
            await self._get(http, task_id)

    async def _get(self, http: httpx.AsyncClient, task_id: str, *, final: bool = False) -> None:
        params = {TASK_ID_PARAM: task_id, "_meta": request_meta(with_tasks({}))}
        result, reason = await self._rpc(http, TASKS_GET, params)
        if result is not None:
            self._note(task_id, result)
        elif reason == "unknown_task":
            (self.lost if final else self.seen_missing).add(task_id)

    def _note(self, task_id: str, result: dict[str, Any]) -> None:
        status = str(result.get("status"))
        match = _STEPS.match(str(result.get("statusMessage") or ""))
        steps = int(match.group(1)) if match else 0
        before = self.seen.setdefault(task_id, Seen())
        if before.terminal and status not in TERMINAL:
            self.regressions.append((task_id, f"seen {status} after a terminal status"))
        elif steps < before.steps:
            self.regressions.append((task_id, f"{steps} steps done after {before.steps}"))
        before.steps = max(before.steps, steps)
        if status in TERMINAL:
            before.terminal = True
            outcome = result.get("result")
            if status == "completed" and isinstance(outcome, dict):
                before.result = outcome

    async def _rpc(
        self, http: httpx.AsyncClient, method: str, params: dict[str, Any], log: list[CallLog] | None = None
    ) -> tuple[dict[str, Any] | None, str]:
        """One request: (result, "") or (None, why it failed); logged either way."""
        self._ids += 1
        started = time.monotonic()
        reason = ""
        result: dict[str, Any] | None = None
        try:
            reply = await http.post(
                self.url, content=encode_request(self._ids, method, params), headers=request_headers(method, params)
            )
            message = events.response(reply.headers.get("content-type", ""), reply.content) or {}
            if "result" in message:
                result = message["result"]
            else:
                error = message.get("error") or {}
                data = error.get("data")
                named = data.get("reason") if isinstance(data, dict) else None
                reason = str(named or f"HTTP {reply.status_code} {error.get('message', '')}"[:80])
        except (httpx.HTTPError, ValueError) as exc:
            reason = type(exc).__name__
        kind = "create" if method == "tools/call" else "get"
        (self.calls if log is None else log).append(CallLog(kind, started, time.monotonic(), not reason, reason))
        return result, reason


@dataclass
class StoreWriter:
    """Records and checkpoints written straight through `store` by `writers` loops, `commits` per record."""

    store: TaskStore
    writers: int = 4
    commits: int = 20
    acked: dict[str, int] = field(default_factory=dict)
    """Highest acknowledged revision of every record whose creation was acknowledged."""
    lost_creations: set[str] = field(default_factory=set)
    lost_checkpoints: dict[str, int] = field(default_factory=dict)
    """Per record: how many acknowledged revisions it lost."""
    unconfirmed: int = 0
    """Writes refused because too few replicas confirmed them in time (WAIT)."""
    failed: int = 0
    """Writes that failed otherwise (no primary reachable, a primary refusing writes without replicas)."""
    landed_unacknowledged: int = 0
    """Records found, at the end, at a revision beyond the acknowledged one (or created without an
    acknowledgement): writes that failed or went unconfirmed and were kept all the same."""
    unacknowledged_creations: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    """Seconds each acknowledged write took."""

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._write(stop, f"writer-{n}") for n in range(self.writers)))

    @property
    def acknowledged_writes(self) -> int:
        return len(self.latencies)

    async def audit(self, attempts: int = 20) -> None:
        """Read every record back once the faults are over, and count here only: a read during a failover may
        reach an old primary that came back (until the client's next recheck) and see a past that the
        new primary does not have."""
        for task_id in [*self.acked, *self.unacknowledged_creations]:
            for _ in range(attempts):
                try:
                    found = await _revision(self.store, task_id)
                    break
                except (RedisError, OSError):
                    await asyncio.sleep(0.5)
            else:
                continue  # unreadable: counted as nothing rather than guessed
            rev = found
            acked = self.acked.get(task_id)
            if acked is None:
                self.landed_unacknowledged += rev is not None
            elif rev is None:
                self.lost_creations.add(task_id)
            elif rev < acked:
                self.lost_checkpoints[task_id] = acked - rev
            elif rev > acked:
                self.landed_unacknowledged += 1

    async def _write(self, stop: asyncio.Event, principal: str) -> None:
        """One writer; its own principal, so writers do not contend for one cap (the creation's WATCH).

        `rev` is the revision it builds on: the acknowledged one, or one an unacknowledged write left (found by
        reading back after a refused or failed write). A record that reads as gone or older is left for the
        audit, and the writer starts a new one."""
        while not stop.is_set():
            now = now_ms()
            record = TaskRecord(
                secrets.token_urlsafe(24), principal, "bench", {}, Status.INPUT_REQUIRED, now, now, 3_600_000, 500
            )
            if not await self._acknowledged(self.store.create(record, max_live=1 << 30)):
                self.unacknowledged_creations.append(record.task_id)
                continue
            self.acked[record.task_id] = rev = 1
            for step in range(1, self.commits):
                if stop.is_set():
                    return
                if await self._acknowledged(self.store.commit(Stored(record, rev), replace(record, steps=step))):
                    rev += 1
                    self.acked[record.task_id] = rev
                    continue
                try:
                    found = await _revision(self.store, record.task_id)
                except (RedisError, OSError):
                    break  # no answer now: a new record (the audit reads this one back)
                if found is None or found < rev:
                    break  # gone or older (lost, or read from an old primary): the audit decides
                rev = found  # the same, or an unacknowledged write that landed: go on from it

    async def _acknowledged(self, write: Any) -> bool:
        started = time.monotonic()
        try:
            outcome = await write
        except NotReplicated:
            self.unconfirmed += 1
            return False
        except (RedisError, OSError, RuntimeError):  # RuntimeError: a creation that kept conflicting
            self.failed += 1
            await asyncio.sleep(0.05)
            return False
        if outcome is False:
            return False
        self.latencies.append(time.monotonic() - started)
        return True


@dataclass(frozen=True)
class WriterSummary:
    """What a `StoreWriter` counted, sent back from its process."""

    acknowledged: int
    lost_creations: int
    lost_checkpoints: int
    unconfirmed: int
    failed: int
    landed_unacknowledged: int
    latencies: list[float]
    crashed: str = ""
    """Why the writer stopped early, if it did (its counts up to then are still here)."""


class WriterProcess:
    """A `StoreWriter` in a process of its own, so its pace is not the benchmark's event loop's."""

    def __init__(self, sentinels: str, prefix: str, wait: WaitPolicy, writers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._ready, self._stop = context.Event(), context.Event()
        self._results: multiprocessing.Queue[WriterSummary] = context.Queue()
        self._process = context.Process(
            target=_write_until_stopped,
            args=(sentinels, prefix, wait, writers, self._ready, self._stop, self._results),
        )

    def start(self) -> WriterProcess:
        self._process.start()
        return self

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Until the process writes: its imports alone took over eight seconds on a busy machine, and a writer
        stopped before it started would count nothing."""
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the store writer did not start writing within {timeout:g} s")

    def stop(self, timeout: float = 300.0) -> WriterSummary:
        """Stop writing, audit every acknowledged record, and return the counts."""
        self._stop.set()
        summary = self._results.get(timeout=timeout)
        self._process.join(timeout)
        return summary

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()


def _write_until_stopped(
    sentinels: str, prefix: str, wait: WaitPolicy, writers: int, ready: Any, stop: Any, results: Any
) -> None:
    sealer = RecordSealer(FleetStateCodec(new_ring("bench"), max_token_bytes=1 << 20), READABLE_RECORD_FORMATS[1])
    target = RedisTarget(sentinels=parse_sentinels(sentinels.split(",")))
    writer = StoreWriter(TaskStore.connect(target, sealer, prefix=prefix, wait=wait), writers)

    async def scenario() -> None:
        stopped = asyncio.Event()
        load = asyncio.create_task(writer.run(stopped))
        ready.set()
        await asyncio.to_thread(stop.wait)  # the benchmark's signal, from the other process
        stopped.set()
        await load
        await writer.audit()
        await writer.store.close()

    crashed = ""
    try:
        asyncio.run(scenario())
    except Exception as exc:  # reported with the counts: the benchmark prints it rather than hang on the queue
        crashed = f"{type(exc).__name__}: {exc}"
    results.put(
        WriterSummary(
            writer.acknowledged_writes,
            len(writer.lost_creations),
            sum(writer.lost_checkpoints.values()),
            writer.unconfirmed,
            writer.failed,
            writer.landed_unacknowledged,
            writer.latencies,
            crashed,
        )
    )


async def _revision(store: TaskStore, task_id: str) -> int | None:
    """The record's revision as the primary has it now, or None when it is gone."""
    stored = await store.load(task_id)
    return None if stored is None else stored.rev
