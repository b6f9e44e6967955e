"""The MRTR retry loop, free of I/O.

The loop is a generator: it yields what it needs done (`Send` a request, `Ask` the input handler,
`Sleep`) and is sent back what happened. The sync and async clients are thin runners around it, so
both follow one set of rules (`docs/client.md`): a new request per retry with the byte-exact
`requestState`, an undelivered request sent again with the last state within a retry budget, a refused
credential final, rounds capped, and every result read strictly (`_results`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mrtr_client import _results, _wire
from mrtr_client._stream import StreamStep
from mrtr_client.errors import AuthenticationFailed, ProtocolViolation, RetryBudgetExhausted, RoundsExceeded, RpcError
from mrtr_client.trace import CallResult, CallTrace, Hop, Question
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import BUSY, COMPLETE, ERROR, RETRYABLE_STATUSES, TRANSPORT, end_reason, round_hint
from mrtr_protocol.tasks import TASK_RESULT_TYPE
from mrtr_protocol.wire import request_headers, request_meta

AUTH_STATUSES = frozenset({401, 403})
_WORKER_ID, _WORKER_VERSION = WORKER_ID_HEADER.lower(), WORKER_VERSION_HEADER.lower()
"""Lower case: a `Reply` may carry a plain dict of lower-cased headers, not only httpx's case-blind ones."""


@dataclass(frozen=True)
class RetryPolicy:
    max_rounds: int = 32
    """input_required rounds before giving up (the SDK client's default is 10)."""
    max_delivery_failures: int = 8
    """Consecutive undelivered or unanswered attempts before giving up."""
    backoff_initial: float = 0.05
    backoff_cap: float = 1.0
    max_hint_delay: float = 5.0
    """Upper bound on a server's retry hint, so a bad hint cannot stall a caller."""
    max_busy_retries: int = 2
    """Times a call refused as busy (`mrtr_protocol.busy`) is sent again after the server's hint, then the
    refusal is raised: a budget, as gRPC's retry throttling, so a full fleet sees no storm of retries."""
    restart_unreadable_state: bool = True
    """Start over once when the server says it cannot use the state (for example a layout no instance reads)."""
    max_input_requests: int = 16
    """Questions one round may ask; a server asking more is misbehaving, not waiting for a user."""
    max_state_bytes: int = 1024 * 1024
    """Size of a `requestState` the client agrees to hold and send back."""


@dataclass(frozen=True)
class Send:
    request_id: int
    body: bytes
    headers: dict[str, str]
    timeout: float | None = None
    """Seconds to wait for this one request instead of the client's timeout (a cancel on the way out)."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_ms: float


@dataclass(frozen=True)
class Failure:
    """The request was not delivered, or no answer came back."""

    problem: str
    elapsed_ms: float


@dataclass(frozen=True)
class Ask:
    requests: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Observe:
    """Something the caller may want to see as it happens (a task's poll); the runner hands it on and sends None."""

    event: Any


Step = Send | Ask | Sleep | Observe | StreamStep
Loop = Generator[Step, Any, CallResult]


def new_id_source() -> Iterator[int]:
    return itertools.count(1)


def mrtr_loop(
    method: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    ids: Iterator[int],
    policy: RetryPolicy,
    extra_headers: Mapping[str, str] | None = None,
    *,
    accept_task: bool = False,
) -> Loop:
    """Drive one request to its complete result (or, with `accept_task`, a `CreateTaskResult`); see above."""
    trace = CallTrace()
    state: str | None = None
    responses: dict[str, Any] | None = None
    rounds = failures = restarts = busy = 0
    bodies = _wire.RoundBodies(method, {**params, "_meta": request_meta(capabilities, _wire.CLIENT_INFO)})
    headers = request_headers(method, params, extra_headers)  # the same every round
    while True:
        request_id = next(ids)
        outcome = yield Send(request_id, bodies.body(request_id, responses, state), dict(headers))
        if isinstance(outcome, Failure) or outcome.status in RETRYABLE_STATUSES:
            failures += 1
            trace.hops.append(_transport_hop(outcome))
            if failures > policy.max_delivery_failures:
                raise RetryBudgetExhausted(failures, trace.hops[-1].detail or "unknown")
            yield Sleep(min(policy.backoff_cap, policy.backoff_initial * 2 ** (failures - 1)))
            continue
        failures = 0
        if outcome.status in AUTH_STATUSES:
            raise AuthenticationFailed(outcome.status, _auth_problem(outcome))
        message = _parse(outcome, request_id)
        if "error" in message:
            error = _rpc_error(message["error"], outcome.status)
            wait_ms = error.retry_after_ms
            trace.hops.append(_hop(outcome, ERROR if wait_ms is None else BUSY, state, detail=error.message))
            if error.restart_advised and state is not None and policy.restart_unreadable_state and restarts == 0:
                restarts += 1
                state, responses = None, None
                continue
            if wait_ms is not None and busy < policy.max_busy_retries:
                busy += 1
                yield Sleep(min(policy.max_hint_delay, wait_ms / 1000))
                continue
            raise error
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolViolation("response has neither result nor error")
        result_type = _results.result_type(result, method)
        if result_type == COMPLETE:
            _results.check_complete(method, result)
            trace.hops.append(_hop(outcome, COMPLETE, None))
            return CallResult(result=result, trace=trace)
        if result_type == TASK_RESULT_TYPE and accept_task:
            trace.hops.append(_hop(outcome, TASK_RESULT_TYPE, None))
            return CallResult(result=result, trace=trace)
        if result_type != _results.INPUT_REQUIRED:
            raise ProtocolViolation(f"{method} result has unknown resultType {result_type!r}")
        if method not in _results.INPUT_METHODS:
            raise ProtocolViolation(
                f"{method} answered input_required, which only tools/call, prompts/get and resources/read may return"
            )
        rounds += 1
        if rounds > policy.max_rounds:
            raise RoundsExceeded(policy.max_rounds)
        state, requests = _round_parts(result, method, capabilities, policy)
        trace.hops.append(_hop(outcome, end_reason(result), state))
        if requests:
            trace.questions.extend(Question(key, str(req.get("method")), rounds) for key, req in requests.items())
            responses = yield Ask(requests)
        else:
            responses = None
            delay_ms = (round_hint(result) or {}).get("retryAfterMs")
            if isinstance(delay_ms, int | float) and delay_ms > 0:
                yield Sleep(min(policy.max_hint_delay, delay_ms / 1000))


def _round_parts(
    result: Mapping[str, Any], method: str, capabilities: Mapping[str, Any], policy: RetryPolicy
) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """An `input_required` result's `requestState` and `inputRequests`, each as the wire allows it."""
    state = result.get("requestState")
    if state is not None and not isinstance(state, str):
        raise ProtocolViolation(f"{method}: requestState is {type(state).__name__}, not a string")
    requests = result.get("inputRequests", {})
    if not state and not requests:
        raise ProtocolViolation(f"{method}: input_required without inputRequests or requestState")
    _check_round_limits(state, requests, policy)
    return state, _results.check_input_requests(requests, capabilities, method)


def _check_round_limits(state: str | None, requests: Any, policy: RetryPolicy) -> None:
    """A server cannot make the client hold a huge state or answer an unbounded number of questions."""
    if not isinstance(requests, dict):
        raise ProtocolViolation("inputRequests is not an object")
    if len(requests) > policy.max_input_requests:
        raise ProtocolViolation(f"{len(requests)} input requests in one round (at most {policy.max_input_requests})")
    if state is not None and len(state) > policy.max_state_bytes:
        raise ProtocolViolation(f"requestState of {len(state)} bytes (at most {policy.max_state_bytes})")


def _auth_problem(reply: Reply) -> str:
    """The server's own words (RFC 6750 error_description) when it gives them."""
    try:
        body = json.loads(reply.body)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error_description"), str):
        return str(body["error_description"])
    return "credentials refused"


def _parse(reply: Reply, request_id: int) -> dict[str, Any]:
    content_type = reply.headers.get("content-type", "")
    try:
        return _wire.parse_reply(content_type, reply.body, request_id)
    except ProtocolViolation as exc:
        raise ProtocolViolation(f"HTTP {reply.status}: {exc}") from None


def _rpc_error(error: Any, http_status: int) -> RpcError:
    code, message = _results.check_error(error)
    return RpcError(code, message, error.get("data"), http_status=http_status)


def _hop(reply: Reply, reason: str, state: str | None, *, detail: str | None = None) -> Hop:
    return Hop(
        instance=reply.headers.get(_WORKER_ID),
        version=reply.headers.get(_WORKER_VERSION),
        reason=reason,
        http_status=reply.status,
        elapsed_ms=reply.elapsed_ms,
        state_bytes=len(state) if state else 0,
        detail=detail,
    )


def _transport_hop(outcome: Reply | Failure) -> Hop:
    if isinstance(outcome, Failure):
        return Hop(None, None, TRANSPORT, None, outcome.elapsed_ms, detail=outcome.problem)
    return Hop(
        outcome.headers.get(_WORKER_ID),
        outcome.headers.get(_WORKER_VERSION),
        TRANSPORT,
        outcome.status,
        outcome.elapsed_ms,
        detail=f"HTTP {outcome.status}",
    )
