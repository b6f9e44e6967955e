"""What the task half costs around its steps: a task's creation and following, a slice, a step's lease, a poll.

Tasks run on Redis: a creation writes the record and queues the first slice;
every slice is taken from the stream (XREADGROUP), begun (a fenced read of
the record), stepped with a lease check at each step boundary, and ended by
one transaction (the checkpoint, the acknowledgement, the next slice) whose
change is published, so the worker holding the client's listen pushes it
(`subscriptions/listen`, the client's default way to follow a task). The
simulator (`tasks.py`) needs each of those costs at the client, the proxy,
the worker's main process and Redis. They are measured as `hop_cost` does
for MRTR hops, by difference, on a real cluster of one worker, its proxy and
its Redis (the straggler rule off, so nothing but the slice length decides a
slice's end), with the client of the benchmarks following each task by push:

* **per slice**: the same 20-step task (`count_primes(100,000,000)`) with
  slices of 50 ms (a slice per step) and of 2,000 ms (one or two slices),
  interleaved: the CPU difference over the slice-count difference (the
  result's `_meta` counts the slices);
* **per step**: a task of 100 short steps against one of 10 over the same
  numbers, both in one slice: the lease checks and the step dispatch;
* **a task's own**: the 10-step task less its steps and its one slice: the
  creation, the listen and the result's push;
* **a poll**: `tasks/get` on a finished task, over and over.

Wall seconds come with each (medians' differences on an idle cluster), and
the checkpoint write's mean from the worker's own histogram
(`mrtr_worker_task_checkpoint_seconds`). CPU time comes in 10 ms ticks per
process, hence many tasks per figure.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._cluster import TOOL_PACKS, PrimesCall, stop_cluster
from benchmarks._load import cpu_seconds
from mrtr_client import AsyncClient, RetryPolicy
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.metrics_page import MetricsPage
from mrtr_worker.compute.policy import SheddingSettings

TWENTY = PrimesCall(100_000_000, 5_000_000)
"""The straggler-tasks benchmark's task: 20 steps of about 50 ms."""
TEN, HUNDRED = PrimesCall(10_000_000, 1_000_000), PrimesCall(10_000_000, 100_000)
"""The same numbers in 10 and in 100 steps (about a millisecond each): the difference is 90 steps' overhead."""
SHORT_SLICE_MS, LONG_SLICE_MS = 50, 2000
COMPUTE_META = "mrtr-cluster.dev/compute"
PATIENT = RetryPolicy(max_rounds=10_000, max_delivery_failures=16)


@dataclass
class Costs:
    """CPU seconds at each process, and wall seconds, of one thing."""

    client: float
    proxy: float
    worker: float
    """The worker's main process (its step processes left out: the steps are the model's step work)."""
    redis: float
    wall: float


@dataclass
class TaskCost:
    task: Costs
    """A task's own: creation, the listen and the pushed result, beyond its steps and slices."""
    slice: Costs
    """One slice more: take, begin, checkpoint transaction, the change pushed to the client."""
    step: Costs
    """One step more, in the worker's main process and Redis: the lease check and the step's dispatch."""
    poll: Costs
    """One `tasks/get`."""
    checkpoint_wall: float
    """Mean seconds of a checkpoint write (seal and transaction), from the worker's histogram."""
    load_average: float
    """The machine's one-minute load average when the measurement began (it is shared and noisy)."""
    measured_at: str = ""


Cpu = tuple[float, float, float, float]


@dataclass
class _Run:
    cpu: Cpu
    """client, proxy, worker, redis."""
    wall: float
    slices: int


def task_cost(runs: int = 10) -> TaskCost:
    """Measure on two one-worker clusters (short and long slices), `runs` tasks of each kind, interleaved."""
    with open("/proc/loadavg") as loadavg:
        load_average = float(loadavg.read().split()[0])
    work = Path(tempfile.mkdtemp(prefix="mrtr-task-cost-"))
    common = {**SheddingSettings(straggler_ratio=0).environment(), "MRTR_WORKER_TASK_LEASE_MS": "5000"}
    short = _cluster(work / "short", {**common, "MRTR_WORKER_TASK_SLICE_MS": str(SHORT_SLICE_MS)})
    long = _cluster(work / "long", {**common, "MRTR_WORKER_TASK_SLICE_MS": str(LONG_SLICE_MS)})
    try:
        short.start()
        long.start()
        found = asyncio.run(_measure(short, long, runs))
        checkpoint = _checkpoint_mean(short)
    finally:
        stop_cluster(short)
        stop_cluster(long)
    shutil.rmtree(work, ignore_errors=True)
    sliced, whole, ten, hundred, polls = found
    extra_slices = statistics.fmean(r.slices for r in sliced) - statistics.fmean(r.slices for r in whole)
    per_slice = _difference(sliced, whole, extra_slices)
    per_step = _difference(hundred, ten, HUNDRED.steps - TEN.steps)
    slices_ten = statistics.fmean(r.slices for r in ten)
    own = _costs(
        [
            max(0.0, _mean_cpu(ten, i) - TEN.steps * _cpu(per_step, i) - slices_ten * _cpu(per_slice, i))
            for i in range(4)
        ],
        statistics.median(r.wall for r in ten) - slices_ten * per_slice.wall,
    )
    poll = _costs([_mean_cpu(polls, i) for i in range(4)], statistics.median(r.wall for r in polls))
    measured_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return TaskCost(own, per_slice, per_step, poll, checkpoint, load_average, measured_at)


def _cluster(work: Path, env: dict[str, str]) -> LocalCluster:
    config = ClusterConfig(workers=1, port=0, tool_packs=TOOL_PACKS, work_dir=work, worker_env=env, ready_timeout=300)
    return LocalCluster(config)


async def _measure(
    short: LocalCluster, long: LocalCluster, runs: int
) -> tuple[list[_Run], list[_Run], list[_Run], list[_Run], list[_Run]]:
    found: tuple[list[_Run], list[_Run], list[_Run], list[_Run], list[_Run]] = ([], [], [], [], [])
    async with (
        AsyncClient(short.mcp_url, policy=PATIENT) as on_short,
        AsyncClient(long.mcp_url, policy=PATIENT) as on_long,
    ):
        await _task(on_short, short, TWENTY)  # warm-up: connections, step processes, the stream's group
        _, task_id = await _task(on_long, long, TEN)
        for _ in range(runs):  # interleaved, so a busy moment hits all alike
            found[0].append((await _task(on_short, short, TWENTY))[0])
            found[1].append((await _task(on_long, long, TWENTY))[0])
            found[2].append((await _task(on_long, long, TEN))[0])
            found[3].append((await _task(on_long, long, HUNDRED))[0])
        for _ in range(runs * 10):
            found[4].append(await _poll(on_long, long, task_id))
    return found


def _pids(cluster: LocalCluster) -> tuple[int, int, int]:
    worker = next(iter(cluster.workers.values())).process.pid
    redis = cluster.redis.pid if cluster.redis is not None else None
    if redis is None:
        raise RuntimeError("the task-cost cluster has no Redis")
    return cluster.proxy_pid, worker, redis


def _sample(cluster: LocalCluster) -> tuple[float, float, float, float]:
    proxy, worker, redis = _pids(cluster)
    return time.process_time(), cpu_seconds(proxy), cpu_seconds(worker), cpu_seconds(redis)


async def _task(client: AsyncClient, cluster: LocalCluster, call: PrimesCall) -> tuple[_Run, str]:
    before = _sample(cluster)
    started = time.perf_counter()
    done = await client.call_tool("count_primes", call.arguments, task=True)
    wall = time.perf_counter() - started
    after = _sample(cluster)
    if not call.correct(done) or done.task_id is None:
        raise RuntimeError("a task of the task-cost measurement gave a wrong answer or was no task")
    meta = (done.result.get("_meta") or {}).get(COMPUTE_META, {})
    return _Run(_less(after, before), wall, int(meta.get("slices", 1))), done.task_id


async def _poll(client: AsyncClient, cluster: LocalCluster, task_id: str) -> _Run:
    before = _sample(cluster)
    started = time.perf_counter()
    await client.get_task(task_id)
    wall = time.perf_counter() - started
    after = _sample(cluster)
    return _Run(_less(after, before), wall, 0)


def _less(after: tuple[float, float, float, float], before: tuple[float, float, float, float]) -> Cpu:
    return after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3]


def _mean_cpu(rows: list[_Run], index: int) -> float:
    return statistics.fmean(r.cpu[index] for r in rows)


def _cpu(costs: Costs, index: int) -> float:
    return (costs.client, costs.proxy, costs.worker, costs.redis)[index]


def _difference(more: list[_Run], fewer: list[_Run], by: float) -> Costs:
    """Per unit of what `more` has `by` more of than `fewer`: each process's mean CPU and the medians' wall."""
    if by <= 0:
        raise RuntimeError("the task-cost measurement's two schedules did not differ (slices or steps)")
    cpu = [max(0.0, (_mean_cpu(more, i) - _mean_cpu(fewer, i)) / by) for i in range(4)]
    wall = (statistics.median(r.wall for r in more) - statistics.median(r.wall for r in fewer)) / by
    return _costs(cpu, wall)


def _costs(cpu: list[float], wall: float) -> Costs:
    return Costs(client=cpu[0], proxy=cpu[1], worker=cpu[2], redis=cpu[3], wall=wall)


def _checkpoint_mean(cluster: LocalCluster) -> float:
    handle = next(iter(cluster.workers.values()))
    page = MetricsPage.parse(httpx.get(f"{handle.url}/metrics", timeout=10).text)
    total = page.value("mrtr_worker_task_checkpoint_seconds_sum") or 0.0
    count = page.value("mrtr_worker_task_checkpoint_seconds_count") or 0.0
    return total / count if count else 0.0
