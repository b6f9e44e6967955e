"""The balance and pause benchmarks' setups (`mrtr_lab._balance_setups`): a balance, optionally stepping aside."""

from __future__ import annotations

import pytest

from mrtr_lab._balance_setups import SETUPS, Setup, setup_of


@pytest.mark.parametrize(
    ("key", "setup", "worker_env"),
    [
        ("round_robin", Setup("round_robin", False), {}),
        ("least_request+step_aside", Setup("least_request", True), {"MRTR_WORKER_STEP_ASIDE": "true"}),
    ],
)
def test_a_key_names_the_proxys_balance_and_the_workers_switch(
    key: str, setup: Setup, worker_env: dict[str, str]
) -> None:
    assert setup_of(key) == setup
    assert setup.lb_env == {"MRTR_LB_BALANCE": setup.balance}
    assert setup.worker_env == worker_env


@pytest.mark.parametrize("key", ["nope", "round_robin+fast", "+step_aside", "Round_Robin"])
def test_an_unknown_setup_is_refused_before_any_cluster_starts(key: str) -> None:
    with pytest.raises(ValueError, match="unknown setup"):
        setup_of(key)


def test_every_default_setup_is_known() -> None:
    assert [setup_of(key) for key in SETUPS]
