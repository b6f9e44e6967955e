"""The balance benchmark's order of cells, and what each cluster served before a cell."""

from __future__ import annotations

from mrtr_lab._balance_order import IDLE, Slot, history, schedule

BALANCES = ["round_robin", "two_choices", "least_request"]


def test_every_round_runs_each_scenario_for_every_balance_reversing_the_balances_every_other_round() -> None:
    order = schedule(BALANCES, ["healthy", "a"], 2)
    assert order[:3] == [Slot(0, "healthy", b) for b in BALANCES]
    assert order[6:9] == [Slot(1, "healthy", b) for b in reversed(BALANCES)]
    assert len(order) == 12


def test_a_cell_follows_its_own_clusters_earlier_cells_with_the_others_as_idle_time() -> None:
    order = schedule(BALANCES, ["healthy", "a"], 3)
    first_slow = order.index(Slot(0, "a", "round_robin"))
    assert history(order, first_slow, 30.0) == [("healthy", 30.0), (IDLE, 60.0)]
    # the third round's healthy cell of round robin comes straight after its slow cell of the second round
    third_healthy = order.index(Slot(2, "healthy", "round_robin"))
    assert history(order, third_healthy, 30.0)[-1] == ("a", 30.0)
    assert history(order, 0, 30.0) == []  # fresh workers


def test_fresh_workers_carry_nothing_over_from_the_time_before_their_first_cell() -> None:
    order = schedule(BALANCES, ["healthy"], 1)
    assert history(order, 2, 30.0) == []  # least request's first cell: the other two ran before, it served none
