"""Fixtures: stand-in workers, a proxy in front of them, and an HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from mrtr_lb import RunningLB, Settings, start_server
from mrtr_lb.discovery import Resolver
from tests.lb.standin import (
    ADMIN_TOKEN,
    MakeBackend,
    MakeLB,
    MakeRude,
    RudeBackend,
    RudeMode,
    StandIn,
    backend_states,
    wait_until,
)


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


@pytest.fixture
async def make_backend() -> AsyncIterator[MakeBackend]:
    started: list[StandIn] = []

    async def make(worker_id: str) -> StandIn:
        backend = await StandIn(worker_id).start()
        started.append(backend)
        return backend

    yield make
    for backend in started:
        await backend.stop()


@pytest.fixture
async def make_rude() -> AsyncIterator[MakeRude]:
    started: list[RudeBackend] = []

    async def make(mode: RudeMode) -> RudeBackend:
        backend = await RudeBackend(mode).start()
        started.append(backend)
        return backend

    yield make
    for backend in started:
        await backend.stop()


@pytest.fixture
async def make_lb(client: aiohttp.ClientSession) -> AsyncIterator[MakeLB]:
    """Start a proxy (both listeners on ephemeral ports, the test operator token) and wait until every
    static backend is in rotation."""
    started: list[RunningLB] = []

    async def make(*, resolver: Resolver | None = None, wait: bool = True, **overrides: Any) -> RunningLB:
        config: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "admin_port": 0,
            "admin_token": ADMIN_TOKEN,
            "health_interval": 0.05,
            "backends_file_interval": 0.02,
        }
        config.update(overrides)
        lb = await start_server(Settings(**config), resolver=resolver)
        started.append(lb)
        expected = len(config.get("backends", []))
        if wait and expected:

            async def all_healthy() -> bool:
                states = await backend_states(client, lb)
                return len(states) == expected and all(s["state"] == "healthy" for s in states.values())

            await wait_until(all_healthy, what="backends healthy")
        return lb

    yield make
    for lb in started:
        await lb.stop()
