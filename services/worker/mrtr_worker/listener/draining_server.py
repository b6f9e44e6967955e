"""uvicorn, but a drained worker leaves at once: the process is gone a few ms after its last hand-back.

Plain uvicorn notices `should_exit` on its next 100 ms tick, sleeps a fixed
100 ms after asking connections to close, and polls for them every 100 ms:
together 0.2 to 0.3 s of nothing after the last computation has been handed
back (then the step pool and the interpreter took the rest of a second).
Here the drain wakes the main loop at once, and the shutdown polls every few
milliseconds instead, with the same steps and the same grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from types import FrameType

import uvicorn

from mrtr_worker.worker import Worker

logger = logging.getLogger("uvicorn.error")

POLL_SECONDS = 0.005
"""How often the shutdown looks for open connections and tasks (uvicorn: 0.1 s)."""
TICK_SECONDS = 0.1
"""uvicorn's housekeeping tick (the date header, limits); a drain does not wait for it."""


class DrainingServer(uvicorn.Server):
    """SIGTERM drains first, so computations hand back before the process goes; a drain ends the process.

    uvicorn's own graceful shutdown waits for in-flight requests; starting the
    drain at the signal makes those requests end at their next step boundary
    (handing their state back) instead of running to completion. An admin
    drain ends the process the same way once the instance is idle.
    """

    def __init__(self, config: uvicorn.Config, worker: Worker) -> None:
        super().__init__(config)
        self._worker = worker
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        worker.lifecycle.on_drained = self._exit_when_drained

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._worker.drain()
        super().handle_exit(sig, frame)
        self._wake_up()

    def _exit_when_drained(self) -> None:
        self.should_exit = True
        self._wake_up()

    def _wake_up(self) -> None:
        if self._loop is not None and self._wake is not None:
            # Thread- and signal-safe: a signal handler may run between any two bytecodes of the loop.
            self._loop.call_soon_threadsafe(self._wake.set)

    async def main_loop(self) -> None:
        """uvicorn's loop of ticks, but woken at once by a drain or a signal."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_SECONDS)
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, step for step, polling every few ms instead of sleeping 100 ms at a time."""
        logger.info("Shutting down")
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # idle keep-alive connections close now, busy ones after their response
        try:
            await asyncio.wait_for(self._until_idle(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            logger.error("Cancel %s running task(s), timeout graceful shutdown exceeded", len(self.server_state.tasks))
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _until_idle(self) -> None:
        # uvicorn's server state offers no event for "the last connection closed": poll it, briefly.
        while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:  # noqa: ASYNC110
            await asyncio.sleep(POLL_SECONDS)
        for server in self.servers:
            await server.wait_closed()
