"""The fleet's wire, in one place: what every package here agrees on when it speaks or reads MCP.

* `wire`: the protocol version, the per-request `_meta`, the request headers (the SDK's encoding).
* `events`: a reply body (JSON or server-sent events) to its JSON-RPC messages.
* `rounds`: the round hint (`_meta["mrtr-cluster.dev/round"]`) and the hand-back reasons.
* `tasks`: the tasks extension (`io.modelcontextprotocol/tasks`): its id, methods and statuses.
* `instance`: the headers that name the worker that served a round.
* `fleet`: the worker's contract with the proxy (readiness by status, the rebalance hook).

Only `wire` uses the MCP SDK, installed with the ``sdk`` extra (``mrtr-protocol[sdk]``): the proxy
depends on the package without it and imports `fleet` alone, so this module re-exports nothing from `wire`.
"""

from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import HAND_BACK_REASONS, RETRYABLE_STATUSES, ROUND_META_KEY, EndOfRound, end_reason

__all__ = [
    "HAND_BACK_REASONS",
    "RETRYABLE_STATUSES",
    "ROUND_META_KEY",
    "WORKER_ID_HEADER",
    "WORKER_VERSION_HEADER",
    "EndOfRound",
    "end_reason",
]
