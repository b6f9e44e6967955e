"""Log lines gathered in memory and written in batches: the lean engine's access log without a write per request.

The standard StreamHandler writes and flushes after every record, one
``write`` system call per access-log line: as much as forwarding the request
itself costs. Here a line is appended to a list (a TextIOWrapper's ``write``
costs several times that) and the list is written to stderr in one go every
``interval`` seconds, when it grows past ``max_lines``, and at exit: a line
reaches the log at most ``interval`` late, and none is lost when the process
stops (:func:`flushing` writes the rest when the server's coroutine ends,
after the open requests finished, and ``logging.shutdown`` at interpreter
exit flushes and closes the handler). Only the access log's lines wait:
anything else the proxy logs (start-up, a backend's health, errors) is rare
and written at once, after the lines before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_NO_LOCK = contextlib.nullcontext()

LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_MILLIS = [f",{ms:03d}" for ms in range(1000)]
"""The ``,mmm`` part of a timestamp by millisecond: a list index instead of a format per line."""


class BatchedStreamHandler(logging.Handler):
    """A handler that gathers formatted lines in memory and writes them to stderr when told to.

    Records of the ``batched`` logger below WARNING wait for :meth:`flush`; any other record is written at once.
    """

    def __init__(self, fd: int | None = None, max_lines: int = 4096, batched: str = "mrtr_lb.access") -> None:
        super().__init__()
        self.fd = sys.stderr.fileno() if fd is None else fd
        self.max_lines = max_lines
        self.batched = batched
        self.lines: list[str] = []
        """Lines not written yet, each ending in a newline (appended by :meth:`emit` and :class:`DirectLines`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record) + "\n")
        except Exception:
            self.handleError(record)
            return
        if record.name != self.batched or record.levelno >= logging.WARNING or len(self.lines) >= self.max_lines:
            self.flush()

    def flush(self) -> None:
        """Write every gathered line in one go (blocking: a line is never dropped to keep the loop going)."""
        if not self.lines:
            return
        with self.lock or _NO_LOCK:  # a record from another thread goes through ``handle``, which holds it
            data = "".join(self.lines).encode("utf-8", "replace")
            self.lines.clear()
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(self.fd, view) :]
                except BlockingIOError:  # stderr set non-blocking by someone else: wait until it takes more
                    select.select([], [self.fd], [])
                except OSError:  # stderr gone (a closed pipe): nothing can be done about these lines
                    return

    def close(self) -> None:
        self.flush()
        super().close()


class DirectLines:
    """Access-log lines formatted and appended straight to a batched handler's lines.

    The same text as the root formatter's ``%(asctime)s %(levelname)s %(name)s: %(message)s``,
    without a LogRecord, the handler chain and a strftime per line (the
    timestamp's seconds are formatted once per second, its milliseconds
    looked up). Only for a logger whose lines would reach nothing but ``handler``.
    """

    def __init__(self, handler: BatchedStreamHandler, logger: logging.Logger) -> None:
        self._handler = handler
        self._lines = handler.lines
        self._append = handler.lines.append
        self._max = handler.max_lines
        self._prefix = f" INFO {logger.name}: "
        self._second = -1
        self._stamp = ""

    def __call__(self, message: str) -> None:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        self._append(f"{self._stamp}{_MILLIS[int((now - second) * 1000)]}{self._prefix}{message}\n")
        if len(self._lines) >= self._max:
            self._handler.flush()


def direct_lines(handler: BatchedStreamHandler, logger: logging.Logger) -> DirectLines | None:
    """A :class:`DirectLines` for ``logger`` if its INFO lines go to ``handler`` alone, unchanged; else None."""
    root = logging.getLogger()
    if logger.handlers or logger.filters or root.filters or root.handlers != [handler] or handler.filters:
        return None
    formatter = handler.formatter
    if formatter is None or formatter._fmt != LINE_FORMAT or formatter.datefmt is not None:
        return None
    return DirectLines(handler, logger)


async def flushing(handler: BatchedStreamHandler, main: Coroutine[Any, Any, T], interval: float = 0.2) -> T:
    """Run ``main`` while flushing ``handler`` every ``interval`` seconds, and once more when it ends."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            handler.flush()

    flusher = asyncio.create_task(loop(), name="log flush")
    try:
        return await main
    finally:
        flusher.cancel()
        handler.flush()
