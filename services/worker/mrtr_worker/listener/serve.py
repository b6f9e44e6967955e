"""Run one worker with uvicorn, configured from the environment (`python -m mrtr_worker`).

Configuration problems stop start-up with one line on stderr and exit code 2.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import sys
from typing import NoReturn

import uvicorn
from pydantic import ValidationError

from mrtr_worker.app import create_app
from mrtr_worker.config import WorkerSettings, setting_name
from mrtr_worker.listener.bounded_http import RequestBounds, bounded_protocol
from mrtr_worker.listener.draining_server import DrainingServer
from mrtr_worker.sealing.keyring import KeyRing, KeyRingError


def _config_error(message: str) -> int:
    print(f"mrtr-worker: configuration error: {message}", file=sys.stderr)
    return 2


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{setting_name(error['loc'])}: {error['msg']}" for error in exc.errors())


def main() -> int:
    try:
        settings = WorkerSettings()
        _configure_logging(settings.log_level)
        ring = KeyRing.parse(settings.keyring_text())
        app = create_app(settings, ring)
    except ValidationError as exc:
        return _config_error(_describe(exc))
    except KeyRingError as exc:
        return _config_error(str(exc))
    except OSError as exc:
        return _config_error(f"cannot read {exc.filename or 'a configured file'}: {exc.strerror or exc}")
    except ValueError as exc:  # e.g. an issuer key that is not a PEM public key, an empty admin token
        return _config_error(str(exc))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=settings.drain_timeout_seconds,
        timeout_keep_alive=settings.keep_alive_seconds,
        # Bounded heads, bodies and connections, one answer per request (mrtr_worker.listener.bounded_http), and
        # a response's head and body in one write (mrtr_worker.listener.one_write).
        http=bounded_protocol(_request_bounds(settings)),
        ws="none",  # no WebSocket upgrade: the protocol refuses every Upgrade before uvicorn could consider one
    )
    server = DrainingServer(config, app.state.worker)
    server.run()  # a signal that stopped it is raised again on the way out, ending the process there
    _leave_now()


def _request_bounds(settings: WorkerSettings) -> RequestBounds:
    return RequestBounds(
        max_head_bytes=settings.max_head_bytes,
        max_headers=settings.max_headers,
        head_timeout=settings.head_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
        max_connections=settings.max_connections,
    )


def _configure_logging(level: str) -> None:
    """Plain lines on stderr, whatever is installed.

    The SDK configures the root logger when `MCPServer` is built, through rich's handler when rich
    happens to be importable (a development environment with the bench group has it; the images do
    not), which would wrap and colour the same lines differently per machine. Configuring it first
    makes the SDK's `basicConfig` a no-op.
    """
    logging.basicConfig(level=level.upper(), format="%(message)s", handlers=[logging.StreamHandler()])


def _leave_now() -> NoReturn:
    """Exit at once after a clean shutdown: the drain is done, the step pool killed, Redis closed.

    The interpreter's own teardown (joining idle executor threads, multiprocessing's finalizers,
    freeing every module) took most of a second on a busy machine, while the orchestrator and the
    drain wait for the process to be gone. Nothing is left that needs it; the logs are flushed first.
    """
    # multiprocessing's own exit hook (private, but what atexit would run): it unlinks the step pool's
    # semaphores, which the resource tracker would otherwise report as leaked.
    multiprocessing.util._exit_function()  # type: ignore[attr-defined]
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
