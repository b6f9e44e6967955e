"""The resume fast path answers exactly as the SDK's path, and is taken only for a plain resume.

Two in-process workers (same key ring, same instance id), one with the fast path on and one
with it off, get the same requests: a resume and its broken variants. Their answers must be
the same bytes (status, headers, body); the fast path's counter shows which it served itself.
Then a computation crosses two real worker processes by the fast path and gives the exact count.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.metrics_page import MetricsPage
from mrtr_protocol.wire import encode_request, request_headers
from mrtr_worker.app import create_app
from mrtr_worker.sdk import internals as sdk
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing, new_ring
from tests.conftest import StartWorker
from tests.worker.edge.resume_pair import (
    SERVED,
    Answer,
    digest_for,
    first_state,
    params,
    post,
    request,
    reseal,
    running,
    served,
    settings,
)

HOP_SCHEDULE = {"MAX_SLICE_MS": "1", "MIN_SLICE_MS": "0", "PRIORITY_AFTER_HOPS": "1000000"}
BAD_ARGUMENTS = {"limit": -1, "segment": 1_000}


def _cases(
    ring: KeyRing, token: str, alices: str, bearer: dict[str, str], bad_digest: str
) -> dict[str, tuple[bytes, dict[str, str]]]:
    """`token` was sealed anonymously, `alices` for alice; `bearer` has the Authorization header of each caller;
    `bad_digest` binds a state to `BAD_ARGUMENTS`."""
    tampered = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    return {
        "valid": request(params(token)),
        "tampered": request(params(tampered)),
        "expired": request(params(reseal(ring, token, exp=1.0))),
        "foreign audience": request(params(reseal(ring, token, aud="another-service"))),
        "foreign key": request(params(reseal(ring, token, under=new_ring("elsewhere")))),
        "oversized": request(params("v1." + "A" * 70_000)),
        "oversized body": request(params(token, padding="x" * (1 << 20))),
        "wrong name header": request(params(token), **{"Mcp-Name": "hash_chain"}),
        "bad arguments": request(params(reseal(ring, token, a=bad_digest), BAD_ARGUMENTS)),
        "input responses": request(params(token, inputResponses={})),
        "unknown tool": request({**params(token), "name": "nope"}),
        "no state": request(params(None)),
        "valid, alice's": request(params(alices), Authorization=bearer["alice"]),
        "alice's state under bob": request(params(alices), Authorization=bearer["bob"]),
        "alice's state anonymously": request(params(alices)),
        "an anonymous state under a token": request(params(token), Authorization=bearer["bob"]),
        "malformed JSON": (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/c', request(params(token))[1]),
    }


@pytest.fixture(scope="module")
def ring() -> KeyRing:
    return new_ring("fast-1")


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory, ring: KeyRing) -> dict[str, tuple[Answer, Answer, float]]:
    """Each case's answer with the fast path on and off, and how many rounds the fast path served for it."""
    directory = tmp_path_factory.mktemp("issuer")
    issuer = DevIssuer.ensure(directory)
    bearer = {name: f"Bearer {issuer.mint(name)}" for name in ("alice", "bob")}
    on = create_app(settings(ring, directory / PUBLIC_KEY_NAME, fast=True))
    off = create_app(settings(ring, directory / PUBLIC_KEY_NAME, fast=False))

    async def run() -> dict[str, tuple[Answer, Answer, float]]:
        async with running(on, off):
            token, alices = await first_state(off), await first_state(off, Authorization=bearer["alice"])
            cases = _cases(ring, token, alices, bearer, await digest_for(off, ring, BAD_ARGUMENTS))
            out = {}
            for name, (body, headers) in cases.items():
                before = served(on)
                with_fast = await post(on, body, headers)
                out[name] = (with_fast, await post(off, body, headers), served(on) - before)
            before = served(on)
            for app in (on, off):
                app.state.worker.lifecycle.drain()  # the resumed round is handed back at once: a state sealed again
            handed_back = (await post(on, *cases["valid"]), await post(off, *cases["valid"]), served(on) - before)
            for app in (on, off):
                app.state.worker.lifecycle.undrain()
            out["handed back"] = handed_back
            before = served(on)
            interval, sdk.modern_http._SSE_PING_INTERVAL = sdk.modern_http._SSE_PING_INTERVAL, 0.0
            try:  # a round longer than the ping interval: pings on an event stream, then the answer
                streamed = await post(on, *cases["valid"])
            finally:
                sdk.modern_http._SSE_PING_INTERVAL = interval
            out["past the ping window"] = (streamed, streamed, served(on) - before)
            return out

    return asyncio.run(run())


CASES = [
    "valid",
    "tampered",
    "expired",
    "foreign audience",
    "foreign key",
    "oversized",
    "oversized body",
    "wrong name header",
    "bad arguments",
    "input responses",
    "unknown tool",
    "no state",
    "valid, alice's",
    "alice's state under bob",
    "alice's state anonymously",
    "an anonymous state under a token",
    "malformed JSON",
]


@pytest.mark.parametrize("case", CASES)
def test_the_answer_is_the_same_bytes_with_the_fast_path_on_and_off(
    answers: dict[str, tuple[Answer, Answer, float]], case: str
) -> None:
    with_fast, without, _ = answers[case]
    assert with_fast == without


@pytest.mark.parametrize("case", [*CASES, "handed back", "past the ping window"])
def test_the_fast_path_serves_only_a_plain_resume(answers: dict[str, tuple[Answer, Answer, float]], case: str) -> None:
    served = answers[case][2]
    assert served == (1 if case in ("valid", "valid, alice's", "handed back", "past the ping window") else 0)


def test_the_valid_resume_completes_and_the_errors_are_errors(answers: dict[str, tuple[Answer, Answer, float]]) -> None:
    """The table compares real outcomes: a result for the plain resume, the SDK's refusals for the others."""
    body = json.loads(answers["valid"][0][2])
    assert body["result"]["structuredContent"] == {"count": 303}
    assert json.loads(answers["valid, alice's"][0][2])["result"]["structuredContent"] == {"count": 303}
    refused = ["tampered", "expired", "foreign audience", "foreign key"]
    for case in [*refused, "alice's state under bob", "alice's state anonymously", "an anonymous state under a token"]:
        status, _, raw = answers[case][0]
        assert (status, json.loads(raw)["error"]["message"]) == (400, "Invalid or expired requestState"), case
    status, _, raw = answers["oversized"][0]
    assert status == 400
    assert json.loads(raw)["error"]["data"]["limit"] == "requestStateBytes"
    status, _, raw = answers["oversized body"][0]
    assert (status, json.loads(raw)["error"]["data"]["limit"]) == (413, "bodyBytes")
    assert json.loads(answers["bad arguments"][0][2])["result"]["isError"] is True
    assert answers["wrong name header"][0][0] == 400
    assert answers["malformed JSON"][0][0] == 400


def test_a_hand_back_is_the_same_answer_but_for_the_fresh_seal(
    answers: dict[str, tuple[Answer, Answer, float]], ring: KeyRing
) -> None:
    """A state sealed again differs in its nonce and times only (so in length): the same bytes around it,
    the same state inside."""
    codec = FleetStateCodec(ring, max_token_bytes=1 << 20)
    (status, headers, body), (status_off, headers_off, body_off), _ = answers["handed back"]
    tokens = [json.loads(raw)["result"]["requestState"] for raw in (body, body_off)]
    around = [raw.replace(token.encode(), b"<state>") for raw, token in zip((body, body_off), tokens, strict=True)]
    assert (status, around[0]) == (status_off, around[1])
    assert [h for h in headers if h[0] != b"content-length"] == [h for h in headers_off if h[0] != b"content-length"]
    envelopes = [json.loads(codec.open(token)[1]) for token in tokens]
    assert [{k: v for k, v in e.items() if k not in ("iat", "exp")} for e in envelopes] == [
        {k: v for k, v in envelopes[1].items() if k not in ("iat", "exp")}
    ] * 2


def test_a_fast_round_past_the_ping_window_streams_pings_then_the_answer(
    answers: dict[str, tuple[Answer, Answer, float]],
) -> None:
    status, headers, body = answers["past the ping window"][0]
    assert (status, dict(headers)[b"content-type"]) == (200, b"text/event-stream")
    assert body.startswith(b": ping")
    final = json.loads(body.rsplit(b"data: ", 1)[1])
    assert final["result"]["structuredContent"] == {"count": 303}


@pytest.fixture(scope="module")
def two_workers(start_worker: StartWorker) -> list[str]:
    env = {f"MRTR_WORKER_{k}": v for k, v in HOP_SCHEDULE.items()}
    return [start_worker(tool_packs=("compute",), env=env)[0].url for _ in range(2)]


def test_a_computation_resumed_across_two_workers_by_the_fast_path_gives_the_exact_count(
    two_workers: list[str],
) -> None:
    arguments = {"limit": 2_000_000, "segment": 200_000}  # ten steps of a few ms, each longer than the slice
    call = params(None, arguments)
    hops = 0
    with httpx.Client(timeout=30.0) as http:
        while True:
            url = two_workers[hops % 2]
            response = http.post(
                f"{url}/mcp",
                content=encode_request(hops, "tools/call", call),
                headers=request_headers("tools/call", call),
            )
            result = response.json()["result"]
            if result["resultType"] != "input_required":
                break
            hops += 1
            call = params(result["requestState"], arguments)
        served = [
            MetricsPage.parse(http.get(f"{url}/metrics").text).value(SERVED, outcome="served") for url in two_workers
        ]
    assert result["structuredContent"] == {"count": 148_933}
    assert hops >= 2  # at least a resume on each worker
    assert served == [hops // 2, (hops + 1) // 2]  # every resume, on both workers, by the fast path
