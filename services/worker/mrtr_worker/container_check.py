"""The image's HEALTHCHECK: `python3 -m mrtr_worker.container_check [url]`; exit 0 when the worker is well.

Why not `/readyz`'s status alone: a worker that steps aside as slow (`MRTR_WORKER_STEP_ASIDE`) answers 503 to
leave the proxy's rotation, and a swarm replaces a task whose check fails a few times in a row. A worker asking
to be skipped for a few seconds must not be restarted for it; a draining one, or one that does not answer,
still fails. Standard library only: it runs every 2 s in the container and must start fast.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

READYZ = "http://127.0.0.1:8000/readyz"
TIMEOUT_SECONDS = 1.0


def well(url: str = READYZ, timeout: float = TIMEOUT_SECONDS) -> bool:
    """Ready, or not ready only because it steps aside (`{"slow": true}` in the 503's body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (a fixed local URL)
            return bool(answer.status == 200)
    except urllib.error.HTTPError as refused:
        with refused:
            if refused.code != 503:
                return False
            try:
                said = json.loads(refused.read())
            except ValueError:
                return False
            return isinstance(said, dict) and said.get("slow") is True
    except (OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return 0 if well(args[0] if args else READYZ) else 1


if __name__ == "__main__":
    raise SystemExit(main())
