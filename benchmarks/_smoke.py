"""Run benchmarks as `scripts/bench` does, all at once and tiny, for their smoke tests (the product's and the lab's).

Most of a tiny run's time is process start-up, which overlaps well, so every run starts before any is awaited.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

HANG_GUARD_SECONDS = 900
"""Only against a hang: with two CPU hogs beside the suite, starting their clusters took over 180 s."""


def run_tiny(package: str, flags: Mapping[str, Sequence[str]]) -> dict[str, tuple[int, str]]:
    """`python -m <package>.<name> <flags> --no-report` for every name at once: each one's exit code and output."""
    running = {
        name: subprocess.Popen(
            [sys.executable, "-m", f"{package}.{name}", *args, "--no-report"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in flags.items()
    }
    done = {}
    for name, process in running.items():
        try:
            output, _ = process.communicate(timeout=HANG_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()  # its clusters' processes are its children's: they get SIGTERM from nobody, so say so
            output = f"{name} did not finish in {HANG_GUARD_SECONDS} s\n{process.communicate()[0]}"
        done[name] = (process.returncode, output)
    return done
