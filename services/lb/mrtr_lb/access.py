"""The access log (``mrtr_lb.access``): one line per request.

MCP fields come from the ``Mcp-Method``/``Mcp-Name`` headers (the body is never
parsed); client-controlled values are rendered so they cannot break the
one-line format. The lean engine keeps a line's start (:func:`access_head`)
with the header block a client connection reuses, and the CLI writes the
lines in batches (:func:`direct_access_lines`, :mod:`mrtr_lb.logsink`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from mrtr_lb.metrics import LbMetrics
from mrtr_lb.rules import Outcome

access_log = logging.getLogger("mrtr_lb.access")


def record(
    metrics: LbMetrics,
    method: str,
    path: str,
    mcp_method: str | None,
    mcp_name: str | None,
    out: Outcome,
    started: float,
) -> None:
    """Metrics and the one access-log line of a finished request."""
    elapsed = time.perf_counter() - started
    metrics.count_response(out.status, elapsed)
    if access_log.isEnabledFor(logging.INFO):
        log_access(method, path, mcp_method, mcp_name, out, elapsed)


def log_access(
    method: str, path: str, mcp_method: str | None, mcp_name: str | None, out: Outcome, elapsed: float
) -> None:
    """The access-log line of a finished request (call only when ``access_log`` is enabled for INFO)."""
    emit_access(access_head(method, path, mcp_method, mcp_name, out.backend), out, elapsed)


def access_head(method: str, path: str, mcp_method: str | None, mcp_name: str | None, backend: str) -> str:
    """An access-log line up to ``status=``: the part a client's requests repeat (the lean engine keeps it)."""
    mcp = f"mcp_method={_field(mcp_method)} mcp_name={_field(mcp_name)}"
    return f"{method} {_field(path)} {mcp} backend={backend} status="


def emit_access(head: str, out: Outcome, elapsed: float) -> None:
    """Finish the line that :func:`access_head` began with what varies per request, and log it.

    One f-string: ``%`` formatting of an argument tuple cost as much again.
    """
    message = (
        f"{head}{out.status} duration_ms={elapsed * 1000:.1f} retried={'yes' if out.attempts > 1 else 'no'} "
        f"attempts={out.attempts} result={out.result} worker={_field(out.worker)}"
    )
    if _direct is not None:
        _direct(message)
        return
    # makeRecord + handle: the same record as .info() makes, without walking the stack for the caller.
    access_log.handle(access_log.makeRecord(access_log.name, logging.INFO, __file__, 0, message, (), None))


_direct: Callable[[str], None] | None = None


def direct_access_lines(writer: Callable[[str], None] | None) -> None:
    """Write access-log lines with ``writer`` instead of through logging (the CLI's batched stderr)."""
    global _direct
    _direct = writer


_NEEDS_QUOTES = re.compile(r'[\s"\\=]')


_FIELDS: dict[str, str] = {}
"""Rendered fields by value: the same few paths, tool names and worker ids come back on every line."""


def _field(value: str | None) -> str:
    """Render a client-controlled value so it cannot break the one-line format."""
    if not value:
        return "-"
    rendered = _FIELDS.get(value)
    if rendered is None:
        rendered = _render_field(value)
        if len(value) <= 200:  # bounded in size and number: values are client-controlled
            if len(_FIELDS) >= 4096:
                _FIELDS.clear()
            _FIELDS[value] = rendered
    return rendered


def _render_field(value: str) -> str:
    value = value[:200]
    if _NEEDS_QUOTES.search(value) or not value.isprintable():
        return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    return value
