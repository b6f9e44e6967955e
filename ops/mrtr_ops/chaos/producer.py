"""One producer of the task chaos mix: a client process creating tasks through the proxy and following each.

`python -m mrtr_ops.chaos.producer --url URL --count N --out FILE [...]`: keeps
`--concurrency` tasks in flight until `--count` creations were acknowledged,
with a plain MRTR call every `--mrtr-every` tasks, every operation written to
its history (`mrtr_ops.history.client_ops`). It retries what a fault refused
(a creation answered "task store unavailable" is *info*: it may have landed,
and a new creation is tried), and follows every acknowledged task to its
terminal status, polling again after any error, until `--deadline` seconds.
The toxic tasks use the same code (`follow_one`), from the fault driver.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from mrtr_client import AsyncClient, RetryPolicy, TaskExchange, TaskPolicy
from mrtr_client.errors import MrtrError, RpcError, TaskCancelled, TaskFailed
from mrtr_client.trace import CallResult
from mrtr_ops.chaos.workload import MRTR_CASES, pick_task
from mrtr_ops.history.client_ops import FAIL, INFO, INVOKE, OK, OpLog
from mrtr_protocol.tasks import COMPUTE_META_KEY

PATIENT = RetryPolicy(max_rounds=10_000, max_delivery_failures=30, backoff_cap=1.0)
"""A client that outlasts a fault: a killed worker's round is retried elsewhere, a Redis restart waited out."""
POLLING = TaskPolicy(push=False, max_wait=None)
"""Polls at the server's `pollIntervalMs`: a stream per task would only be cut by every kill."""
REFUSED = -32600
"""A definite refusal of a creation (the per-principal cap): nothing was created."""
_PAUSE = 0.5


def final_key(log: OpLog, task_id: str) -> str:
    return f"{log.process}-final-{task_id}"


def _completed(done: CallResult) -> dict[str, Any]:
    meta = (done.result.get("_meta") or {}).get(COMPUTE_META_KEY) or {}
    return {"status": "completed", "structured": done.structured, "steps": meta.get("steps"), "isError": done.is_error}


async def create_one(
    client: AsyncClient, log: OpLog, tool: str, arguments: dict[str, Any], deadline: float
) -> tuple[str, CallResult | BaseException] | None:
    """Create a task (retrying creations that may not have landed) and follow it; (task id, outcome) or None."""
    while time.time() < deadline:
        key = log.new_key()
        log.write(INVOKE, "create", key, tool=tool, arguments=arguments)
        created: list[str] = []

        def observe(exchange: TaskExchange, key: str = key, created: list[str] = created) -> None:
            if not created and exchange.method == "tools/call" and exchange.snapshot is not None:
                created.append(exchange.snapshot.task_id)
                log.write(OK, "create", key, tool=tool, arguments=arguments, task=created[0])
                log.write(INVOKE, "final", final_key(log, created[0]), tool=tool, arguments=arguments, task=created[0])

        try:
            done: CallResult | BaseException = await client.call_tool(tool, arguments, task=True, on_task=observe)
        except (TaskFailed, TaskCancelled) as exc:
            done = exc
        except (MrtrError, httpx.HTTPError, OSError) as exc:
            if created:
                return created[0], exc
            definite = isinstance(exc, RpcError) and exc.code == REFUSED
            log.write(FAIL if definite else INFO, "create", key, tool=tool, arguments=arguments, error=str(exc)[:300])
            await asyncio.sleep(_PAUSE)
            continue
        if not created:  # answered at once, not as a task: a bug the checker must see
            log.write(OK, "create", key, tool=tool, arguments=arguments, value={"not_a_task": True})
            return None
        return created[0], done
    return None


async def follow_one(client: AsyncClient, log: OpLog, tool: str, arguments: dict[str, Any], deadline: float) -> None:
    """Create one task and follow it to its end, re-following after errors (a Redis outage refuses polls)."""
    made = await create_one(client, log, tool, arguments, deadline)
    if made is None:
        return
    task_id, outcome = made
    key = final_key(log, task_id)
    while True:
        if isinstance(outcome, CallResult):
            log.write(OK, "final", key, tool=tool, arguments=arguments, task=task_id, value=_completed(outcome))
            return
        if isinstance(outcome, TaskFailed):
            value = {"status": "failed", "code": outcome.code, "message": str(outcome.message), "data": outcome.data}
            log.write(OK, "final", key, tool=tool, arguments=arguments, task=task_id, value=value)
            return
        if isinstance(outcome, TaskCancelled):
            log.write(OK, "final", key, tool=tool, arguments=arguments, task=task_id, value={"status": "cancelled"})
            return
        if time.time() >= deadline:
            log.write(INFO, "final", key, tool=tool, arguments=arguments, task=task_id, error=str(outcome)[:300])
            return
        await asyncio.sleep(_PAUSE)
        try:
            outcome = await client.wait_task(task_id)
        except (TaskFailed, TaskCancelled) as exc:
            outcome = exc
        except (MrtrError, httpx.HTTPError, OSError) as exc:
            outcome = exc


async def mrtr_call(client: AsyncClient, log: OpLog, tool: str, arguments: dict[str, Any]) -> None:
    key = log.new_key()
    log.write(INVOKE, "mrtr", key, tool=tool, arguments=arguments)
    try:
        done = await client.call_tool(tool, arguments)
    except (MrtrError, httpx.HTTPError, OSError) as exc:
        log.write(INFO, "mrtr", key, tool=tool, arguments=arguments, error=str(exc)[:300])
        return
    log.write(OK, "mrtr", key, tool=tool, arguments=arguments, value={"structured": done.structured})


async def produce(
    url: str, log: OpLog, *, count: int, concurrency: int, mrtr_every: int, seed: int, seconds: float
) -> int:
    rng = random.Random(seed)
    deadline = time.time() + seconds
    slots = asyncio.Semaphore(concurrency)
    running: set[asyncio.Task[None]] = set()

    async def bounded(work: Any) -> None:
        try:
            await work
        finally:
            slots.release()

    async with AsyncClient(url, policy=PATIENT, task_policy=POLLING) as client:
        for n in range(count):
            if time.time() >= deadline:
                break
            await slots.acquire()
            tool, arguments = pick_task(rng)
            job = asyncio.create_task(bounded(follow_one(client, log, tool, arguments, deadline)))
            running.add(job)
            job.add_done_callback(running.discard)
            if mrtr_every and n % mrtr_every == 0:
                await slots.acquire()
                tool, arguments = rng.choice(MRTR_CASES)
                call = asyncio.create_task(bounded(mrtr_call(client, log, tool, arguments)))
                running.add(call)
                call.add_done_callback(running.discard)
        if running:
            await asyncio.wait(running)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mrtr_ops.chaos.producer", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--url", required=True, help="the proxy's /mcp URL")
    parser.add_argument("--out", type=Path, required=True, help="the history file (JSON lines, appended)")
    parser.add_argument("--name", default="p1", help="this producer's name in the history")
    parser.add_argument("--count", type=int, default=100, help="tasks to create")
    parser.add_argument("--concurrency", type=int, default=12, help="tasks (and calls) in flight at once")
    parser.add_argument("--mrtr-every", type=int, default=5, help="a plain MRTR call every N tasks (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds before unfinished work is left")
    args = parser.parse_args(argv)
    log = OpLog(args.out, args.name)
    try:
        return asyncio.run(
            produce(
                args.url,
                log,
                count=args.count,
                concurrency=args.concurrency,
                mrtr_every=args.mrtr_every,
                seed=args.seed,
                seconds=args.deadline,
            )
        )
    finally:
        log.close()


if __name__ == "__main__":
    sys.exit(main())
