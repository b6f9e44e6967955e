"""Shared fixtures: real worker processes on 127.0.0.1, started the way the local cluster starts them."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mrtr_ops.local.process import ManagedProcess, WorkerSpec, free_port
from mrtr_ops.local.redis import RedisServer
from mrtr_worker.sealing.keyring import KeyRing, new_ring
from tests.fuzz.budget import PROFILE
from tests.fuzz.tally import TALLY, TALLY_KEY
from tests.support.wire import McpHttp

_instance_numbers = itertools.count(1)

# The compose end-to-end checks need a running compose cluster; `scripts/compose-e2e` starts one
# and runs them. The ordinary test run does not collect them (it neither runs nor skips them).
collect_ignore = [] if os.environ.get("MRTR_COMPOSE_E2E") == "1" else ["e2e/compose"]
# Likewise the swarm end-to-end checks: `scripts/swarm-e2e` joins a swarm and runs them.
if os.environ.get("MRTR_SWARM_E2E") != "1":
    collect_ignore.append("e2e/swarm")
# And the compose project with Sentinel: `scripts/compose-redis-ha-e2e` starts it and runs them.
if os.environ.get("MRTR_COMPOSE_HA_E2E") != "1":
    collect_ignore.append("e2e/compose_ha")
# And the fleet check on Docker (our worker's images): `scripts/fleet-check-compose-e2e` runs it.
if os.environ.get("MRTR_FLEET_CHECK_COMPOSE_E2E") != "1":
    collect_ignore.append("e2e/fleetcheck_compose")

PROCESS_FIXTURES = frozenset(
    {"start_worker", "worker", "make_cluster", "secured_cluster", "cabled_cluster", "target", "redis_server"}
)
"""Fixtures that start real worker, proxy or cluster processes: a test that uses one is `slow`.

`pytest -m "not slow"` is the inner loop (unit tests, in-process proxies, manifests: seconds);
tests that start processes some other way carry `pytest.mark.slow` themselves.
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: take in a worker's fuzz tally (`tests/fuzz/conftest.py` sends it)."""
    tally = getattr(node, "workeroutput", {}).get(TALLY_KEY)
    if tally is not None:
        TALLY.merge(tally)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzz cases tried per property, so the CI log shows how much was fuzzed (here: the controller sees all)."""
    if not TALLY.cases:
        return
    terminalreporter.section(f"fuzz: cases tried per property (hypothesis profile {PROFILE!r})")
    for line in TALLY.lines():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> KeyRing:
    return new_ring("test-1")


@pytest.fixture(scope="session")
def keyring_file(tmp_path_factory: pytest.TempPathFactory, keyring: KeyRing) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "keyring.json"
    path.write_text(keyring.dumps())
    return path


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


StartWorker = Callable[..., tuple[WorkerSpec, ManagedProcess]]


@pytest.fixture(scope="module")
def start_worker(keyring_file: Path, log_dir: Path) -> Iterator[StartWorker]:
    """Start a worker process (stopped at the end of the module); returns its spec and process."""
    started: list[ManagedProcess] = []

    def start(
        *,
        version: int = 1,
        tool_packs: tuple[str, ...] = ("demo",),
        keyring_path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[WorkerSpec, ManagedProcess]:
        spec = WorkerSpec(
            instance_id=f"w{next(_instance_numbers)}",
            port=free_port(),
            keyring_file=keyring_path or keyring_file,
            version=version,
            tool_packs=tool_packs,
            extra_env=tuple((env or {}).items()),
        )
        process = spec.process(log_dir).start()
        started.append(process)
        process.wait_ready()
        return spec, process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def worker(keyring_file: Path, log_dir: Path) -> Iterator[WorkerSpec]:
    """One default worker (version 1, the demo pack) for every module that only calls it: a start saved per module.

    A test that changes a worker (stops it, switches its state format, reloads its ring) starts its own.
    """
    spec = WorkerSpec(instance_id=f"w{next(_instance_numbers)}", port=free_port(), keyring_file=keyring_file)
    process = spec.process(log_dir).start()
    try:
        process.wait_ready()
        yield spec
    finally:
        process.stop()


McpTo = Callable[[WorkerSpec], McpHttp]


@pytest.fixture
def mcp_to() -> Iterator[McpTo]:
    """Open raw MCP exchanges to workers (closed after the test)."""
    opened: list[McpHttp] = []

    def open_(spec: WorkerSpec) -> McpHttp:
        opened.append(McpHttp(f"{spec.url}/mcp"))
        return opened[-1]

    yield open_
    for client in opened:
        client.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real Redis (Debian's redis-server, append-only file on) for the session's task-store tests.

    Tests that need a clean store use their own key prefix or database; tests that restart or kill
    Redis start their own `RedisServer` instead of this shared one.
    """
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
