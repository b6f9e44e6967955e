"""The fault mix's promise to a short run: every kind asked for with `--ensure` is done before the run ends."""

from __future__ import annotations

import random
import threading

import pytest

from mrtr_ops.chaos import mix
from mrtr_ops.chaos.mix import FaultKind, FaultMix, FaultRecord


class _Faults:
    """Kinds that never come up in the draws (rate 0); `worker-kill` finds its victim busy the first time."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.tries: dict[str, int] = {}
        self.lock = threading.Lock()

    def enabled(self) -> list[FaultKind]:
        return [FaultKind(name, 0.0) for name in ("worker-stop", "worker-kill", "toxic")]

    def do(self, kind: str, rng: random.Random) -> FaultRecord | None:
        with self.lock:
            self.tries[kind] = self.tries.get(kind, 0) + 1
            if kind == "worker-kill" and self.tries[kind] == 1:
                return None  # busy: tried again at the next turn
            self.done.append(kind)
        return FaultRecord(kind, "w1", 0.0)


@pytest.fixture
def fast_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mix, "TICK_SECONDS", 0.001)
    monkeypatch.setattr(mix, "ENSURE_EVERY_TICKS", 2)


@pytest.mark.usefixtures("fast_ticks")
def test_a_run_can_wait_until_every_ensured_kind_was_done_in_order() -> None:
    faults = _Faults()
    driver = FaultMix(faults, seed=1, ensure=("worker-stop", "worker-kill", "toxic")).start()
    try:
        assert driver.wait_ensured(timeout=30.0)
    finally:
        driver.stop()
    assert faults.done == ["worker-stop", "worker-kill", "toxic"]
    assert faults.tries["worker-kill"] == 2


def test_it_says_when_an_ensured_kind_is_still_to_come() -> None:
    driver = FaultMix(_Faults(), seed=1, ensure=("toxic",))  # never started: no tick comes
    assert not driver.wait_ensured(timeout=0.0)


def test_with_nothing_to_ensure_there_is_nothing_to_wait_for() -> None:
    assert FaultMix(_Faults(), seed=1).wait_ensured(timeout=0.0)
