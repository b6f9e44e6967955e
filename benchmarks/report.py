"""Write benchmark figures as JSON, and render the docs' marked sections from those files.

Each benchmark writes its figures to `data/<name>.json` beside the page that
shows them (docs/data/ for docs/benchmarks.md, docs/lab/data/ for the lab's
studies): its prose and its tables as rows, when and where they were measured,
and how much of the machine other processes took meanwhile (other work on two
cores moves every figure). The page's section is then rendered from that file,
so they can be re-run one at a time; whoever needs figures (the lab's
calibration) reads the JSON, never a page. `python -m benchmarks.report PAGE...`
renders the pages again from their files. Tests run the benchmarks with
`--no-report`, so only `scripts/bench` rewrites the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

REPORT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Figures printed and written by `scripts/bench NAME`, each section rendered from `data/<name>.json`.
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
    """Print a benchmark's section and, unless told not to, write its figures and its section of `report`."""
    markdown = "\n".join(lines)
    print(markdown)
    if _neighbours is not None:
        print(f"\nother processes used {_neighbours.share():.0%} of the machine's CPU during the run")
    if write:
        print(f"\nwritten to {figures_file(name, report)} and {write_section(name, markdown, report)}")


def block(name: str, markdown: str) -> str:
    """A section as the report keeps it: between its markers, with when and where it was measured.

    A section may hold another's block (the fleet simulator's calibration inside its section), which can then
    be written again alone."""
    return f"<!-- {name}:start -->\n{_stamped(markdown)}\n<!-- {name}:end -->"


def _stamped(markdown: str) -> str:
    """The section's text followed by when and where it was measured, and how busy the machine was."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    where = f"{machine()}; load average {LOAD_BEFORE:.2f} before the run"
    if _neighbours is not None:
        where += f"; other processes used {_neighbours.share():.0%} of the CPU during it"
    return f"{markdown.rstrip()}\n\n_Measured {stamp} on {where}._"


def figures_file(name: str, report: Path = REPORT) -> Path:
    """Where the figures of section `name` of `report` are kept: `data/<name>.json` beside the page."""
    return report.parent / "data" / f"{name}.json"


def read_figures(name: str, report: Path = REPORT) -> dict[str, Any]:
    """The figures of section `name` of `report`; a missing file is an error, never an empty section."""
    path = figures_file(name, report)
    if not path.exists():
        raise FileNotFoundError(f"no figures for {name!r}: {path} is missing (run scripts/bench to measure them)")
    figures: dict[str, Any] = json.loads(path.read_text())
    return figures


def tables(figures: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every table of a section with the prose just before it (its heading, its caption): (prose, table)."""
    found, prose = [], ""
    for part in figures["parts"]:
        if isinstance(part, str):
            prose = part
        elif "rows" in part:
            found.append((prose, part))
    return found


def has_section(name: str, report: Path = REPORT) -> bool:
    return report.exists() and _marked(name).search(report.read_text()) is not None


def _marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- {re.escape(name)}:start -->\n?(.*?)\n?<!-- {re.escape(name)}:end -->", re.S)


_BLOCK = re.compile(r"<!-- ([\w-]+):start -->\n?(.*?)\n?<!-- \1:end -->", re.S)
_STAMP = re.compile(r"\n*_Measured ([^\n]+?) on ([^\n]+)\._\Z")
_RULE = re.compile(r"^\|(?:---:?\|)+$")


def write_section(name: str, markdown: str, report: Path = REPORT) -> Path:
    """Write the figures of section `name` (and of any block inside it) as JSON, then render it into `report`."""
    _store(name, _stamped(markdown), report)
    return render_section(name, report)


def _store(name: str, inside: str, report: Path) -> None:
    """Keep one section's figures (the text between its markers) as JSON; a block inside keeps its own file."""
    stamp = _STAMP.search(inside)
    body = inside[: stamp.start()] if stamp else inside
    others = re.search(r"other processes used (\d+)% of the CPU", stamp.group(2)) if stamp else None
    figures = {
        "section": name,
        "measured": stamp.group(1) if stamp else None,
        "where": stamp.group(2) if stamp else None,
        "others_share": int(others.group(1)) / 100 if others else None,
        "parts": _parts(body, report),
    }
    path = figures_file(name, report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n")


def _parts(body: str, report: Path) -> list[Any]:
    """The body as prose, tables (columns, align, rows of cells) and blocks of their own, in order.

    A block stands on lines of its own: the line breaks around it are the rendering's, not the prose's."""
    parts: list[Any] = []
    more = bool(body)
    while found := _BLOCK.search(body):
        if before := body[: found.start()]:
            parts += _prose_and_tables(before.removesuffix("\n"))
        _store(found.group(1), found.group(2), report)
        parts.append({"section": found.group(1)})
        body = body[found.end() :]
        more = bool(body)
        body = body.removeprefix("\n")
    return parts + _prose_and_tables(body) if more else parts


def _prose_and_tables(text: str) -> list[Any]:
    parts: list[Any] = []
    prose: list[str] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        end = index
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        table = _table(lines[index:end]) if end - index >= 2 and _RULE.match(lines[index + 1]) else None
        if table is None:
            prose.append(lines[index])
            index += 1
            continue
        parts += ["\n".join(prose), table] if prose else [table]
        prose, index = [], end
    return [*parts, "\n".join(prose)] if prose else parts


def _table(lines: list[str]) -> dict[str, Any] | None:
    """A markdown table as columns, align and rows; None when `markdown_table` would not write it so."""
    cells = [[cell[1:-1].replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    align = "".join("r" if rule.endswith(":") else "l" for rule in lines[1].strip("|").split("|"))
    try:
        if markdown_table(cells[0], align, cells[2:]) != lines:
            return None
    except ValueError:
        return None
    return {"columns": cells[0], "align": align, "rows": cells[2:]}


def render(name: str, report: Path = REPORT) -> str:
    """Section `name` of `report` as its figures say, between its markers."""
    figures = read_figures(name, report)
    lines: list[str] = []
    for part in figures["parts"]:
        if isinstance(part, str):
            lines.append(part)
        elif "rows" in part:
            lines += markdown_table(part["columns"], part["align"], part["rows"])
        else:
            lines.append(render(part["section"], report))
    body = "\n".join(lines)
    if figures["measured"] is not None:
        body += f"\n\n_Measured {figures['measured']} on {figures['where']}._"
    return f"<!-- {name}:start -->\n{body}\n<!-- {name}:end -->"


def render_section(name: str, report: Path = REPORT) -> Path:
    """Replace (or append) section `name` of `report` with its rendering; an outer block is rendered again."""
    text = report.read_text() if report.exists() else HEADER
    outer = next(
        (found.group(1) for found in _BLOCK.finditer(text) if f"<!-- {name}:start -->" in found.group(2)), None
    )
    if outer is not None:
        return render_section(outer, report)
    body = render(name, report)
    pattern = _marked(name)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else f"{text.rstrip()}\n\n{body}\n"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    return report


def render_page(report: Path) -> str:
    """The page with every section rendered again from its figures (the text outside the sections as it is)."""
    return _BLOCK.sub(lambda found: render(found.group(1), report), report.read_text())


def main(pages: list[str]) -> int:
    """Render the pages named again from their figures: after editing a figures file by hand, or to check them."""
    for page in pages:
        path = Path(page)
        path.write_text(render_page(path))
        print(f"rendered {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
