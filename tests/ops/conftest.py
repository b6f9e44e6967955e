"""Fixtures for tests through the proxy: a local cluster per test module, as `scripts/cluster` runs it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_ops.waiting import wait_until

MakeCluster = Callable[..., LocalCluster]

FAST_SLICES = {"MRTR_WORKER_MIN_SLICE_MS": "50", "MRTR_WORKER_MAX_SLICE_MS": "300"}
"""Short time slices so a computation of a second or two hops several times."""


ADMIN_TOKEN = "cluster-operator-token"


@pytest.fixture(scope="session")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three workers that want the development issuer's tokens (and an operator token on /admin), short slices.

    Shared by the modules that only call it (test_auth_cluster, test_vault_browser): neither changes
    its membership or its settings, so one start serves both.
    """
    config = ClusterConfig(
        workers=3,
        port=0,
        work_dir=tmp_path_factory.mktemp("secured"),
        worker_env=dict(FAST_SLICES),
        auth=True,
        admin_token=ADMIN_TOKEN,
        ready_timeout=180.0,  # a busy CI machine starts slowly
    )
    cluster = LocalCluster(config).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cabled_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three workers the proxy reaches through cables (cut, pause, kill, drain), slices of at most 500 ms.

    Shared by the fault tests of test_faults and test_shedding: each takes it through `settle` first,
    which undoes what the test before did (a killed worker restarted, a drained one replaced).
    """
    config = ClusterConfig(
        workers=3,
        port=0,
        work_dir=tmp_path_factory.mktemp("cabled"),
        worker_env={"MRTR_WORKER_MAX_SLICE_MS": "500"},
        cables=True,
        ready_timeout=90,
    )
    cluster = LocalCluster(config).start()
    yield cluster
    cluster.stop()


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


def settle(cluster: LocalCluster, workers: int, *, timeout: float = 60.0) -> None:
    """Put a shared cluster back as a test found it: `workers` live workers, all in rotation, none computing.

    A test may kill a worker (restarted here, same identity), drain one (replaced by a new one),
    or leave a computation running on a worker it cut off (waited out: the next test picks the
    worker that computes *its* call by the computations gauge, which must start at 0).
    """
    for instance, handle in list(cluster.workers.items()):
        if not handle.process.running:
            cluster.restart_worker(instance)
    while len(cluster.workers) < workers:
        cluster.add_worker()
    cluster.lb.wait_for_backends([h.lb_url for h in cluster.workers.values()], timeout=timeout)

    def idle() -> bool:
        return all(cluster.worker_metric(i, "mrtr_worker_computations") == 0 for i in cluster.workers)

    wait_until(idle, timeout=timeout, interval=0.05, what="every worker of the shared cluster to be idle")
