"""The resume fast path answers exactly as the SDK's path, and is taken only for a plain resume.

Two in-process workers (same key ring, same instance id), one with the fast path on and one
with it off, get the same requests: a resume and its broken variants. Their answers must be
the same bytes (status, headers, body); the fast path's counter shows which it served itself.
Then a computation crosses two real worker processes by the fast path and gives the exact count.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.types import Message

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.metrics_page import MetricsPage
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.app import create_app
from mrtr_worker.config import WorkerSettings
from mrtr_worker.edge.front_door import FrontDoor
from mrtr_worker.sdk import internals as sdk
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import KeyRing, new_ring
from tests.conftest import StartWorker

TOOL = "count_primes"
ARGUMENTS = {"limit": 2_000, "segment": 1_000}  # two short steps: a resumed round runs to the end
SERVED = "mrtr_worker_fast_resumes_total"
HOP_SCHEDULE = {"MAX_SLICE_MS": "1", "MIN_SLICE_MS": "0", "PRIORITY_AFTER_HOPS": "1000000"}

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def _settings(ring: KeyRing, public_key: Path, *, fast: bool) -> WorkerSettings:
    """Anonymous calls allowed, tokens verified: states are bound to the caller, or to nobody."""
    return WorkerSettings(
        instance_id="w-fast",
        keyring=SecretStr(ring.dumps()),
        allow_anonymous=True,
        jwt_public_key_file=public_key,
        tool_packs=["compute"],
        fast_resume=fast,
        max_concurrent_computations=1,
    )


async def _post(app: FrontDoor, body: bytes, headers: dict[str, str]) -> Answer:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode())
            for k, v in {**headers, "host": "127.0.0.1:8000", "content-length": str(len(body))}.items()
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body_out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], [h for h in start["headers"] if h[0] != b"date"], body_out


def _params(token: str | None, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": request_meta({}), "name": TOOL, "arguments": arguments or ARGUMENTS, **extra}
    if token is not None:
        params["requestState"] = token
    return params


def _request(params: dict[str, Any], **header_changes: str) -> tuple[bytes, dict[str, str]]:
    return encode_request(3, "tools/call", params), {**request_headers("tools/call", params), **header_changes}


def _reseal(ring: KeyRing, token: str, *, under: KeyRing | None = None, **claims: Any) -> str:
    """The same state with some envelope claims changed, sealed again under `under` (default `ring`)."""
    envelope = json.loads(FleetStateCodec(ring, max_token_bytes=1 << 20).open(token)[1])
    payload = json.dumps({**envelope, **claims}, separators=(",", ":")).encode()
    return FleetStateCodec(under or ring, max_token_bytes=1 << 20).seal(payload)


def _served(app: FrontDoor) -> float:
    value = app.state.worker.metrics.registry.get_sample_value(SERVED, {"outcome": "served"})
    return value or 0.0


@asynccontextmanager
async def _running(*apps: FrontDoor) -> AsyncIterator[None]:
    async with (
        apps[0]._host.router.lifespan_context(apps[0]._host),
        apps[1]._host.router.lifespan_context(apps[1]._host),
    ):
        yield


def _cases(ring: KeyRing, token: str, alices: str, bearer: dict[str, str]) -> dict[str, tuple[bytes, dict[str, str]]]:
    """`token` was sealed anonymously, `alices` for alice; `bearer` has the Authorization header of each caller."""
    bad_arguments = {"limit": -1, "segment": 1_000}
    _, bad_digest = sdk.request_identity("tools/call", {"name": TOOL, "arguments": bad_arguments})
    tampered = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    return {
        "valid": _request(_params(token)),
        "tampered": _request(_params(tampered)),
        "expired": _request(_params(_reseal(ring, token, exp=1.0))),
        "foreign audience": _request(_params(_reseal(ring, token, aud="another-service"))),
        "foreign key": _request(_params(_reseal(ring, token, under=new_ring("elsewhere")))),
        "oversized": _request(_params("v1." + "A" * 70_000)),
        "oversized body": _request(_params(token, padding="x" * (1 << 20))),
        "wrong name header": _request(_params(token), **{"Mcp-Name": "hash_chain"}),
        "bad arguments": _request(_params(_reseal(ring, token, a=bad_digest), bad_arguments)),
        "input responses": _request(_params(token, inputResponses={})),
        "unknown tool": _request({**_params(token), "name": "nope"}),
        "no state": _request(_params(None)),
        "valid, alice's": _request(_params(alices), Authorization=bearer["alice"]),
        "alice's state under bob": _request(_params(alices), Authorization=bearer["bob"]),
        "alice's state anonymously": _request(_params(alices)),
        "an anonymous state under a token": _request(_params(token), Authorization=bearer["bob"]),
        "malformed JSON": (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/c', _request(_params(token))[1]),
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
    on = create_app(_settings(ring, directory / PUBLIC_KEY_NAME, fast=True))
    off = create_app(_settings(ring, directory / PUBLIC_KEY_NAME, fast=False))

    async def first_state(**headers: str) -> str:
        off.state.worker.lifecycle.drain()  # a drain hands the first round back at once: a state to resume
        status, _, first = await _post(off, *_request(_params(None), **headers))
        off.state.worker.lifecycle.undrain()
        assert status == 200
        state: str = json.loads(first)["result"]["requestState"]
        return state

    async def run() -> dict[str, tuple[Answer, Answer, float]]:
        async with _running(on, off):
            token, alices = await first_state(), await first_state(Authorization=bearer["alice"])
            cases = _cases(ring, token, alices, bearer)
            out = {}
            for name, (body, headers) in cases.items():
                before = _served(on)
                with_fast = await _post(on, body, headers)
                out[name] = (with_fast, await _post(off, body, headers), _served(on) - before)
            before = _served(on)
            for app in (on, off):
                app.state.worker.lifecycle.drain()  # the resumed round is handed back at once: a state sealed again
            handed_back = (await _post(on, *cases["valid"]), await _post(off, *cases["valid"]), _served(on) - before)
            for app in (on, off):
                app.state.worker.lifecycle.undrain()
            out["handed back"] = handed_back
            before = _served(on)
            interval, sdk.modern_http._SSE_PING_INTERVAL = sdk.modern_http._SSE_PING_INTERVAL, 0.0
            try:  # a round longer than the ping interval: pings on an event stream, then the answer
                streamed = await _post(on, *cases["valid"])
            finally:
                sdk.modern_http._SSE_PING_INTERVAL = interval
            out["past the ping window"] = (streamed, streamed, _served(on) - before)
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
    params = _params(None, arguments)
    hops = 0
    with httpx.Client(timeout=30.0) as http:
        while True:
            url = two_workers[hops % 2]
            response = http.post(
                f"{url}/mcp",
                content=encode_request(hops, "tools/call", params),
                headers=request_headers("tools/call", params),
            )
            result = response.json()["result"]
            if result["resultType"] != "input_required":
                break
            hops += 1
            params = _params(result["requestState"], arguments)
        served = [
            MetricsPage.parse(http.get(f"{url}/metrics").text).value(SERVED, outcome="served") for url in two_workers
        ]
    assert result["structuredContent"] == {"count": 148_933}
    assert hops >= 2  # at least a resume on each worker
    assert served == [hops // 2, (hops + 1) // 2]  # every resume, on both workers, by the fast path
