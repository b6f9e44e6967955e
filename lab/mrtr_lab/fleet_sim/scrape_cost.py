"""What the why-shed benchmark's own step counter costs: a scrape of a worker's `/metrics`, both ends.

`mrtr_lab._why_shed.fleet.Steps` reads every worker's step counter every
0.25 s, from a thread of the benchmark's process (where the callers run
too), and `leave` polls a leaving worker every 50 ms: a worker's main process
renders its page, the benchmark fetches and parses it, both on the cluster's
two cores. The straggler benchmark scrapes nothing. So the model's replay of
a why-shed cell pays this CPU where the real run paid it, at the cost
measured here: one worker of its own, its page scraped over and over.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._cluster import TOOL_PACKS, stop_cluster
from benchmarks._load import cpu_seconds
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.metrics_page import MetricsPage


@dataclass
class ScrapeCost:
    worker: float
    """CPU seconds of the worker's main process per scrape (render the page, answer)."""
    scraper: float
    """CPU seconds of the benchmark's process per scrape (fetch, parse)."""


def scrape_cost(scrapes: int = 300, rounds: int = 3) -> ScrapeCost:
    """The mean CPU of a scrape, at both ends, over `rounds` of `scrapes` (CPU time comes in 10 ms ticks)."""
    work = Path(tempfile.mkdtemp(prefix="mrtr-scrape-"))
    cluster = LocalCluster(
        ClusterConfig(workers=1, port=0, tool_packs=TOOL_PACKS, work_dir=work, redis=False, ready_timeout=300)
    )
    try:
        cluster.start()
        handle = next(iter(cluster.workers.values()))
        worker, scraper = 0.0, 0.0
        with httpx.Client(timeout=5.0) as http:
            MetricsPage.parse(http.get(f"{handle.url}/metrics").text)  # warm-up: the connection, the parser
            for _ in range(rounds):
                before = cpu_seconds(handle.process.pid), time.process_time()
                for _ in range(scrapes):
                    MetricsPage.parse(http.get(f"{handle.url}/metrics").text)
                worker += cpu_seconds(handle.process.pid) - before[0]
                scraper += time.process_time() - before[1]
        count = scrapes * rounds
        return ScrapeCost(worker / count, scraper / count)
    finally:
        stop_cluster(cluster)
        shutil.rmtree(work, ignore_errors=True)
