"""``python -m mrtr_lb``: run the proxy from env vars, with a few CLI overrides."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import NoReturn

import uvloop
from pydantic import ValidationError

from mrtr_lb import access
from mrtr_lb.config import Settings, describe_error
from mrtr_lb.logsink import LINE_FORMAT, BatchedStreamHandler, direct_lines, flushing
from mrtr_lb.server import serve_until_signalled

PROG = "mrtr-lb"


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are the same single line (and exit 2) as config errors."""

    def error(self, message: str) -> NoReturn:
        _die(f"bad arguments: {message}")


def _die(message: str, code: int = 2) -> NoReturn:
    print(f"{PROG}: {message}", file=sys.stderr)
    raise SystemExit(code)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog=PROG, description="Round-robin, non-sticky HTTP proxy for MRTR workers.")
    parser.add_argument("--host", help="listen address (env MRTR_LB_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (env MRTR_LB_PORT, default 8080)")
    parser.add_argument("--admin-host", help="admin listener address (env MRTR_LB_ADMIN_HOST, default 127.0.0.1)")
    parser.add_argument("--admin-port", type=int, help="admin listener port (env MRTR_LB_ADMIN_PORT, default 8090)")
    parser.add_argument("--backends", help="comma-separated backend URLs (env MRTR_LB_BACKENDS)")
    parser.add_argument("--backends-file", help="file of backend URLs, one a line (env MRTR_LB_BACKENDS_FILE)")
    parser.add_argument("--backend-dns", help="name:port to discover by DNS (env MRTR_LB_BACKEND_DNS)")
    return parser.parse_args(argv)


def load_settings(args: argparse.Namespace) -> Settings:
    """Env first, flags on top; any error becomes one line on stderr and exit code 2."""
    overrides = {k: v for k, v in vars(args).items() if v is not None}
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        _die(f"bad configuration: {describe_error(exc)}")


def main(argv: list[str] | None = None) -> None:
    """Serve on uvloop (libuv's loop: less CPU per read and write), the log lines written in batches."""
    settings = load_settings(parse_args(argv))
    batched = BatchedStreamHandler()
    # fields no log line of ours shows; not collecting them saves time per line
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.basicConfig(level=settings.log_level, format=LINE_FORMAT, handlers=[batched])
    access.direct_access_lines(direct_lines(batched, access.access_log))
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(flushing(batched, serve_until_signalled(settings), settings.log_flush_interval))
    except OSError as exc:  # e.g. the port is taken
        where = f"{settings.host}:{settings.port} (admin {settings.admin_host}:{settings.admin_port})"
        _die(f"cannot listen on {where}: {exc.strerror or exc}", code=1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
