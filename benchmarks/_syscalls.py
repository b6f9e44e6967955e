"""System calls a process makes per request, counted by `strace -c` over one extra load cell.

Why: the proxy benchmark compares CPU per request with HAProxy's, and the
question that follows is where the difference goes: into the kernel (more
reads, writes or polls per request) or into the proxy's own code. Counting
the calls answers it without a profiler. Tracing slows the process down, so
the counted cell is an extra one; its throughput is not reported anywhere.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

GROUPS = {
    "write": ("write", "writev", "sendto", "sendmsg"),
    "read": ("read", "readv", "recvfrom", "recvmsg"),
    "poll": ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "select"),
}
"""Calls that do the same job under different names (libuv reads and writes, HAProxy receives and sends)."""


@dataclass
class Syscalls:
    requests: int
    calls: dict[str, int] = field(default_factory=dict)
    """Per system call: how many, over the counted cell."""

    def per_request(self, names: tuple[str, ...] | None = None) -> float:
        """Calls per request, of `names` only or (None) every call but futex waits (threads idling, not work)."""
        if not self.requests:
            return 0.0
        counted = sum(n for name, n in self.calls.items() if (name in names if names else name != "futex"))
        return counted / self.requests

    def summary(self) -> str:
        parts = ", ".join(f"{group} {self.per_request(names):.2f}" for group, names in GROUPS.items())
        return f"{self.per_request():.2f} ({parts})"


def available() -> bool:
    return shutil.which("strace") is not None


def count(pid: int, load: Callable[[], int]) -> Syscalls | None:
    """Run `load` (it returns the requests it made) with strace counting `pid`'s calls; None if strace cannot."""
    binary = shutil.which("strace")
    if binary is None:
        return None
    with tempfile.TemporaryDirectory(prefix="mrtr-strace-") as tmp:
        out = Path(tmp) / "counts.txt"
        tracer = subprocess.Popen(
            [binary, "-c", "-f", "-p", str(pid), "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert tracer.stderr is not None
            if "attached" not in tracer.stderr.readline():  # "strace: Process N attached [with M threads]"
                return None
            requests = load()
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
        if tracer.returncode not in (0, -signal.SIGINT) or not out.exists():
            return None
        return Syscalls(requests, parse(out.read_text()))


def parse(table: str) -> dict[str, int]:
    """The `calls` column of `strace -c`'s table, per system call."""
    calls: dict[str, int] = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 5 or not fields[0].replace(".", "", 1).isdigit() or fields[-1] == "total":
            continue
        calls[fields[-1]] = int(fields[3])
    return calls
