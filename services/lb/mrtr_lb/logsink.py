"""Log lines written in batches: the lean engine's access log without a write per request.

The standard StreamHandler flushes after every record, one ``write`` system
call per access-log line: as much as forwarding the request itself costs.
This handler lets lines gather in the stream's buffer and flushes them every
``interval`` seconds (and on close), so a line reaches the log at most that
late.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BatchedStreamHandler(logging.StreamHandler[io.TextIOWrapper]):
    """A StreamHandler over a buffered copy of stderr that flushes only when told to."""

    def __init__(self, buffer_size: int = 64 * 1024) -> None:
        raw = io.FileIO(sys.stderr.fileno(), "w", closefd=False)
        super().__init__(io.TextIOWrapper(io.BufferedWriter(raw, buffer_size), encoding="utf-8", errors="replace"))

    def flush(self) -> None:
        """Called after every record by ``emit``: deliberately nothing (see :meth:`flush_now`)."""

    def flush_now(self) -> None:
        with self.lock or _NoLock():
            self.stream.flush()

    def close(self) -> None:
        self.flush_now()
        super().close()


class DirectLines:
    """Access-log lines formatted and written straight to a batched handler's stream.

    The same text as the root formatter's ``%(asctime)s %(levelname)s %(name)s: %(message)s``,
    without a LogRecord, the handler chain and a strftime per line (the
    timestamp's seconds are formatted once per second): half the log's cost.
    Only for a logger whose lines would reach nothing but ``handler``.
    """

    def __init__(self, handler: BatchedStreamHandler, logger: logging.Logger) -> None:
        self._write = handler.stream.write
        self._prefix = f" INFO {logger.name}: "
        self._second = -1
        self._stamp = ""

    def __call__(self, message: str) -> None:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        self._write(f"{self._stamp},{int((now - second) * 1000):03d}{self._prefix}{message}\n")


def direct_lines(handler: BatchedStreamHandler, logger: logging.Logger) -> DirectLines | None:
    """A :class:`DirectLines` for ``logger`` if its INFO lines go to ``handler`` alone, unchanged; else None."""
    root = logging.getLogger()
    if logger.handlers or logger.filters or root.filters or root.handlers != [handler] or handler.filters:
        return None
    formatter = handler.formatter
    if formatter is None or formatter._fmt != LINE_FORMAT or formatter.datefmt is not None:
        return None
    return DirectLines(handler, logger)


LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


async def flushing(handler: BatchedStreamHandler, main: Coroutine[Any, Any, T], interval: float = 0.2) -> T:
    """Run ``main`` while flushing ``handler`` every ``interval`` seconds, and once more at the end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            handler.flush_now()

    flusher = asyncio.create_task(loop(), name="log flush")
    try:
        return await main
    finally:
        flusher.cancel()
        handler.flush_now()
