"""What runs in each step-pool process before its first step.

The pool starts its processes with "spawn": each one imports the modules of the functions it is
sent. This module, like the computations' step functions, imports nothing heavy (no MCP SDK, no
web framework), so a worker's pool starts in a fraction of the worker's own start-up time.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

STEP_NICENESS = 10
"""Pool processes run steps at a lower CPU priority than the worker's event loop."""
_PR_SET_PDEATHSIG = 1


def warm_up() -> None:
    """Runs once in each pool process so the first real step does not pay for process start-up."""


def set_up(worker_pid: int) -> None:
    """In each pool process: die with the worker, and yield the CPU to the event loops.

    A worker killed with SIGKILL (or one whose server re-raises SIGTERM after
    shutdown) never joins its pool; on Linux the kernel's parent-death signal
    ends the pool processes instead of leaving them behind. The lower priority
    keeps health checks and short calls quick while steps run on every core.
    """
    os.nice(STEP_NICENESS)
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != worker_pid:  # the worker died before the line above ran
            os._exit(1)
