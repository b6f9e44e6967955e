"""`python -m mrtr_worker`: run one worker with uvicorn, configured from the environment.

Configuration problems stop start-up with one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from types import FrameType

import uvicorn
from pydantic import ValidationError

from mrtr_worker.app import Worker, create_app
from mrtr_worker.config import WorkerSettings
from mrtr_worker.keyring import KeyRing, KeyRingError


def _config_error(message: str) -> int:
    print(f"mrtr-worker: configuration error: {message}", file=sys.stderr)
    return 2


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"])
        name = f"MRTR_WORKER_{field.upper()}" if field else "settings"
        parts.append(f"{name}: {error['msg']}")
    return "; ".join(parts)


def main() -> int:
    try:
        settings = WorkerSettings()
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
    )
    server = DrainingServer(config, app.state.worker)
    server.run()
    return 0


class DrainingServer(uvicorn.Server):
    """uvicorn, but SIGTERM drains first: computations hand back before the process goes.

    uvicorn's own graceful shutdown waits for in-flight requests; starting the
    drain at the signal makes those requests end at their next step boundary
    (handing their state back) instead of running to completion. An admin
    drain ends the process the same way once the instance is idle.
    """

    def __init__(self, config: uvicorn.Config, worker: Worker) -> None:
        super().__init__(config)
        self._worker = worker
        worker.lifecycle.on_drained = self._exit_when_drained

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._worker.drain()
        super().handle_exit(sig, frame)

    def _exit_when_drained(self) -> None:
        self.should_exit = True


if __name__ == "__main__":
    raise SystemExit(main())
