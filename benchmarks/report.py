"""Write benchmark figures into docs/benchmarks.md, one marked section per benchmark.

Each benchmark replaces only its own section, so they can be re-run one at
a time; every section records when and where its figures were measured.
"""

from __future__ import annotations

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


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_section(name: str, markdown: str) -> Path:
    """Replace (or append) the section `name` of the report with `markdown`."""
    text = REPORT.read_text() if REPORT.exists() else HEADER
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = f"<!-- {name}:start -->\n{markdown.rstrip()}\n\n_Measured {stamp} on {machine()}._\n<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->", re.S)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else f"{text.rstrip()}\n\n{body}\n"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text)
    return REPORT
