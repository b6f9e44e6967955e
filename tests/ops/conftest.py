"""Fixtures for tests through the proxy: a local cluster per test module, as `scripts/cluster` runs it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mrtr_ops.local.cluster import ClusterConfig, LocalCluster

MakeCluster = Callable[..., LocalCluster]

FAST_SLICES = {"MRTR_WORKER_MIN_SLICE_MS": "50", "MRTR_WORKER_MAX_SLICE_MS": "300"}
"""Short time slices so a computation of a second or two hops several times."""


@pytest.fixture(scope="module")
def make_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeCluster]:
    started: list[LocalCluster] = []

    def make(workers: int = 3, worker_env: dict[str, str] | None = None, **kwargs: object) -> LocalCluster:
        work_dir: Path = tmp_path_factory.mktemp("cluster")
        config = ClusterConfig(workers=workers, port=0, work_dir=work_dir, worker_env=worker_env or {}, **kwargs)  # type: ignore[arg-type]
        cluster = LocalCluster(config).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()
