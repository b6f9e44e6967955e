"""The task chaos run (`scripts/chaos --tasks N`): producers, the fault mix, histories, the checker, the report.

1. A fresh local cluster: `--workers` workers (the `chaos` pack on, history
   stream on, 150 ms slices, a 15 s run-time limit), one Redis or, with
   `--redis-ha`, a primary, replicas and sentinels.
2. `--producers` client processes (`mrtr_ops.chaos.producer`) create
   `--tasks` tasks in all through the proxy and follow each to its end, with
   plain MRTR calls among them, every operation in their histories.
3. Meanwhile the fault mix (`mrtr_ops.chaos.mix`) strikes every 0.25 s at
   docket's rates: Redis, a worker (kill -9), a toxic task, a zombie.
4. When the producers are done the mix stops, every fault is undone, and
   every acknowledged task is read once more (`read`), once it is terminal.
5. The store's history is read from Redis and the checker
   (`mrtr_ops.history.checker`) holds everything to the model; the report
   (`tasks_report`) says what it found.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from mrtr_client import AsyncClient, Client
from mrtr_client.errors import MrtrError
from mrtr_ops.chaos import producer
from mrtr_ops.chaos.mix import FaultMix, FaultRegistry, store_url
from mrtr_ops.chaos.tasks_report import Settings, write_report
from mrtr_ops.chaos.workload import TOXIC_ERRORS, expected, pick_toxic
from mrtr_ops.history.checker import Answer, FaultTime, Verdict, check
from mrtr_ops.history.client_ops import INFO, INVOKE, OK, OpLog, read_ops
from mrtr_ops.history.store_events import read_events
from mrtr_ops.local.cluster import DEFAULT_PACKS, ClusterConfig, LocalCluster
from mrtr_protocol.tasks import COMPUTE_META_KEY
from mrtr_test_packs.chaos_jobs import ENDLESS_RUN_MS
from mrtr_worker.tasks.store import GROUP

PREFIX = "chaos-tasks:"
DEAD_MS = 1_000
SLICE_MS = 150
WORKER_ENV = {
    "MRTR_WORKER_REDIS_PREFIX": PREFIX,
    "MRTR_WORKER_TASK_SLICE_MS": str(SLICE_MS),
    "MRTR_WORKER_TASK_DEAD_MS": str(DEAD_MS),
    "MRTR_WORKER_TASK_HISTORY_MAX": "5000000",
    "MRTR_WORKER_MAX_LIVE_TASKS": "1000",
    "MRTR_WORKER_MAX_SLICE_MS": "500",
}
"""Short slices (a task spans several, so faults land mid-task), the history on, and room for every task in flight
(one principal). The fleet's run-time limit stays at its default (an hour): on a starved machine a real task's
slices can take many times their CPU time, and the endless toxic task has its own limit (3 s)."""
STOP_SECONDS = (DEAD_MS / 1000 + 0.3, DEAD_MS / 1000 + 2.0)
"""A zombie stays frozen past its heartbeat's expiry: its slice is taken over before it wakes."""
READ_TIMEOUT = 300.0
"""Seconds the final reads wait for every acknowledged task to be terminal (after every fault was undone)."""


@dataclasses.dataclass(frozen=True)
class MixOptions:
    tasks: int
    producers: int = 2
    workers: int = 4
    concurrency: int = 12
    mrtr_every: int = 5
    seed: int = 1
    redis_ha: bool = False
    deadline: float = 1800.0
    rates: dict[str, float] = dataclasses.field(default_factory=dict)
    ensure: tuple[str, ...] = ()
    """Fault kinds done once each early in the run (`FaultMix`), whatever the draws."""


def expect(tool: str, arguments: dict[str, Any]) -> Answer:
    if tool in TOXIC_ERRORS:
        return Answer(error=TOXIC_ERRORS[tool])
    found = expected(tool, arguments)
    return Answer() if found is None else Answer(found.structured, found.steps)


def cluster_config(options: MixOptions, work_dir: Path) -> ClusterConfig:
    extra: dict[str, Any] = {}
    if options.redis_ha:
        if "redis_ha" not in {f.name for f in dataclasses.fields(ClusterConfig)}:
            raise SystemExit("this checkout's local cluster has no Redis with Sentinel (ClusterConfig.redis_ha)")
        extra["redis_ha"] = True
    return ClusterConfig(
        workers=options.workers,
        port=0,
        work_dir=work_dir,
        worker_env=dict(WORKER_ENV),
        tool_packs=(*DEFAULT_PACKS, "chaos"),
        ready_timeout=300,
        **extra,
    )


def run(options: MixOptions, out: Path, *, doc: Path | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.jsonl"):
        stale.unlink()
    config = cluster_config(options, out / "cluster")
    started = time.time()
    with LocalCluster(config) as cluster:
        print(f"chaos tasks: {options.workers} workers at {cluster.mcp_url}, seed {options.seed}", flush=True)
        verdict, registry, mix_kinds, ticks = _drive(cluster, options, out)
        ended = time.time()
    settings = Settings(
        tasks=options.tasks,
        producers=options.producers,
        workers=options.workers,
        concurrency=options.concurrency,
        seed=options.seed,
        redis_ha=options.redis_ha,
        slice_ms=SLICE_MS,
        dead_ms=DEAD_MS,
        max_run_ms=ENDLESS_RUN_MS,
        kinds={k.name: k.rate for k in mix_kinds},
        ticks=ticks,
        seconds=round(ended - started, 1),
    )
    summary = write_report(verdict, [r.as_json() for r in registry.records], settings, out, doc=doc)
    print((out / "summary.md").read_text())
    problems = summary["problems"]
    print(f"chaos tasks: report in {out}/ ({'OK' if not problems else 'PROBLEMS: ' + '; '.join(problems)})")
    return 1 if problems else 0


def _drive(cluster: LocalCluster, options: MixOptions, out: Path) -> tuple[Verdict, FaultRegistry, list[Any], int]:
    driver_log = OpLog(out / "driver.jsonl", "driver")
    deadline = time.time() + options.deadline
    holders = _Holders(cluster)
    registry = FaultRegistry(
        cluster,
        stop_seconds=STOP_SECONDS,
        toxic=lambda: _toxic(cluster.mcp_url, driver_log, deadline, options.seed),
        holders=holders,
        rates=options.rates,
    )
    producers = _start_producers(cluster.mcp_url, options, out)
    mix = FaultMix(registry, options.seed, options.ensure).start()
    try:
        for process in producers:
            process.wait(max(1.0, deadline - time.time() + 120))
        if not mix.wait_ensured(deadline - time.time()):
            print("chaos tasks: a fault kind asked for with --ensure was never done before the deadline", flush=True)
    finally:
        mix.stop()
        for process in producers:
            if process.poll() is None:
                process.kill()
                process.wait()
    print(f"chaos tasks: producers done after {mix.ticks} ticks; undoing the faults in progress", flush=True)
    registry.settle()
    for name, handle in list(cluster.workers.items()):
        if not handle.process.running:
            cluster.restart_worker(name)
    driver_log.close()
    ops = read_ops(out.glob("*.jsonl"))
    reader = OpLog(out / "reads.jsonl", "reader")
    _final_reads(cluster.mcp_url, reader, sorted({op.task for op in ops if op.f == "create" and op.task}))
    reader.close()
    holders.close()
    ops = read_ops(out.glob("*.jsonl"))
    with redis.Redis.from_url(store_url(cluster), decode_responses=True) as client:
        events = read_events(client, PREFIX)
    faults = [
        FaultTime(r.kind, r.victim, r.started) for r in registry.records if r.kind in ("worker-kill", "worker-stop")
    ]
    verdict = check(ops, events, expect, faults)
    (out / "faults.json").write_text(json.dumps([r.as_json() for r in registry.records], indent=2) + "\n")
    return verdict, registry, mix.kinds, mix.ticks


def _start_producers(url: str, options: MixOptions, out: Path) -> list[subprocess.Popen[bytes]]:
    share, extra = divmod(options.tasks, options.producers)
    processes = []
    for n in range(options.producers):
        name = f"p{n + 1}"
        argv = [
            sys.executable, "-m", "mrtr_ops.chaos.producer", "--url", url, "--out", str(out / f"{name}.jsonl"),
            "--name", name, "--count", str(share + (n < extra)), "--concurrency", str(options.concurrency),
            "--mrtr-every", str(options.mrtr_every), "--seed", str(options.seed * 100 + n),
            "--deadline", str(options.deadline),
        ]  # fmt: skip
        log = (out / f"{name}.log").open("wb")
        processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    return processes


_TOXIC_DRAWS = itertools.count(1)
"""One seeded draw per toxic task (each runs in a thread of its own)."""


def _toxic(url: str, log: OpLog, deadline: float, seed: int) -> None:
    """Queue one toxic task and follow it to its end (the driver's, as in docket's mix)."""
    tool = pick_toxic(random.Random(seed * 7919 + next(_TOXIC_DRAWS)))

    async def one() -> None:
        async with AsyncClient(url, policy=producer.PATIENT, task_policy=producer.POLLING) as client:
            await producer.follow_one(client, log, tool, {}, deadline)

    asyncio.run(one())


class _Holders:
    """Which workers hold a slice right now (the consumers with pending messages): where a fault hurts."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self._client: redis.Redis | None = None

    def __call__(self) -> set[str]:
        try:
            if self._client is None:
                self._client = redis.Redis.from_url(store_url(self._cluster), decode_responses=True, socket_timeout=1)
            consumers: Any = self._client.xinfo_consumers(f"{PREFIX}slices", GROUP)
            return {str(c["name"]) for c in consumers if int(c.get("pending", 0)) > 0}
        except Exception:  # Redis down or failing over: strike at random
            self.close()
            return set()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _final_reads(url: str, log: OpLog, task_ids: list[str]) -> None:
    """Read every acknowledged task once it is terminal (waiting up to `READ_TIMEOUT` in all)."""
    deadline = time.time() + READ_TIMEOUT
    with Client(url, policy=producer.PATIENT) as client:
        for task_id in task_ids:
            key = log.new_key()
            log.write(INVOKE, "read", key, task=task_id)
            while True:
                try:
                    snapshot = client.get_task(task_id)
                except MrtrError as exc:
                    if time.time() < deadline and "unavailable" in str(exc).lower():
                        time.sleep(0.5)
                        continue
                    log.write(INFO, "read", key, task=task_id, error=str(exc)[:300])
                    break
                if snapshot.terminal or time.time() >= deadline:
                    log.write(OK, "read", key, task=task_id, value=_read_value(snapshot.status, snapshot.raw))
                    break
                time.sleep(0.2)


def _read_value(status: str, raw: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = {"status": status}
    result = raw.get("result") or {}
    if status == "completed":
        meta = (result.get("_meta") or {}).get(COMPUTE_META_KEY) or {}
        value.update(structured=result.get("structuredContent"), steps=meta.get("steps"), isError=result.get("isError"))
    elif status == "failed":
        error = raw.get("error") or {}
        value.update(code=error.get("code"), message=error.get("message"), data=error.get("data"))
    return value
