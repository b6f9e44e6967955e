"""One real cell the model must reproduce: measured by `calibrate.py` or read from a benchmark's figures.

Apart from `calibrate.py`, which measures cells, and `documented.py`, which reads the benchmarks' JSON figures
into cells, so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Reference:
    """One real cell: a scenario run with one strategy."""

    scenario: str
    strategy: str
    calls: list[tuple[float, float]]
    """(start s into the cell, seconds) of every complete and exact call."""
    completed: int
    errors: int
    lost: float
    others_share: float
    """CPU other processes took during the cell, as a share of the machine's cores."""
    upgrade_seconds: float | None = None
    leaving_seconds: float | None = None
    share_seconds: float | None = None
    stopped_share: float | None = None
    started_at: float = 0.0
    source: str = "measured by calibrate.py"
    p50: float | None = None
    """Summary figures of a cell whose calls were not kept (one read from a study's figures, `documented`)."""
    p99: float | None = None
    duration: float | None = None
    """Seconds of load, when not the why-shed default (the straggler benchmark's 45 s)."""
    in_window: bool = False
    """Calls done count only calls that ended within the window (the straggler benchmark's rule); else every
    call completed, those in flight at the end included (why-shed's)."""
    before: list[tuple[str, float]] = field(default_factory=list)
    """What the same workers served before the cell, oldest first: ("healthy", s) of load, ("a", s) of load with
    the cell's first worker at a quarter speed, ("idle", s) while the benchmark ran other clusters' cells. The
    straggler benchmark's slow row with shedding on follows its healthy row on one cluster; the balance
    benchmark's cells follow every earlier round's (`mrtr_lab._balance_order.history`). Each worker's standing
    carries over what it learned: the healthy pace, or that it was slow."""
    on_slow: float | None = None
    """Task cells: the share of the slices begun on the slow worker (the straggler-tasks table's "on slow")."""
    scraped: bool = True
    """The run read every worker's step counter every 0.25 s (why-shed's `Steps`, and so `calibrate.py`'s own
    cells); the straggler benchmark does not."""
    balance: str = "round_robin"
    """The proxy's `MRTR_LB_BALANCE` (the balance benchmark's cells run each one; every other cell the default)."""
    pool_order: list[int] | None = None
    """The cell's first workers (their places in the order the cell made them, which is the order the upgrade
    replaces them in) in the order of the real proxy's pool as the cell began; None: not recorded."""
    next_pick: int | None = None
    """Which of them the real proxy's round robin was to send the next request to (`/lb/backends`' `next`); the
    replay starts its round robin there, and draws it per seed where this is None."""
    run: str | None = None
    """The benchmark run this cell is one round of, where a run's figures are of all its rounds' calls together
    (the balance table); None: a run of its own."""
