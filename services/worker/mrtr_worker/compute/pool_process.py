"""What runs in each step process: its set-up, then its loop of steps (`serve`).

The pool starts its processes with "spawn": each one imports the modules of the functions it is
sent. This module, like the computations' step functions, imports nothing heavy (no MCP SDK, no
web framework), so a worker's pool starts in a fraction of the worker's own start-up time.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

STEP_NICENESS = 10
"""Pool processes run steps at a lower CPU priority than the worker's event loop."""
_PR_SET_PDEATHSIG = 1


def warm_up(_: object = None) -> None:
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


def serve(conn: Connection, worker_pid: int) -> None:
    """A step process's whole life: set up, then run each `(step, state)` the worker sends, answer, repeat.

    The answer is `(True, result)` or `(False, exception)`; an exception that cannot be pickled is
    sent as a `RuntimeError` naming it. A step this process cannot unpickle (its module does not
    import here) is answered as the step's own failure, so the process goes on. The process ends
    when the worker closes its end of the pipe.
    """
    set_up(worker_pid)
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            step, state = pickle.loads(payload)  # noqa: S301  # the worker's own pipe, as `Connection.recv` reads it
            answer: tuple[bool, Any] = (True, step(state))
        except Exception as exc:  # the step's own failure: the worker's round sees it, as with an executor
            answer = (False, exc)
        try:
            conn.send(answer)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send((False, RuntimeError(f"step answer could not be sent: {exc!r}")))
