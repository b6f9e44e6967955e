"""The randomized fault mix of the task chaos run: docket's driver, harsher, over a registry of fault kinds.

Every `TICK_SECONDS` one number is drawn; the kinds' rates (chances per
tick) are laid end to end and the number picks at most one. docket's mix is
the floor: Redis 1 %, a worker 9 %, a toxic task 5 %. Here a killed worker
gets SIGKILL (docket sends SIGTERM, a clean stop), and one more kind freezes
a worker running a slice (SIGSTOP) past its heartbeat, then wakes it: a
zombie, which the fencing must refuse.

Which Redis fault runs depends on the cluster: with Sentinel
(`ClusterConfig.redis_ha`, `scripts/cluster --redis-ha`) the primary is
killed with SIGKILL and the sentinels fail over (`redis-failover`); with one
Redis it is stopped and started again after docket's 5 s (`redis-restart`).
Each kind says what it needs, and `FaultRegistry.enabled` keeps only what
the cluster can do.

A fault acts in a thread of its own and returns at once (a restarted worker
takes seconds to be ready), so the ticks go on; a worker being restarted,
frozen or killed is not a victim again until it is back, one Redis fault
runs at a time, and one worker is always left running (docket's fleet of
four keeps running too: it starts the replacement before the next tick).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mrtr_ops.local.cluster import LocalCluster

TICK_SECONDS = 0.25


@dataclass
class FaultRecord:
    kind: str
    victim: str
    started: float
    """Unix seconds: when the fault was done (the kill, the stop)."""
    ended: float | None = None
    """When it was undone and the fleet whole again (restarted and in rotation, woken, Redis serving)."""
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "victim": self.victim,
            "started": self.started,
            "ended": self.ended,
            "detail": self.detail,
            "error": self.error,
        }


@dataclass(frozen=True)
class FaultKind:
    name: str
    rate: float
    """Chance per tick."""
    needs: str = ""
    """`ha`: only with Redis Sentinel; `single`: only with one Redis; empty: any cluster."""


KINDS = (
    FaultKind("redis-failover", 0.01, needs="ha"),
    FaultKind("redis-restart", 0.01, needs="single"),
    FaultKind("worker-kill", 0.09),
    FaultKind("toxic", 0.05),
    FaultKind("worker-stop", 0.02),
)
"""docket's rates for Redis, workers and toxic tasks; the stop (a zombie) is ours."""

REDIS_DOWN_SECONDS = 5.0
"""docket's: Redis stays down 5 s before it is started again (one Redis, no failover)."""


def redis_ha(cluster: LocalCluster) -> Any:
    """The cluster's Redis with Sentinel, if it runs one (`LocalCluster.redis_ha`, the HA branch); else None."""
    return getattr(cluster, "redis_ha", None)


def store_url(cluster: LocalCluster) -> str:
    """The URL of the Redis that holds the tasks now (with Sentinel: the current primary)."""
    ha = redis_ha(cluster)
    if ha is not None:
        return str(ha.primary().url)
    if cluster.redis_url is None:
        raise RuntimeError("the cluster runs no task store")
    return cluster.redis_url


def step_pool(pid: int) -> list[int]:
    """A worker's step-pool processes (Linux /proc): a container's death takes them with it."""
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    except OSError:
        return []


class FaultRegistry:
    """What each fault kind does to a local cluster; `enabled` is the mix this cluster supports."""

    def __init__(
        self,
        cluster: LocalCluster,
        *,
        stop_seconds: tuple[float, float],
        toxic: Callable[[], None],
        holders: Callable[[], set[str]],
        rates: dict[str, float] | None = None,
    ) -> None:
        self._cluster = cluster
        self._stop_seconds = stop_seconds
        self._toxic = toxic
        self._holders = holders
        self._rates = rates or {}
        self._busy: set[str] = set()
        """Workers being restarted, frozen or killed, and `redis` while a Redis fault runs."""
        self._lock = threading.Lock()
        self.records: list[FaultRecord] = []
        self._threads: list[threading.Thread] = []
        self.actions: dict[str, Callable[[random.Random], FaultRecord | None]] = {
            "redis-failover": self._redis_failover,
            "redis-restart": self._redis_restart,
            "worker-kill": self._worker_kill,
            "worker-stop": self._worker_stop,
            "toxic": self._toxic_task,
        }

    @property
    def ha(self) -> bool:
        return redis_ha(self._cluster) is not None

    def enabled(self) -> list[FaultKind]:
        kinds = []
        for kind in KINDS:
            if (kind.needs == "ha" and not self.ha) or (kind.needs == "single" and self.ha):
                continue
            rate = self._rates.get(kind.name, kind.rate)
            if rate > 0:
                kinds.append(FaultKind(kind.name, rate, kind.needs))
        return kinds

    def do(self, kind: str, rng: random.Random) -> FaultRecord | None:
        record = self.actions[kind](rng)
        if record is not None:
            with self._lock:
                self.records.append(record)
        return record

    def settle(self, timeout: float = 300.0) -> None:
        """Wait for every fault in progress to be undone (restarts ready, frozen workers woken, Redis back)."""
        deadline = time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    # --- the kinds ---------------------------------------------------------------------------------

    def _background(self, name: str, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _claim(self, rng: random.Random, prefer: set[str] | None = None) -> str | None:
        """A worker to strike: running, not already struck, and not the last one running."""
        with self._lock:
            running = [w for w, h in self._cluster.workers.items() if h.process.running and w not in self._busy]
            standing = [w for w in self._cluster.workers if w not in self._busy]
            if not running or len(standing) <= 1:
                return None
            preferred = sorted(set(running) & (prefer or set()))
            victim = rng.choice(preferred or sorted(running))
            self._busy.add(victim)
            return victim

    def _release(self, name: str) -> None:
        with self._lock:
            self._busy.discard(name)

    def _worker_kill(self, rng: random.Random) -> FaultRecord | None:
        victim = self._claim(rng, prefer=self._holders())
        if victim is None:
            return None
        handle = self._cluster.workers[victim]
        pool = step_pool(handle.process.pid)
        record = FaultRecord("worker-kill", victim, time.time())
        self._cluster.kill_worker(victim)
        for pid in pool:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        def restart() -> None:
            try:
                self._cluster.restart_worker(victim)  # a supervisor's restart: same name, back in rotation
            except Exception as exc:
                record.error = f"restart: {type(exc).__name__}: {exc}"
            finally:
                record.ended = time.time()
                self._release(victim)

        self._background(f"restart {victim}", restart)
        return record

    def _worker_stop(self, rng: random.Random) -> FaultRecord | None:
        holders = self._holders()
        victim = self._claim(rng, prefer=holders)
        if victim is None:
            return None
        hold = rng.uniform(*self._stop_seconds)
        record = FaultRecord("worker-stop", victim, time.time(), detail={"hold_s": round(hold, 2)})
        record.detail["held_a_slice"] = victim in holders
        self._cluster.pause_worker(victim)

        def wake() -> None:
            time.sleep(hold)  # the fault's own length: frozen past its heartbeat, not a wait for readiness
            self._cluster.resume_worker(victim)
            record.ended = time.time()
            self._release(victim)

        self._background(f"wake {victim}", wake)
        return record

    def _redis_restart(self, rng: random.Random) -> FaultRecord | None:
        server = self._cluster.redis
        if server is None or not self._take("redis"):
            return None
        record = FaultRecord("redis-restart", "redis", time.time(), detail={"down_s": REDIS_DOWN_SECONDS})
        server.stop()  # SIGTERM, like docket's container stop: the append-only file is written out

        def start() -> None:
            time.sleep(REDIS_DOWN_SECONDS)  # docket's outage length
            try:
                server.start()
            except Exception as exc:
                record.error = f"start: {type(exc).__name__}: {exc}"
            finally:
                record.ended = time.time()
                self._release("redis")

        self._background("redis start", start)
        return record

    def _redis_failover(self, rng: random.Random) -> FaultRecord | None:
        ha = redis_ha(self._cluster)
        if ha is None or not self._take("redis"):
            return None
        record = FaultRecord("redis-failover", "primary", time.time())

        def failover() -> None:
            try:
                killed, promoted = ha.failover()  # SIGKILL the primary, wait for the sentinels, old one rejoins
                record.detail.update(killed=killed.port, promoted=promoted.port)
            except Exception as exc:
                record.error = f"failover: {type(exc).__name__}: {exc}"
            finally:
                record.ended = time.time()
                self._release("redis")

        self._background("redis failover", failover)
        return record

    def _take(self, name: str) -> bool:
        with self._lock:
            if name in self._busy:
                return False
            self._busy.add(name)
            return True

    def _toxic_task(self, rng: random.Random) -> FaultRecord | None:
        record = FaultRecord("toxic", "-", time.time())
        self._background("toxic task", self._toxic)
        record.ended = record.started
        return record


ENSURE_EVERY_TICKS = 12
"""With `ensure`: one of the kinds named is done every this many ticks (3 s) until each was done once."""


class Faults(Protocol):
    """What the mix draws from: the kinds enabled and a way to do one (`FaultRegistry`)."""

    def enabled(self) -> list[FaultKind]: ...

    def do(self, kind: str, rng: random.Random) -> FaultRecord | None: ...


class FaultMix:
    """The ticking driver: draws a fault (or none) every tick until stopped.

    `ensure`: kinds done once each early in the run whatever the draws say (a short run in CI must meet every
    kind: at 1 % a tick, Redis's fault misses a minute-long run one time in ten); the draws go on as well."""

    def __init__(self, registry: Faults, seed: int, ensure: tuple[str, ...] = ()) -> None:
        self._registry = registry
        self._rng = random.Random(seed)
        self._kinds = registry.enabled()
        names = {kind.name for kind in self._kinds}
        self._ensure = [kind for kind in ensure if kind in names]
        self._ensured = threading.Event()
        """Set once every kind in `ensure` was done: a run must not end before (a fast machine's producers
        finished before the fourth kind's turn came)."""
        if not self._ensure:
            self._ensured.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault mix", daemon=True)
        self.ticks = 0

    @property
    def kinds(self) -> list[FaultKind]:
        return list(self._kinds)

    def start(self) -> FaultMix:
        self._thread.start()
        return self

    def wait_ensured(self, timeout: float) -> bool:
        """Wait until every kind in `ensure` was done (at most `timeout` s); False if one still was not."""
        return self._ensured.wait(max(0.0, timeout))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.ticks += 1
            if self._ensure and self.ticks % ENSURE_EVERY_TICKS == 0:
                if self._registry.do(self._ensure[0], self._rng) is not None:
                    self._ensure.pop(0)
                    if not self._ensure:
                        self._ensured.set()
                continue
            draw = self._rng.random()
            for kind in self._kinds:
                if draw < kind.rate:
                    self._registry.do(kind.name, self._rng)
                    break
                draw -= kind.rate
