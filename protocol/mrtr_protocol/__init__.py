"""The fleet's wire, in one place: what every package here agrees on when it speaks or reads MCP.

* `wire`: the protocol version, the per-request `_meta`, the request headers (the SDK's encoding).
* `events`: a reply body (JSON or server-sent events) to its JSON-RPC messages.
* `rounds`: the round hint (`_meta["mrtr-cluster.dev/round"]`) and the hand-back reasons.
* `tasks`: the tasks extension (`io.modelcontextprotocol/tasks`): its id, methods and statuses.
* `instance`: the headers that name the worker that served a round.
* `metrics`: a Prometheus text page, read.
"""

from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.metrics import MetricsPage
from mrtr_protocol.rounds import HAND_BACK_REASONS, RETRYABLE_STATUSES, ROUND_META_KEY, EndOfRound, end_reason
from mrtr_protocol.wire import NAMED_METHODS, PROTOCOL_VERSION, encode_request, request_headers, request_meta

__all__ = [
    "HAND_BACK_REASONS",
    "NAMED_METHODS",
    "PROTOCOL_VERSION",
    "RETRYABLE_STATUSES",
    "ROUND_META_KEY",
    "WORKER_ID_HEADER",
    "WORKER_VERSION_HEADER",
    "EndOfRound",
    "MetricsPage",
    "encode_request",
    "end_reason",
    "request_headers",
    "request_meta",
]
