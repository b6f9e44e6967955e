"""Write benchmark figures into docs/benchmarks.md, one marked section per benchmark.

Each benchmark replaces only its own section, so they can be re-run one at
a time; every section records when and where its figures were measured, and
how busy the machine already was (other work on two cores moves every figure).
Tests run the benchmarks with `--no-report`, so only `scripts/bench` rewrites the docs.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from pathlib import Path

REPORT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Figures printed and written by the scripts under `benchmarks/` (run them with `scripts/bench NAME`).
Ratios are measured side by side in one run on one machine; absolute numbers move with the machine
and its load, so read the ratios. Nothing here is asserted by tests.
"""

LOAD_BEFORE = os.getloadavg()[0]
"""The 1-minute load average when the benchmark started (before it added any load of its own)."""


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def parser(doc: str | None, *, duration: float, duration_help: str) -> argparse.ArgumentParser:
    """The options every benchmark shares: how long to measure, and whether to write the report."""
    summary = (doc or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(description=summary)
    parser.add_argument("--duration", type=float, default=duration, help=f"{duration_help} (default {duration:g})")
    parser.add_argument("--no-report", action="store_true", help="print only; leave docs/benchmarks.md alone")
    return parser


def publish(name: str, lines: list[str], *, write: bool) -> None:
    """Print a benchmark's section and, unless told not to, write it into the report."""
    markdown = "\n".join(lines)
    print(markdown)
    if write:
        print(f"\nwritten to {write_section(name, markdown)}")


def write_section(name: str, markdown: str) -> Path:
    """Replace (or append) the section `name` of the report with `markdown`."""
    text = REPORT.read_text() if REPORT.exists() else HEADER
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    where = f"{machine()}; load average {LOAD_BEFORE:.2f} before the run"
    body = f"<!-- {name}:start -->\n{markdown.rstrip()}\n\n_Measured {stamp} on {where}._\n<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->", re.S)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else f"{text.rstrip()}\n\n{body}\n"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text)
    return REPORT
