"""The step processes, driven straight from the event loop: one pipe per process, no helper threads.

`ProcessPoolExecutor` hands every step through two helper threads (its
manager thread, woken by a pipe, and a queue's feeder thread) and back to the
loop with `call_soon_threadsafe` (another pipe): three GIL hand-offs and four
wake-ups for one step, about 0.4 ms of the worker's own CPU per step, and a
hop of a 1 ms slice is one step. Here the loop pickles the step into the
process's pipe itself and reads the answer when the pipe is readable
(`loop.add_reader`), so a step costs two pipe writes and no thread.

One step at a time per process; a step submitted while every process is busy
waits in order. A step whose caller gave up (its round cancelled) still runs
to its end, and the process takes the next step only once it has answered.
A process that dies breaks the pool as `ProcessPoolExecutor` would: every step
in flight or submitted later fails with `BrokenProcessPool`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
from collections import deque
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any

from mrtr_worker.compute import pool_process

Call = tuple[bytes, "asyncio.Future[Any]"]
"""A step waiting for a process: `(step, state)` pickled, and the future its answer goes to."""


class StepNotSendable(TypeError):
    """A step that cannot be sent to a step process: the processes find a step by its module and name."""


def _payload(step: Callable[[Any], Any], state: Any) -> bytes:
    """`(step, state)` as the process will read it; pickled here, before any process is chosen.

    A step is pickled by reference (module and qualified name), so a lambda or a nested function
    is refused now, for this call alone (a module the processes cannot import fails there, as the
    step's own error).
    """
    try:
        return bytes(ForkingPickler.dumps((step, state)))
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        name = f"{getattr(step, '__module__', '?')}.{getattr(step, '__qualname__', step)!s}"
        raise StepNotSendable(
            f"step {name} cannot be sent to a step process ({exc}); a computation's step must be a "
            "module-level function of an importable module, over a JSON state"
        ) from exc


class _Process:
    """One step process and the step it is running (None while idle)."""

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.running: asyncio.Future[Any] | None = None


class StepPool:
    """`size` spawned processes running one pure step each at a time, for one event loop."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._processes: list[_Process] = []
        self._queue: deque[Call] = deque()
        self._broken: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Spawn the processes ("spawn", not fork: the parent runs an event loop and threads) and warm them up."""
        self._loop = asyncio.get_running_loop()
        context = multiprocessing.get_context("spawn")
        for _ in range(self._size):
            here, there = context.Pipe(duplex=True)
            process = context.Process(target=pool_process.serve, args=(there, os.getpid()), daemon=True)
            process.start()
            there.close()
            member = _Process(process, here)
            self._processes.append(member)
            self._loop.add_reader(here.fileno(), self._answered, member)
        await asyncio.gather(*(self._on(member, pool_process.warm_up, None) for member in self._processes))

    def run(self, step: Callable[[Any], Any], state: Any) -> asyncio.Future[Any]:
        """`step(state)` in a free process (or the first to become free); the future holds its result."""
        assert self._loop is not None, "step pool not started"
        future: asyncio.Future[Any] = self._loop.create_future()
        if self._broken is not None:
            future.set_exception(BrokenProcessPool(self._broken))
            return future
        try:
            payload = _payload(step, state)
        except StepNotSendable as exc:  # a pack's mistake: this call fails, the pool goes on
            future.set_exception(exc)
            return future
        idle = next((member for member in self._processes if member.running is None), None)
        if idle is None:
            self._queue.append((payload, future))
        else:
            self._send(idle, payload, future)
        return future

    def _on(self, member: _Process, step: Callable[[Any], Any], state: Any) -> asyncio.Future[Any]:
        assert self._loop is not None
        future: asyncio.Future[Any] = self._loop.create_future()
        self._send(member, _payload(step, state), future)
        return future

    def _send(self, member: _Process, payload: bytes, future: asyncio.Future[Any]) -> None:
        member.running = future
        try:
            member.conn.send_bytes(payload)
        except (OSError, ValueError) as exc:  # the process is gone (a broken pipe)
            self._break(f"a step process is gone ({exc})")

    def _answered(self, member: _Process) -> None:
        """The loop's reader callback: the process answered (or closed its end by dying)."""
        try:
            ok, value = member.conn.recv()
        except (EOFError, OSError) as exc:
            self._break(f"a step process ended abruptly ({exc.__class__.__name__})")
            return
        future, member.running = member.running, None
        if future is not None and not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        while self._queue:
            payload, waiting = self._queue.popleft()
            if not waiting.done():  # skip steps whose callers already gave up
                self._send(member, payload, waiting)
                break

    def _break(self, why: str) -> None:
        if self._broken is not None:
            return
        self._broken = why
        self._forget_readers()
        failed = [m.running for m in self._processes] + [f for _, f in self._queue]
        self._queue.clear()
        for future in failed:
            if future is not None and not future.done():
                future.set_exception(BrokenProcessPool(why))

    def _forget_readers(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            for member in self._processes:
                self._loop.remove_reader(member.conn.fileno())

    async def stop(self) -> None:
        """Kill the processes (steps are pure: nothing they hold is worth waiting for) and reap them."""
        self._break("the step pool is stopped")
        processes, self._processes = self._processes, []
        for member in processes:
            member.process.kill()
            member.conn.close()
        if processes:
            await asyncio.to_thread(_reap, processes)


def _reap(processes: list[_Process]) -> None:
    for member in processes:
        member.process.join()
