"""What a soak watches, and how it tells growth from noise.

`Sampler` reads, every few seconds, the resident memory of every process of
the cluster (each worker, its step pool, the proxy, Redis) from /proc, and
Redis's own figures (`used_memory`, the key count, the slice stream's
length). `trend` fits a straight line through a series (least squares) and
says whether its slope stands out of the series' own scatter: a slope is
growth only when it is more than twice its standard error and the change it
predicts over the run is more than 2 % of the series' mean.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass, field

import redis

from benchmarks._cluster import _children
from mrtr_ops.local.cluster import LocalCluster

NOISE_SHARE = 0.02
"""A change over the run smaller than this share of the mean is noise, whatever its slope's significance."""


@dataclass(frozen=True)
class Trend:
    mean: float
    slope_per_hour: float
    stderr_per_hour: float
    hours: float

    @property
    def change(self) -> float:
        """What the slope predicts over the whole run."""
        return self.slope_per_hour * self.hours

    @property
    def verdict(self) -> str:
        significant = abs(self.slope_per_hour) > 2 * self.stderr_per_hour
        large = abs(self.change) > NOISE_SHARE * abs(self.mean) if self.mean else self.change != 0
        if not (significant and large):
            return "flat"
        return "grows" if self.slope_per_hour > 0 else "shrinks"


def trend(times: list[float], values: list[float]) -> Trend:
    """Least-squares line through (seconds, value) points: its slope per hour and the slope's standard error."""
    n = len(values)
    if n < 3:
        return Trend(statistics.fmean(values) if values else math.nan, 0.0, math.inf, 0.0)
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    sxx = sum((t - mean_t) ** 2 for t in times)
    if sxx == 0:
        return Trend(mean_v, 0.0, math.inf, 0.0)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / sxx
    residuals = [v - (mean_v + slope * (t - mean_t)) for t, v in zip(times, values, strict=True)]
    stderr = math.sqrt(sum(r * r for r in residuals) / (n - 2) / sxx)
    return Trend(mean_v, slope * 3600, stderr * 3600, (times[-1] - times[0]) / 3600)


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Series:
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, at: float, value: float) -> None:
        self.times.append(at)
        self.values.append(value)

    def between(self, start: float, end: float) -> Series:
        kept = [(t, v) for t, v in zip(self.times, self.values, strict=True) if start <= t <= end]
        return Series([t for t, _ in kept], [v for _, v in kept])


@dataclass
class Sampler:
    """Samples the cluster every `interval` seconds on a thread of its own, into named series."""

    cluster: LocalCluster
    redis_url: str
    prefix: str
    interval: float = 5.0
    series: dict[str, Series] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    started: float = field(default_factory=time.monotonic)

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def sample(self) -> None:
        at = time.monotonic() - self.started
        readings: dict[str, float] = {}
        for name, handle in self.cluster.workers.items():
            pid = handle.process.pid
            readings[f"{name} RSS"] = rss_mb(pid)
            readings[f"{name} step pool RSS"] = sum(rss_mb(child) for child in _children(pid))
        readings["proxy RSS"] = rss_mb(self.cluster.proxy_pid)
        if self.cluster.redis is not None and self.cluster.redis.pid is not None:
            readings["Redis RSS"] = rss_mb(self.cluster.redis.pid)
        for name, value in readings.items():
            self.series.setdefault(name, Series()).add(at, value)
        client = redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)
        try:
            memory = client.info("memory")
            self.series.setdefault("Redis used_memory", Series()).add(at, int(memory["used_memory"]) / 2**20)
            self.series.setdefault("Redis keys", Series()).add(at, float(client.dbsize()))
            stream = f"{self.prefix}slices"
            length = client.xlen(stream) if client.exists(stream) else 0
            self.series.setdefault("slice stream length", Series()).add(at, float(length))
        except (redis.RedisError, OSError):
            pass
        finally:
            client.close()

    def keys(self) -> int:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            return int(client.dbsize())
        finally:
            client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)
