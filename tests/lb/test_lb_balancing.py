"""`MRTR_LB_BALANCE`: two choices and least request pick by the requests open on each backend; round robin stays the
default. The pickers as tables first, then through the proxy with stand-in backends holding requests open."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import aiohttp
import pytest
from pydantic import ValidationError

from mrtr_lb import Settings
from mrtr_lb.backends import Backend, BackendPool
from mrtr_lb.balancing import Balance, LeastRequest, TwoChoices, picker
from tests.lb.standin import MakeBackend, MakeLB, jsonrpc_body, wait_until

HOLD = {"X-Test-Mode": "hold"}


def _backends(*in_flight: int) -> list[Backend]:
    return [Backend(f"http://b{i}", healthy=True, in_flight=n) for i, n in enumerate(in_flight)]


def test_two_choices_takes_the_less_loaded_of_two_distinct_draws() -> None:
    backends = _backends(5, 0)
    choose = TwoChoices(random.Random(1))
    assert {choose(backends, ()) for _ in range(50)} == {backends[1]}  # two backends: both are always drawn


def test_two_choices_never_picks_an_ineligible_or_excluded_backend() -> None:
    backends = _backends(9, 0, 0, 0)
    backends[1].healthy, backends[2].drained = False, True
    choose = TwoChoices(random.Random(2))
    assert {choose(backends, {backends[3]}) for _ in range(50)} == {backends[0]}  # the only one left, loaded or not
    assert choose(backends, {backends[0], backends[3]}) is None


def test_two_choices_spreads_over_equal_backends() -> None:
    backends = _backends(0, 0, 0, 0)
    choose = TwoChoices(random.Random(3))
    seen = Counter(choose(backends, ()) for _ in range(400))
    assert len(seen) == 4
    assert min(seen.values()) > 50


def test_least_request_takes_the_fewest_open_and_breaks_ties_in_turn() -> None:
    backends = _backends(3, 1, 2, 1)
    choose = LeastRequest()
    assert [choose(backends, ()) for _ in range(3)] == [backends[1], backends[3], backends[1]]
    assert choose(backends, {backends[1], backends[3]}) is backends[2]
    backends[0].drained = True
    assert choose(_backends(), ()) is None


def test_the_pool_picks_with_its_picker_and_round_robin_without() -> None:
    pool = BackendPool(["http://a", "http://b"])
    for backend in pool:
        pool.set_health(backend, True)
    a, b = list(pool)
    a.in_flight = 4
    assert [pool.pick().url for _ in range(2)] == ["http://a", "http://b"]  # type: ignore[union-attr]
    pool.picker = picker(Balance.LEAST_REQUEST)
    assert [pool.pick() for _ in range(2)] == [b, b]
    assert picker(Balance.ROUND_ROBIN) is None


def test_the_setting_takes_the_three_names_and_refuses_others() -> None:
    assert Settings(backends=["http://a"]).balance is Balance.ROUND_ROBIN
    chosen = Settings.model_validate({"backends": ["http://a"], "balance": "two_choices"})
    assert chosen.balance is Balance.TWO_CHOICES
    with pytest.raises(ValidationError, match="round_robin"):
        Settings.model_validate({"backends": ["http://a"], "balance": "random"})


@pytest.mark.parametrize("balance", ["two_choices", "least_request"])
async def test_a_backend_with_a_request_open_is_passed_over(
    balance: str, make_backend: MakeBackend, make_lb: MakeLB, client: aiohttp.ClientSession
) -> None:
    first, second = await make_backend("first"), await make_backend("second")
    lb = await make_lb(backends=[first.url, second.url], balance=balance)

    async def post(headers: dict[str, str]) -> str | None:
        async with client.post(f"{lb.url}/mcp", data=jsonrpc_body(), headers=headers) as resp:
            await resp.read()
            return resp.headers.get("X-Worker-Id")

    held = asyncio.ensure_future(post(HOLD))
    await wait_until(lambda: _async(first.holding + second.holding == 1), what="one request held")
    loaded, other = (first, second) if first.holding else (second, first)
    seen = Counter([await post({}) for _ in range(6)])
    assert seen == {other.worker_id: 6}  # round robin would have sent three to the loaded one
    loaded.release.set()
    assert await held == loaded.worker_id


async def _async(value: bool) -> bool:
    return value
