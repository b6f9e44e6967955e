"""The silent-tool deferral (`QuietCalls._silent`), with a stand-in for the SDK's JSON handler.

A round that ends inside the ping window is passed on as the handler wrote
it; one that runs past it commits to an event stream, pings, and ends with the
handler's JSON body as its one `message` event; a disconnect cancels the
handler. The ping interval is the SDK's, shortened here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from mrtr_worker.edge.quiet_calls import QuietCalls
from mrtr_worker.sdk import internals as sdk

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


def _calls(handler_seconds: float, cancelled: list[bool]) -> QuietCalls:
    calls = QuietCalls.__new__(QuietCalls)  # no SDK manager: `_json` is replaced below

    async def fake_json(scope: Scope, receive: Receive, send: Send) -> None:
        assert (await receive())["type"] == "http.request"  # reads the body, as the SDK does
        try:
            await asyncio.sleep(handler_seconds)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": BODY, "more_body": False})

    calls._json = fake_json  # type: ignore[method-assign]
    return calls


async def _run(calls: QuietCalls, disconnect: asyncio.Event) -> list[Message]:
    sent: list[Message] = []
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop(0)
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "headers": []}
    await calls._silent(scope, receive, send)
    return sent


def test_a_round_inside_the_window_is_passed_on_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk.modern_http, "_SSE_PING_INTERVAL", 5.0)
    sent = asyncio.run(_run(_calls(0, []), asyncio.Event()))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["headers"] == [(b"content-type", b"application/json")]
    assert sent[1]["body"] == BODY


def test_a_round_past_the_window_streams_pings_then_the_response_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk.modern_http, "_SSE_PING_INTERVAL", 0.01)
    sent = asyncio.run(_run(_calls(0.2, []), asyncio.Event()))
    assert sent[0]["type"] == "http.response.start"
    assert (b"content-type", b"text/event-stream") in sent[0]["headers"]
    pings = [m for m in sent[1:-1] if m["body"] == b": ping\r\n\r\n" and m["more_body"]]
    assert pings
    assert len(pings) == len(sent) - 2
    assert sent[-1] == {
        "type": "http.response.body",
        "body": b"event: message\r\ndata: " + BODY + b"\r\n\r\n",
        "more_body": False,
    }


def test_a_disconnect_cancels_the_round_and_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk.modern_http, "_SSE_PING_INTERVAL", 30.0)
    cancelled: list[bool] = []

    async def scenario() -> list[Message]:
        disconnect = asyncio.Event()
        running = asyncio.ensure_future(_run(_calls(60, cancelled), disconnect))
        await asyncio.sleep(0)  # let the handler read its body and start
        disconnect.set()
        return await running

    assert asyncio.run(scenario()) == []
    assert cancelled == [True]
