"""`python -m mrtr_worker`: run one worker with uvicorn, configured from the environment.

Configuration problems stop start-up with one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import uvicorn
from pydantic import ValidationError

from mrtr_worker.app import create_app
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
    except ValidationError as exc:
        return _config_error(_describe(exc))
    except KeyRingError as exc:
        return _config_error(str(exc))
    except OSError as exc:
        return _config_error(f"cannot read the key ring: {exc}")
    app = create_app(settings, ring)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=30,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
