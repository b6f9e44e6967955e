"""The contract between a worker and the proxy in front of it, written once: both sides import it.

Readiness (``GET /readyz``) is told by the status code alone, so the proxy (or any
load balancer) never reads the body:

* 200, `Readiness.READY`: in rotation.
* 503, `Readiness.NOT_READY`: out of rotation (draining, not started); its return to
  200 is capacity that joined, and the proxy tells the other workers (the rebalance hook).
* 429, `Readiness.STEPPED_ASIDE`: the worker knows it is slow against its peers and
  would hand every round on (``MRTR_WORKER_STEP_ASIDE``), so it asks to be skipped. It
  is alive and comes back by itself when it wants a probe round; that return brings no
  capacity, so it is no join. Any load balancer that only routes to 2xx skips it too,
  and a container check may keep it (it is not broken).

Any other status, or no answer, is out of rotation like 503.

The rebalance hook (``POST /admin/rebalance``): capacity joined elsewhere, so calls
queued on this worker for a compute slot leave the queue now (when the shedding
policy lets them move) and are handed back; their retries land on the new capacity.
Only the operator may call it: the worker's admin token (``MRTR_WORKER_ADMIN_TOKEN``)
as ``Authorization: Bearer <token>``, which the proxy holds as ``MRTR_LB_ADMIN_TOKEN``.
The answer is ``{"moved": N}``: the calls that left the queue for this call.

Standard library only: the proxy imports this module without the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

READINESS_PATH = "/readyz"


class Readiness(IntEnum):
    """What a worker's ``/readyz`` status says about its place in the rotation."""

    READY = 200
    NOT_READY = 503
    STEPPED_ASIDE = 429

    @classmethod
    def of(cls, status: int) -> Readiness:
        """Read a status: an unknown one (a 500, a 404 from a server with no ``/readyz``) is not ready."""
        try:
            return cls(status)
        except ValueError:
            return cls.NOT_READY


REBALANCE_PATH = "/admin/rebalance"
REBALANCE_METHOD = "POST"
MOVED = "moved"
"""The rebalance answer's field: how many queued calls left the queue for this call."""


def rebalance_answer(moved: int) -> dict[str, int]:
    """The worker's answer to a rebalance call."""
    if moved < 0:
        raise ValueError(f"moved must be >= 0, not {moved}")
    return {MOVED: moved}


def moved_by(answer: object) -> int:
    """The calls a rebalance answer says it moved; a clear error for any other shape."""
    if isinstance(answer, Mapping):
        moved = answer.get(MOVED)
        if isinstance(moved, int) and not isinstance(moved, bool) and moved >= 0:
            return moved
    raise ValueError(f"not a rebalance answer (want {{{MOVED!r}: N}} with N >= 0): {answer!r}")
