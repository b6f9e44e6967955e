"""Real sealed states to fuzz: taken from a worker's own input_required answers, and how to finish each call.

Each `Origin` is one round of a real call that ended `input_required`: its
request (method, params, capabilities), the sealed `requestState` the worker
sent, and the answers a correct client sends back with it. Elicitation,
sampling, roots and URL rounds come from the demo pack; hand-backs (no
questions, state only) and a question asked midway come from the compute pack
on a worker with a 1 ms time slice, so every round ends after a step or two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mrtr_worker.compute import hashchain
from tests.fuzz.calls import ELICIT, HAIKU_ANSWER, ROOTS, SAMPLING, Call
from tests.support.wire import Exchange, McpHttp

HOP_BY_HOP = {
    "MRTR_WORKER_MAX_SLICE_MS": "1",
    "MRTR_WORKER_MIN_SLICE_MS": "0",
    "MRTR_WORKER_PRIORITY_AFTER_HOPS": "100000",
}
"""Worker settings under which a computation hands back after every step or two, and never ages into priority."""

ANSWERS: dict[str, dict[str, Any]] = {
    "github_login": {"action": "accept", "content": {"name": "octocat"}},
    "google_login": {"action": "accept", "content": {"name": "octo"}},
    "haiku": HAIKU_ANSWER,
    "roots": {"roots": [{"uri": "file:///work"}]},
    "vault": {"action": "accept"},
    "preferred_name": {"action": "accept", "content": {"name": "Ada"}},
    "detail": {"action": "accept", "content": {"detail": "full"}},
    "refine": {"action": "accept", "content": {"refine": True}},
}
"""A correct client's answer to every question the fuzzed tools ask."""

PRIMES = Call(
    "primes", "tools/call", {"name": "count_primes", "arguments": {"limit": 5_000_000, "segment": 250_000}}, {}
)
"""20 steps of a few milliseconds each: every step outlasts the 1 ms slice on any machine, so the call hands
back after nearly every step (steps of microseconds fitted a whole call into two slices on a quiet machine)."""
HASH = Call(
    "hash", "tools/call", {"name": "hash_chain", "arguments": {"seed": "fuzz", "iterations": 3_000, "chunk": 200}}, {}
)
PI = Call(
    "pi",
    "tools/call",
    {"name": "estimate_pi", "arguments": {"samples": 2_000, "seed": 7, "ask_to_refine": True, "chunk": 200}},
    ELICIT,
)
EXPECTED: dict[str, dict[str, Any]] = {
    "primes": {"count": 348_513},  # pi(5,000,000)
    "hash": {"digest": hashchain.reference("fuzz", 3_000), "iterations": 3_000},
}


@dataclass(frozen=True)
class Origin:
    label: str
    call: Call
    state: str
    answers: dict[str, Any] | None
    """The inputResponses a correct retry carries (None for a hand-back: retry with the state alone)."""

    def params(self, state: Any, answers: dict[str, Any] | None = None, *, call: Call | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {**(call or self.call).params, "requestState": state}
        chosen = self.answers if answers is None else answers
        if chosen is not None:
            params["inputResponses"] = chosen
        return params

    @property
    def binding(self) -> tuple[str, str, str]:
        return binding(self.call.method, self.call.params)


def binding(method: str, params: dict[str, Any]) -> tuple[str, str, str]:
    """What a sealed state is bound to: method, target, canonical arguments (the SDK's request identity)."""
    target = str(params.get("uri", "")) if method == "resources/read" else str(params.get("name", ""))
    arguments = {} if method == "resources/read" else (params.get("arguments") or {})
    return method, target, json.dumps(arguments, sort_keys=True, separators=(",", ":"))


@dataclass
class Origins:
    """The states of one fuzz module, each collected once from the worker under test."""

    by_label: dict[str, Origin] = field(default_factory=dict)
    primes_chain: list[str] = field(default_factory=list)
    """Every hand-back state of one `count_primes` run, first to last."""

    def __getitem__(self, label: str) -> Origin:
        return self.by_label[label]

    @property
    def labels(self) -> list[str]:
        return sorted(self.by_label)


def collect(mcp: McpHttp) -> Origins:
    """Run each call to its first input_required round (and the primes call to its end) on the real worker."""
    found = Origins()

    def first_round(label: str, call: Call, answers: dict[str, Any] | None) -> None:
        result = ask(mcp, call, call.params).result
        assert result["resultType"] == "input_required", result
        found.by_label[label] = Origin(label, call, result["requestState"], answers)

    link = Call("link", "tools/call", {"name": "link_accounts", "arguments": {}}, ELICIT)
    first_round("link-1", link, _pick("github_login"))
    second = ask(mcp, link, found["link-1"].params(found["link-1"].state)).result
    found.by_label["link-2"] = Origin("link-2", link, second["requestState"], _pick("google_login"))
    first_round(
        "haiku",
        Call("haiku", "tools/call", {"name": "write_haiku", "arguments": {"topic": "rain"}}, SAMPLING),
        _pick("haiku"),
    )
    first_round("roots", Call("roots", "tools/call", {"name": "scan_roots", "arguments": {}}, ROOTS), _pick("roots"))
    # connect_vault is not an origin: it serves signed-in callers with a vault store only, and completes
    # on the vault page, not on a retry (tests/worker/vault/test_vault_routes.py).
    first_round("prompt", Call("prompt", "prompts/get", {"name": "onboarding"}, ELICIT), _pick("preferred_name"))
    first_round("resource", Call("resource", "resources/read", {"uri": "mrtr://reports/7"}, ELICIT), _pick("detail"))
    first_round("hash", HASH, None)
    found.primes_chain = hand_backs(mcp, PRIMES)
    found.by_label["primes"] = Origin("primes", PRIMES, found.primes_chain[len(found.primes_chain) // 2], None)
    state, question = _until_question(mcp, PI, "refine")
    found.by_label["pi"] = Origin("pi", PI, state, {"refine": question})
    return found


def ask(mcp: McpHttp, call: Call, params: dict[str, Any]) -> Exchange:
    return mcp.call(call.method, params, capabilities=call.capabilities)


def finish(mcp: McpHttp, origin: Origin, first: dict[str, Any], *, max_rounds: int = 400) -> dict[str, Any]:
    """Drive a call on from an answer to its complete result, answering every question correctly."""
    result = first
    for _ in range(max_rounds):
        if result.get("resultType") != "input_required":
            return result
        requests = result.get("inputRequests") or {}
        answers = {key: ANSWERS[key] for key in requests}
        params = origin.params(result["requestState"], answers)
        if not answers:
            params.pop("inputResponses", None)
        result = ask(mcp, origin.call, params).result
    raise AssertionError(f"{origin.label} did not complete in {max_rounds} rounds")


def hand_backs(mcp: McpHttp, call: Call) -> list[str]:
    """Every state a computation handed back on its way to completion."""
    states: list[str] = []
    result = ask(mcp, call, call.params).result
    while result.get("resultType") == "input_required":
        assert not result.get("inputRequests"), result
        states.append(result["requestState"])
        result = ask(mcp, call, {**call.params, "requestState": states[-1]}).result
    assert result["structuredContent"] == EXPECTED[call.label], result
    assert len(states) >= 3, f"only {len(states)} hand-backs: the 1 ms time slice did not apply"
    return states


def _until_question(mcp: McpHttp, call: Call, key: str) -> tuple[str, dict[str, Any]]:
    result = ask(mcp, call, call.params).result
    while not (result.get("inputRequests") or {}).get(key):
        assert result.get("resultType") == "input_required", result
        result = ask(mcp, call, {**call.params, "requestState": result["requestState"]}).result
    state: str = result["requestState"]
    return state, ANSWERS[key]


def _pick(*keys: str) -> dict[str, Any]:
    return {key: ANSWERS[key] for key in keys}
