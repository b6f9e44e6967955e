"""`python -m mrtr_worker` (and the `mrtr-worker` command): run one worker.

The step pool's processes are started with "spawn", which imports this module again in each of
them (as `__mp_main__`). So it imports nothing at the top: the worker itself (the MCP SDK, the web
stack) is loaded only when the module runs as the program, and a pool process loads only the
computations it steps.
"""

from __future__ import annotations


def main() -> int:
    from mrtr_worker.listener.serve import main as serve

    return serve()


if __name__ == "__main__":
    raise SystemExit(main())
