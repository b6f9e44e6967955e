"""The Locust users' recording transport: it notes every exchange, and must never hold up a listen's stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx

from mrtr_locust.recorder import LISTEN, RecordingTransport
from mrtr_protocol.instance import WORKER_ID_HEADER


class _EndsOnlyWhenReleased(httpx.SyncByteStream):
    """An event stream that, like a listen on a task waiting for its client's answer, ends only when told."""

    def __init__(self, release: threading.Event) -> None:
        self._release = release

    def __iter__(self) -> Iterator[bytes]:
        yield b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tasks","params":{}}\n\n'
        if not self._release.wait(timeout=30):
            raise AssertionError("the transport read the stream to its end before handing it on")
        yield b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'


def _server(release: threading.Event) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.headers.get("mcp-method") == "subscriptions/listen":
            headers = {"content-type": "text/event-stream", WORKER_ID_HEADER: "w2"}
            return httpx.Response(200, headers=headers, stream=_EndsOnlyWhenReleased(release))
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}})

    return httpx.MockTransport(handle)


def test_a_listen_stream_is_handed_on_as_it_arrives_and_counted() -> None:
    release = threading.Event()
    transport = RecordingTransport(_server(release))
    with httpx.Client(transport=transport) as http:
        request = http.build_request("POST", "http://fleet/mcp", headers={"Mcp-Method": "subscriptions/listen"})
        response = http.send(request, stream=True)
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert "notifications/tasks" in first  # read before the stream ended: nothing buffered it whole
        release.set()
        rest = list(lines)
        response.close()
    assert any('"result"' in line for line in rest)
    assert [(h.instance, h.reason, h.status) for h in transport.hops] == [("w2", LISTEN, 200)]
    assert transport.received_bytes == sum(len(chunk) for chunk in _EndsOnlyWhenReleased(release))


def test_other_exchanges_are_read_whole_and_their_round_noted() -> None:
    transport = RecordingTransport(_server(threading.Event()))
    with httpx.Client(transport=transport) as http:
        reply = http.post("http://fleet/mcp", headers={"Mcp-Method": "tools/call"}, json={})
    assert reply.json()["result"]["resultType"] == "complete"
    assert [h.reason for h in transport.hops] == ["complete"]
    assert transport.received_bytes == len(reply.content)
