"""Write benchmark figures into docs/benchmarks.md, one marked section per benchmark.

Each benchmark replaces only its own section, so they can be re-run one at
a time; every section records when and where its figures were measured, and
how much of the machine other processes took meanwhile (other work on two
cores moves every figure). Tests run the benchmarks with `--no-report`, so
only `scripts/bench` rewrites the docs.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPORT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Figures printed and written by the scripts under `benchmarks/` (run them with `scripts/bench NAME`).
Ratios are measured side by side in one run on one machine; absolute numbers move with the machine
and its load, so read the ratios. Nothing here is asserted by tests.
"""

LOAD_BEFORE = os.getloadavg()[0]
"""The 1-minute load average when the benchmark started (before it added any load of its own)."""

MARK = "MRTR_BENCH_RUN"
"""Set in this process's environment; every process the benchmark starts inherits it, which is how they are told
apart from the rest of the machine."""


class Neighbours:
    """The share of the machine's CPU that processes outside this benchmark used while it ran.

    Once a second it reads the CPU time of every process carrying `MARK` (the
    workers, their step pools, the proxies; /proc shows the environment a
    process started with) and compares their sum, with this process's own
    time, against the whole machine's busy time from /proc/stat. A process
    that ends is counted through its parent, which the kernel credits with a
    reaped child's time; only orphans (reparented away from the benchmark) keep
    their last reading. Kernel time spent on loopback traffic outside any of
    these processes counts as other work, so the figure errs on the high side.
    """

    def __init__(self) -> None:
        os.environ[MARK] = str(os.getpid())
        self._mark = f"{MARK}={os.getpid()}".encode()
        self._tick = os.sysconf("SC_CLK_TCK")
        self._live: dict[int, tuple[int, int]] = {}
        """Marked processes alive at the last reading: pid -> (CPU ticks incl. reaped children, parent pid)."""
        self._foreign: set[int] = set()
        self._orphans = 0
        self._lock = threading.Lock()
        self._start, self._start_busy = time.monotonic(), _machine_busy()
        self._start_ours = self._ours()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(1.0)
            self._ours()

    def _ours(self) -> int:
        """CPU ticks used so far by this process, its reaped children and every marked process."""
        with self._lock:
            return self._read()

    def _read(self) -> int:
        live: dict[int, tuple[int, int]] = {}
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in self._foreign or int(entry) == me:
                continue
            pid = int(entry)
            try:
                if pid not in self._live:
                    with open(f"/proc/{pid}/environ", "rb") as environ:
                        if self._mark not in environ.read().split(b"\0"):
                            self._foreign.add(pid)
                            continue
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            live[pid] = (sum(int(f) for f in fields[11:15]), int(fields[1]))
        for pid, (ticks, parent) in self._live.items():
            if pid not in live and parent != me and parent not in self._live:
                self._orphans += ticks  # nobody of ours will reap it: keep its last reading
        self._live = live
        own = os.times()
        mine = (own.user + own.system + own.children_user + own.children_system) * self._tick
        return round(mine) + sum(ticks for ticks, _ in live.values()) + self._orphans

    def share(self) -> float:
        """Other processes' CPU since the start, as a fraction of all the machine's cores over that time."""
        return self.share_since((self._start, self._start_busy, self._start_ours))

    def mark(self) -> tuple[float, int, int]:
        """A moment to measure from (`share_since`): one cell of a benchmark, not the whole run."""
        return time.monotonic(), _machine_busy(), self._ours()

    def share_since(self, mark: tuple[float, int, int]) -> float:
        """Other processes' CPU since `mark`, as a fraction of all the machine's cores over that time."""
        start, start_busy, start_ours = mark
        ours = self._ours() - start_ours
        busy = _machine_busy() - start_busy
        elapsed = (time.monotonic() - start) * (os.cpu_count() or 1) * self._tick
        return max(0.0, busy - ours) / elapsed if elapsed else 0.0


def _machine_busy() -> int:
    """Busy jiffies of all cores since boot (everything but idle and iowait)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return sum(values[:8]) - values[3] - values[4]


_neighbours: Neighbours | None = None


def neighbours() -> Neighbours | None:
    """The watcher `parser` started (None before): a benchmark measures other work per cell with it."""
    return _neighbours


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def parser(doc: str | None, *, duration: float, duration_help: str) -> argparse.ArgumentParser:
    """The options every benchmark shares: how long to measure, and whether to write the report.

    Called first thing in every benchmark, so it also starts watching the machine for other work.
    """
    global _neighbours
    if _neighbours is None:
        _neighbours = Neighbours()
    summary = (doc or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(description=summary)
    parser.add_argument("--duration", type=float, default=duration, help=f"{duration_help} (default {duration:g})")
    parser.add_argument("--no-report", action="store_true", help="print only; leave docs/benchmarks.md alone")
    return parser


def markdown_table(columns: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """A markdown table as lines: every benchmark's report table comes from here, so they all read alike.

    `columns` are the titles; `align` has one letter a column, `l` (text) or `r` (figures, right-aligned);
    each row's cells are rendered with `str`, and a `|` in one is escaped so it cannot split the row.
    A row with more or fewer cells than columns is a mistake in the benchmark: ValueError.
    """
    if len(align) != len(columns) or not set(align) <= {"l", "r"}:
        raise ValueError(f"align needs one of l or r per column ({len(columns)}), got {align!r}")
    lines = [_table_row(columns), "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(columns)} columns: {list(row)!r}")
        lines.append(_table_row(row))
    return lines


def _table_row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def publish(name: str, lines: list[str], *, write: bool, report: Path = REPORT) -> None:
    """Print a benchmark's section and, unless told not to, write it into the report (another file: a test's)."""
    markdown = "\n".join(lines)
    print(markdown)
    if _neighbours is not None:
        print(f"\nother processes used {_neighbours.share():.0%} of the machine's CPU during the run")
    if write:
        print(f"\nwritten to {write_section(name, markdown, report)}")


def block(name: str, markdown: str) -> str:
    """A section as the report keeps it: between its markers, with when and where it was measured.

    A section may hold another's block (the fleet simulator's calibration inside its section), which can then
    be written again alone."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    where = f"{machine()}; load average {LOAD_BEFORE:.2f} before the run"
    if _neighbours is not None:
        where += f"; other processes used {_neighbours.share():.0%} of the CPU during it"
    return f"<!-- {name}:start -->\n{markdown.rstrip()}\n\n_Measured {stamp} on {where}._\n<!-- {name}:end -->"


def has_section(name: str, report: Path = REPORT) -> bool:
    return report.exists() and _marked(name).search(report.read_text()) is not None


def _marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->", re.S)


def write_section(name: str, markdown: str, report: Path = REPORT) -> Path:
    """Replace (or append) the section `name` of the report with `markdown`."""
    text = report.read_text() if report.exists() else HEADER
    body = block(name, markdown)
    pattern = _marked(name)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else f"{text.rstrip()}\n\n{body}\n"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    return report
