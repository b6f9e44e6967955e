"""The ops tools' small shared helpers: waiting for a condition, percentiles, the chaos fault registry."""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest

from mrtr_ops.chaos.plan import KINDS
from mrtr_ops.chaos.run import ChaosRun
from mrtr_ops.percentiles import percentile
from mrtr_ops.waiting import wait_until, wait_until_async


def test_a_wait_returns_the_first_truthy_answer() -> None:
    answers = iter([None, 0, "w2"])
    assert wait_until(lambda: next(answers), timeout=5, interval=0, what="a worker") == "w2"


def test_a_wait_that_runs_out_names_what_it_waited_for() -> None:
    with pytest.raises(TimeoutError, match="waiting for w9 in the proxy's rotation"):
        wait_until(lambda: False, timeout=0.05, interval=0.01, what="w9 in the proxy's rotation")


def test_the_async_wait_awaits_its_predicate() -> None:
    counter = itertools.count()

    async def third() -> bool:
        return next(counter) >= 2

    assert asyncio.run(wait_until_async(third, timeout=5, interval=0, what="the third look")) is True


def test_percentiles_interpolate_between_the_closest_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))
    assert percentile([1.0, 1000.0], 99) <= 1000.0


def test_every_planned_fault_kind_has_its_action() -> None:
    assert set(ChaosRun.FAULTS) == set(KINDS)
