"""The lean CLI's batched log sink: lines wait in memory, reach stderr in order, and none is lost on close."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator

import pytest

from mrtr_lb.logsink import LINE_FORMAT, BatchedStreamHandler, DirectLines, direct_lines, flushing
from tests.lb.standin import wait_until

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    """A pipe standing in for stderr; its read end never blocks (nothing written reads as nothing)."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    yield read, write
    os.close(read)
    os.close(write)


def written(fd: int) -> str:
    try:
        return os.read(fd, 1 << 20).decode()
    except BlockingIOError:
        return ""


def make_handler(fd: int, max_lines: int = 4096) -> BatchedStreamHandler:
    handler = BatchedStreamHandler(fd, max_lines=max_lines)
    handler.setFormatter(logging.Formatter(LINE_FORMAT))
    return handler


def record(message: str, level: int = logging.INFO, name: str = "mrtr_lb.access") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 0, message, (), None)


def test_lines_wait_for_a_flush_and_keep_their_order(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = make_handler(write)
    for n in range(3):
        handler.handle(record(f"line {n}"))
    assert written(read) == ""  # no write per line
    handler.flush()
    lines = written(read).splitlines()
    assert [re.sub(f"^{STAMP} ", "", line) for line in lines] == [f"INFO mrtr_lb.access: line {n}" for n in range(3)]
    handler.flush()
    assert written(read) == ""  # written once


def test_a_warning_goes_out_at_once_after_the_lines_before_it(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = make_handler(write)
    handler.handle(record("first"))
    handler.handle(record("backend down", logging.WARNING, "mrtr_lb.proxy"))
    out = written(read)
    assert out.index("first") < out.index("WARNING mrtr_lb.proxy: backend down")


def test_a_full_buffer_is_written_without_waiting_for_the_timer(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = make_handler(write, max_lines=3)
    direct = DirectLines(handler, logging.getLogger("mrtr_lb.access"))
    direct("a")
    handler.handle(record("b"))
    assert written(read) == ""
    direct("c")
    assert [line.rsplit(" ", 1)[1] for line in written(read).splitlines()] == ["a", "b", "c"]


def test_close_writes_what_is_left(pipe: tuple[int, int]) -> None:
    """What ``logging.shutdown`` does at exit: no line gathered before it is lost."""
    read, write = pipe
    handler = make_handler(write)
    DirectLines(handler, logging.getLogger("mrtr_lb.access"))("last words")
    handler.close()
    assert written(read).endswith(" INFO mrtr_lb.access: last words\n")


def test_direct_lines_are_the_formatters_text(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = make_handler(write)
    DirectLines(handler, logging.getLogger("mrtr_lb.access"))('POST /mcp mcp_name="a b"')
    handler.handle(record('POST /mcp mcp_name="a b"'))
    handler.flush()
    direct, formatted = written(read).splitlines()
    pattern = f'{STAMP} INFO mrtr_lb.access: POST /mcp mcp_name="a b"'
    assert re.fullmatch(pattern, direct), direct
    assert re.fullmatch(pattern, formatted), formatted


def test_direct_lines_only_when_the_handler_alone_sees_the_logger(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, write = pipe
    handler = make_handler(write)
    access = logging.getLogger("mrtr_lb.access")
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])
    assert direct_lines(handler, access) is not None
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler, logging.NullHandler()])
    assert direct_lines(handler, access) is None  # another handler would miss the lines
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])
    handler.setFormatter(logging.Formatter("%(message)s"))
    assert direct_lines(handler, access) is None  # not the text DirectLines writes


def test_other_loggers_lines_go_out_at_once(pipe: tuple[int, int]) -> None:
    """Start-up and health lines are rare: only the access log's lines wait."""
    read, write = pipe
    handler = make_handler(write)
    handler.handle(record("listening on http://127.0.0.1:1", name="mrtr_lb"))
    assert written(read).endswith(" INFO mrtr_lb: listening on http://127.0.0.1:1\n")


async def test_flushing_writes_on_its_timer_and_when_the_server_ends(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = make_handler(write)
    direct = DirectLines(handler, logging.getLogger("mrtr_lb.access"))
    seen: list[str] = []

    async def server() -> str:
        direct("while running")

        async def on_stderr() -> bool:
            seen.append(written(read))
            return bool(seen[-1])

        await wait_until(on_stderr, what="the timer's write")  # the server is still running
        direct("at the end")
        return "done"

    assert await flushing(handler, server(), interval=0.01) == "done"
    assert seen[-1].endswith(" INFO mrtr_lb.access: while running\n")
    assert written(read).endswith(" INFO mrtr_lb.access: at the end\n")
