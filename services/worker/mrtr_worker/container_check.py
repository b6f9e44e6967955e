"""The image's HEALTHCHECK: `python3 -m mrtr_worker.container_check [url]`; exit 0 when the worker is well.

Why not "ready" alone: a worker that steps aside as slow (`MRTR_WORKER_STEP_ASIDE`) answers `/readyz` with
429 (`mrtr_protocol.fleet.Readiness.STEPPED_ASIDE`) to leave the proxy's rotation, and a swarm replaces a task
whose check fails a few times in a row. A worker asking to be skipped for a few seconds must not be restarted
for it; a draining one (503), or one that does not answer, still fails. Only the status is read. Standard
library only (the contract module is too): it runs every 2 s in the container and must start fast.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from mrtr_protocol.fleet import READINESS_PATH, Readiness

READYZ = f"http://127.0.0.1:8000{READINESS_PATH}"
TIMEOUT_SECONDS = 1.0
WELL = frozenset({Readiness.READY, Readiness.STEPPED_ASIDE})


def well(url: str = READYZ, timeout: float = TIMEOUT_SECONDS) -> bool:
    """Ready, or not ready only because it steps aside."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (a fixed local URL)
            status = int(answer.status)
    except urllib.error.HTTPError as refused:
        with refused:
            status = refused.code
    except (OSError, ValueError):
        return False
    return Readiness.of(status) in WELL


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return 0 if well(args[0] if args else READYZ) else 1


if __name__ == "__main__":
    raise SystemExit(main())
