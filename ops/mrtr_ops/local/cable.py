"""A network cable between the proxy and one local worker, which a chaos run can cut.

Containers can be cut off their network (`docker network disconnect`); local
processes on 127.0.0.1 have no network of their own to unplug, and stopping
the process would be a pause, not a partition. So in a chaos run the proxy
reaches each worker through a cable: a TCP relay on 127.0.0.1 whose port is
the address the proxy knows the worker by.

* `cut()`: the cable stops listening (new connections are refused, as a host
  that is gone answers) and freezes every connection it carries: no byte and
  no close moves in either direction. Requests in flight get no answer while
  the worker process runs on and finishes them into the void.
* `restore()`: listens again on the same port; frozen connections move again
  (as TCP retransmits after a short partition); those the proxy gave up on
  end when their close reaches the worker.
* `hang_up()` / `plug()`: the worker process died / was restarted. A dead
  process's port refuses connections, so the cable stops listening too,
  rather than accepting connections it cannot deliver.

What differs from a real partition: a real one drops the SYN, so a new
connection times out (the proxy's connect timeout, 2 s) instead of being
refused at once; either way the proxy retries it on another worker,
since it was never delivered. The operator's direct line to a worker
(`/metrics`, `/admin`) does not go through the cable.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from mrtr_ops.local.process import LOOPBACK

T = TypeVar("T")
CHUNK = 64 * 1024
REBIND_SECONDS = 10.0
"""While cut, the cable's port is free: a short-lived connection may borrow it as its source port; retry that long."""


class Switchboard:
    """Runs the relays of every cable on one event loop in a background thread; the methods are thread-safe."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cables", daemon=True)
        self._thread.start()
        self._cables: list[Cable] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=REBIND_SECONDS + 5)

    def cable(self, target_port: int) -> Cable:
        """A new cable to the worker listening on `target_port`, plugged in."""
        cable = Cable(self, target_port)
        self.run(cable.listen())
        self._cables.append(cable)
        return cable

    def close(self) -> None:
        for cable in self._cables:
            cable.close()
        self._cables.clear()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


class Cable:
    """One relay: 127.0.0.1:`port` (what the proxy dials) to 127.0.0.1:`target_port` (the worker)."""

    def __init__(self, board: Switchboard, target_port: int) -> None:
        self._board = board
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._links: set[asyncio.Task[None]] = set()
        self.is_cut = False

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    # --- the switches (called from any thread) --------------------------------------------------------

    def cut(self) -> None:
        self._board.run(self._cut())
        self.is_cut = True

    def restore(self) -> None:
        self._board.run(self._restore())
        self.is_cut = False

    def hang_up(self) -> None:
        self._board.run(self._stop_listening())

    def plug(self) -> None:
        self._board.run(self.listen())

    def close(self) -> None:
        self._board.run(self._close())

    # --- on the switchboard's loop --------------------------------------------------------------------

    async def listen(self) -> None:
        if self._flowing is None:
            self._flowing = asyncio.Event()
            self._flowing.set()
        if self._server is not None:
            return
        deadline = time.monotonic() + REBIND_SECONDS
        while True:
            try:
                self._server = await asyncio.start_server(self._serve, LOOPBACK, self.port, reuse_address=True)
                break
            except OSError:
                if not self.port or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _stop_listening(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.close()  # the listener only: connections already carried stay

    async def _cut(self) -> None:
        assert self._flowing is not None
        self._flowing.clear()
        await self._stop_listening()

    async def _restore(self) -> None:
        assert self._flowing is not None
        await self.listen()
        self._flowing.set()

    async def _close(self) -> None:
        await self._stop_listening()
        for link in list(self._links):
            link.cancel()
        for link in list(self._links):
            with contextlib.suppress(asyncio.CancelledError):
                await link
        if self._flowing is not None:
            self._flowing.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        try:
            try:
                worker_reader, worker_writer = await asyncio.open_connection(LOOPBACK, self.target_port)
            except OSError:
                writer.transport.abort()  # nobody at the far end: reset, as the worker's own port would
                return
            pumps = [
                asyncio.create_task(self._pump(reader, worker_writer)),
                asyncio.create_task(self._pump(worker_reader, writer)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                for side in (writer, worker_writer):
                    side.close()
        finally:
            self._links.discard(task)
            writer.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Move bytes one way; while the cable is cut, hold them (and any close) until it is restored."""
        assert self._flowing is not None
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                data = await source.read(CHUNK)
                await self._flowing.wait()
                if not data:
                    return
                sink.write(data)
                await sink.drain()
