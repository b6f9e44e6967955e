"""The resume fast path never serves a state the SDK's path refuses: a generated corpus of states.

Real states (sealed by a worker's own boundary and key ring, anonymously and for alice) have
each envelope claim (`v`, `iat`, `exp`, `m`, `t`, `a`, `s`, `aud`, `p`) dropped, retyped and
mutated, re-sealed as only a key holder could; around them, whole-state changes (another key,
tampered bytes, a payload that is not a claims object) and requests that do not fit the state
(other arguments, another tool). Each is presented by an anonymous caller, alice and bob to two
in-process workers, the fast path on in one and off in the other. The SDK's path (off) is the
judge: whatever it refuses, the fast path must leave to it (not served, the same bytes, the
rejection logged and counted once, the key that opened it counted once); whatever it accepts, the fast
path serves with the same answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_worker.app import create_app
from mrtr_worker.edge.front_door import FrontDoor
from mrtr_worker.sealing.keyring import KeyRing, new_ring
from tests.worker.edge.resume_pair import (
    ARGUMENTS,
    Answer,
    digest_for,
    envelope,
    first_state,
    params,
    post,
    request,
    running,
    seal,
    served,
    settings,
)

CLAIMS = ("v", "iat", "exp", "m", "t", "a", "s", "aud", "p")
OTHER_ARGUMENTS = {"limit": 3_000, "segment": 1_000}
RETYPED: tuple[Any, ...] = (None, "1", 1, 1.5, True, [], {}, float("nan"), float("inf"), float("-inf"))
"""Every JSON type (and the floats `json` lets through) in place of a claim."""
CALLERS = ("anonymous", "alice", "bob")
REFUSED = "invalid_request_state"


@dataclass(frozen=True)
class Outcome:
    """One request's answers with the fast path on and off, and what each worker counted for it."""

    on: Answer
    off: Answer
    served: float
    counted_on: tuple[float, float]
    counted_off: tuple[float, float]

    @property
    def refused(self) -> bool:
        """The SDK's path refused the state (its frozen -32602, a reason only in its log)."""
        status, _, body = self.off
        error = json.loads(body).get("error") if status == 400 else None
        return isinstance(error, dict) and (error.get("data") or {}).get("reason") == REFUSED


def _mutations(now: float, other_digest: str, bobs_claim: str) -> dict[str, dict[str, Any]]:
    """Claim name -> the values put in its place (besides every type and dropping it)."""
    return {
        "v": {"0": 0, "2": 2, "'1'": "1"},
        "iat": {"future": now + 3_600, "just inside the skew": now + 30, "long ago": now - 100_000},
        "exp": {"expired long ago": 1.0, "just expired": now - 1, "far ahead": now + 100_000},
        "m": {"prompts/get": "prompts/get", "resources/read": "resources/read", "TOOLS/CALL": "TOOLS/CALL"},
        "t": {"another tool": "hash_chain", "empty": "", "upper case": "COUNT_PRIMES"},
        "a": {"other arguments": other_digest, "empty": "", "garbage": "x" * 22},
        "s": {"empty": "", "not the worker's": "not a state"},
        "aud": {"foreign": "another-service", "empty": "", "upper case": "MRTR-WORKER"},
        "p": {"bob's": bobs_claim, "garbage": "x" * 32, "empty": ""},
    }


def _corpus(
    ring: KeyRing, states: dict[str, str], other_digest: str, bobs_claim: str
) -> dict[str, tuple[str, Any, dict[str, Any]]]:
    """Name -> (tool, requestState, arguments): every state to present, each by every caller."""
    corpus: dict[str, tuple[str, Any, dict[str, Any]]] = {}
    mutations = _mutations(time.time(), other_digest, bobs_claim)
    for base, token in states.items():
        claims = envelope(ring, token)

        def add(name: str, changed: dict[str, Any], base: str = base) -> None:
            payload = json.dumps(changed, separators=(",", ":")).encode()
            corpus[f"{base}: {name}"] = ("count_primes", seal(ring, payload), ARGUMENTS)

        corpus[f"{base}: untouched"] = ("count_primes", token, ARGUMENTS)
        for claim in CLAIMS:
            add(f"{claim} dropped", {k: v for k, v in claims.items() if k != claim})
            for value in RETYPED:
                add(f"{claim} as {json.dumps(value)}", {**claims, claim: value})
            for label, value in mutations[claim].items():
                add(f"{claim} {label}", {**claims, claim: value})
        for name, payload in {
            "not JSON": b"not json",
            "a JSON list": b"[1, 2]",
            "a JSON string": b'"state"',
            "an empty object": b"{}",
        }.items():
            corpus[f"{base}: {name}"] = ("count_primes", seal(ring, payload), ARGUMENTS)
        foreign = seal(new_ring("other"), json.dumps(claims).encode())
        corpus[f"{base}: another key"] = ("count_primes", foreign, ARGUMENTS)
        for at in (3, len(token) // 2, len(token) - 2):
            tampered = token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]
            corpus[f"{base}: tampered at {at}"] = ("count_primes", tampered, ARGUMENTS)
        corpus[f"{base}: other arguments"] = ("count_primes", token, OTHER_ARGUMENTS)
        corpus[f"{base}: another tool"] = ("hash_chain", token, {"seed": "s", "iterations": 10})
        corpus[f"{base}: as a number"] = ("count_primes", 7, ARGUMENTS)
    return corpus


def _counted(app: FrontDoor) -> tuple[float, float]:
    """(rejections, keys opened) in the app's registry."""
    registry = app.state.worker.metrics.registry
    total = [0.0, 0.0]
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name == "mrtr_worker_state_rejections_total":
                total[0] += sample.value
            elif sample.name == "mrtr_worker_state_keys_total" and sample.labels.get("operation") == "opened":
                total[1] += sample.value
    return total[0], total[1]


async def _present(app: FrontDoor, body: bytes, headers: dict[str, str]) -> tuple[Answer, tuple[float, float]]:
    before = _counted(app)
    answer = await post(app, body, headers)
    after = _counted(app)
    return answer, (after[0] - before[0], after[1] - before[1])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    directory = tmp_path_factory.mktemp("issuer")
    issuer = DevIssuer.ensure(directory)
    bearer = {name: {"Authorization": f"Bearer {issuer.mint(name)}"} for name in ("alice", "bob")}
    headers: dict[str, dict[str, str]] = {"anonymous": {}, **bearer}
    ring = new_ring("corpus-1")
    on = create_app(settings(ring, directory / PUBLIC_KEY_NAME, fast=True))
    off = create_app(settings(ring, directory / PUBLIC_KEY_NAME, fast=False))

    async def run() -> dict[str, Outcome]:
        async with running(on, off):
            states = {"anonymous": await first_state(off), "alice's": await first_state(off, **bearer["alice"])}
            bobs_claim = envelope(ring, await first_state(off, **bearer["bob"]))["p"]
            other_digest = await digest_for(off, ring, OTHER_ARGUMENTS)
            out = {}
            for name, (tool, state, arguments) in _corpus(ring, states, other_digest, bobs_claim).items():
                for caller in CALLERS:
                    body, call_headers = request({**params(state, arguments), "name": tool}, **headers[caller])
                    before = served(on)
                    answer_on, counted_on = await _present(on, body, call_headers)
                    delta = served(on) - before
                    answer_off, counted_off = await _present(off, body, call_headers)
                    out[f"{name}, by {caller}"] = Outcome(answer_on, answer_off, delta, counted_on, counted_off)
            return out

    return asyncio.run(run())


def test_the_corpus_has_both_verdicts_for_every_claim(outcomes: dict[str, Outcome]) -> None:
    """The properties below can fail: the SDK refuses a change of every claim, and accepts some states."""
    for claim in CLAIMS:
        assert any(o.refused for name, o in outcomes.items() if f": {claim} " in name), claim
    accepted = [name for name, o in outcomes.items() if not o.refused]
    assert "anonymous: untouched, by anonymous" in accepted
    assert "alice's: untouched, by alice" in accepted
    assert len(outcomes) - len(accepted) > 500


def test_the_fast_path_never_serves_a_state_the_sdk_refuses(outcomes: dict[str, Outcome]) -> None:
    assert [name for name, o in outcomes.items() if o.refused and o.served] == []


def test_the_fast_path_serves_every_state_the_sdk_accepts(outcomes: dict[str, Outcome]) -> None:
    assert [name for name, o in outcomes.items() if not o.refused and not o.served] == []


def test_every_answer_is_the_same_bytes_with_the_fast_path_on_and_off(outcomes: dict[str, Outcome]) -> None:
    assert [name for name, o in outcomes.items() if o.on != o.off] == []


def test_a_refusal_is_counted_once_and_the_keys_alike_either_way(outcomes: dict[str, Outcome]) -> None:
    """The fast path's look at a state leaves no trace: one rejection (the SDK's), each opened key counted once."""
    assert [name for name, o in outcomes.items() if o.counted_on != o.counted_off] == []
    assert [name for name, o in outcomes.items() if o.refused and o.counted_on[0] != 1] == []
