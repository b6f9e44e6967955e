"""The directed probes: each sends a `requestState` where the load would only by chance, and reads the answer.

(a) a state sealed by instance A, retried on instance B of the same version; (b) a state sealed by
version 1, retried on version 2; (c) a state with one character changed; (d) a state sealed for one
principal, retried under another's token; (e) whether the server speaks 2026-07-28 without a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from mrtr_client import Client, MrtrError, RetryPolicy, RpcError
from mrtr_fleet_check.rounds import RoundReply, send_round
from mrtr_fleet_check.scenario import Call
from mrtr_fleet_check.verdict import Probe, ProbeResult, Protocol
from mrtr_protocol.wire import PROTOCOL_VERSION_HEADER

EARLIER_VERSION = "2025-06-18"
"""The protocol version a session-keeping server speaks; asked only when it refuses 2026-07-28."""
SESSION_HEADER = "mcp-session-id"
MAX_SETUP_ROUNDS = 8
"""Rounds spent answering questions on one instance while waiting for it to hand back a state."""


@dataclass(frozen=True)
class Sealed:
    """A state one instance handed back, with the call it belongs to and the answers to its questions."""

    call: Call
    state: str
    responses: dict[str, Any]


def protocol_probe(http: httpx.Client, url: str, token: str | None = None) -> Protocol:
    listed = send_round(http, url, "tools/list", {}, {}, token=token)
    if listed.kind != "error":
        return Protocol(speaks_current=True)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": EARLIER_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mrtr-fleet-check", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", PROTOCOL_VERSION_HEADER: EARLIER_VERSION}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        answer = http.post(url, json=body, headers=headers)
        issues = SESSION_HEADER in answer.headers
    except httpx.HTTPError:
        issues = False
    return Protocol(speaks_current=False, issues_sessions=issues, message=listed.message)


def missing_tools(url: str, calls: Sequence[Call], token: str | None) -> str | None:
    """Why the scenario cannot run on this server (a tool it does not list), or None.

    Without this, a misspelt tool would fail alike on one instance and behind the proxy, and pass.
    """
    with Client(url, token=token) as client:
        listed = sorted(str(tool.get("name")) for tool in client.list_tools())
    unknown = sorted({call.tool for call in calls} - set(listed))
    if unknown:
        return f"the server lists no tool {', '.join(unknown)} (it lists: {', '.join(listed) or 'none'})"
    return None


def _responses(call: Call, reply: RoundReply) -> dict[str, Any]:
    inputs = call.inputs()
    return {key: inputs.answer(key, request) for key, request in reply.questions.items()}


def seal_on(http: httpx.Client, url: str, calls: Sequence[Call], token: str | None = None) -> Sealed | None:
    """The first state an instance hands back for one of `calls` (its questions answered there), or None."""
    for call in calls:
        params = {"name": call.tool, "arguments": call.arguments}
        capabilities = call.inputs().capabilities()
        responses: dict[str, Any] | None = None
        for _ in range(MAX_SETUP_ROUNDS):
            reply = send_round(http, url, "tools/call", params, capabilities, responses=responses, token=token)
            if reply.kind != "input_required":
                break
            if reply.state:
                return Sealed(call, reply.state, _responses(call, reply))
            responses = _responses(call, reply)
    return None


def present(
    http: httpx.Client, url: str, sealed: Sealed, *, state: str | None = None, token: str | None = None
) -> ProbeResult:
    """Retry `sealed`'s call on `url` with its state (or `state` in its place): accepted, or refused with why."""
    params = {"name": sealed.call.tool, "arguments": sealed.call.arguments}
    capabilities = sealed.call.inputs().capabilities()
    reply = send_round(
        http,
        url,
        "tools/call",
        params,
        capabilities,
        responses=sealed.responses,
        state=state or sealed.state,
        token=token,
    )
    if reply.kind == "error":
        return ProbeResult(Probe.REFUSED, reply.message)
    return ProbeResult(Probe.ACCEPTED, f"the server answered {reply.kind}")


def tampered(state: str) -> str:
    """`state` with its middle character changed for another of the same kind (digit, lower, upper case)."""
    middle = len(state) // 2
    char = state[middle]
    if char.isdigit():
        other = "1" if char != "1" else "2"
    elif char.islower():
        other = "a" if char != "a" else "b"
    else:
        other = "A" if char != "A" else "B"
    return state[:middle] + other + state[middle + 1 :]


NO_STATE = ProbeResult(Probe.NOT_APPLICABLE, "no call of the scenario handed back a requestState")


def across_instances(
    http: httpx.Client, first: str, second: str, calls: Sequence[Call], token: str | None
) -> ProbeResult:
    sealed = seal_on(http, first, calls, token)
    return NO_STATE if sealed is None else present(http, second, sealed, token=token)


def tamper(http: httpx.Client, url: str, calls: Sequence[Call], token: str | None) -> ProbeResult:
    sealed = seal_on(http, url, calls, token)
    return NO_STATE if sealed is None else present(http, url, sealed, state=tampered(sealed.state), token=token)


def foreign_principal(http: httpx.Client, url: str, calls: Sequence[Call], tokens: Sequence[str]) -> ProbeResult:
    if len(tokens) < 2:
        return ProbeResult(Probe.NOT_APPLICABLE, "the scenario gives no second bearer token (`tokens`)")
    sealed = seal_on(http, url, calls, tokens[0])
    return NO_STATE if sealed is None else present(http, url, sealed, token=tokens[1])


@dataclass(frozen=True)
class Answer:
    """A call's answer reduced to what is compared: its structured content, else its text; or the error."""

    shown: str
    error: bool = False


def answer_of(structured: Any, text: str, is_error: bool) -> Answer:
    return Answer(repr(structured) if structured is not None else repr(text), is_error)


def reference_answer(url: str, call: Call, token: str | None) -> Answer:
    """One instance's answer to `call`, every round on that instance: what the load's answers are held to."""
    try:
        with Client(url, call.inputs(), policy=RetryPolicy(restart_unreadable_state=False), token=token) as client:
            done = client.call_tool(call.tool, call.arguments, task=call.task)
    except RpcError as exc:
        return Answer(f"error: {exc.message}", error=True)
    except MrtrError as exc:
        return Answer(f"lost: {exc}", error=True)
    return answer_of(done.structured, done.text, done.is_error)
