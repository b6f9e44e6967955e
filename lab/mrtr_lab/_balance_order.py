"""The order in which the balance benchmark runs its cells, and what each cluster served before a cell.

Why: the benchmark keeps one cluster per balance for the whole run and runs
every round's cells on it, each balance in turn. A worker's standing
(`mrtr_worker.compute.standing`) carries over from cell to cell: the slow
worker of one round's slow cell is still judged slow when the next round's
healthy cell begins, and hands its rounds on until a probe lifts it. The
fleet simulator replays what came before (`Reference.before`), so it needs
the same order the benchmark ran.
"""

from __future__ import annotations

from typing import NamedTuple

IDLE = "idle"
"""A stretch in which the benchmark ran other clusters' cells: this cluster served nothing."""


class Slot(NamedTuple):
    round: int
    scenario: str
    balance: str


def schedule(balances: list[str], scenarios: list[str], repeats: int) -> list[Slot]:
    """Every cell in the order the benchmark runs them: round by round, scenario by scenario, each balance in
    turn, the balances reversed every other round (a drift of the machine falls on all alike)."""
    return [
        Slot(repeat, scenario, balance)
        for repeat in range(repeats)
        for scenario in scenarios
        for balance in (balances if repeat % 2 == 0 else list(reversed(balances)))
    ]


def history(order: list[Slot], index: int, seconds: float) -> list[tuple[str, float]]:
    """What the cluster of `order[index]` served before that cell, oldest first: (scenario, `seconds`) for each
    of its own earlier cells, (`IDLE`, seconds) for the other clusters' cells in between (merged)."""
    balance = order[index].balance
    before: list[tuple[str, float]] = []
    for slot in order[:index]:
        if slot.balance == balance:
            before.append((slot.scenario, seconds))
        elif before and before[-1][0] == IDLE:
            before[-1] = (IDLE, before[-1][1] + seconds)
        else:
            before.append((IDLE, seconds))
    while before and before[0][0] == IDLE:  # fresh workers before their first cell: nothing to carry over
        before.pop(0)
    return before
