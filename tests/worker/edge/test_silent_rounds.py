"""Computation rounds (silent tools) answer JSON when they end in the ping window, and still end when the client leaves.

The worker runs their rounds without the SDK's anyio deferral (`quiet_calls`);
what that deferral gave them must stay: a client that hangs up mid-round frees
the compute slot at once instead of holding it to the end of the slice.
"""

from __future__ import annotations

import socket

import httpx

from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from mrtr_worker.compute import primes
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

COMPUTATIONS = "mrtr_worker_computations"
STEPS = "mrtr_worker_compute_steps_total"
LONG = {"limit": primes.MAX_LIMIT}


def _metric(url: str, name: str) -> float:
    return MetricsPage.parse(httpx.get(f"{url}/metrics").text).value(name)


def test_a_round_that_ends_in_the_window_is_json_and_a_hang_up_frees_the_slot(start_worker: StartWorker) -> None:
    # Shedding off: a round runs to its end, so only the client's leaving can end the long one early.
    spec, _ = start_worker(tool_packs=("compute",), env={"MRTR_WORKER_SHEDDING": "false"})
    client = McpHttp(f"{spec.url}/mcp")
    try:
        done = client.call("tools/call", {"name": "count_primes", "arguments": {"limit": 1000}})
    finally:
        client.close()
    assert done.headers["content-type"].startswith("application/json")
    assert done.result["structuredContent"] == {"count": 168}

    params = {"_meta": request_meta({}), "name": "count_primes", "arguments": LONG}
    body = encode_request(7, "tools/call", params)
    headers = {
        **request_headers("tools/call", params),
        "Content-Length": str(len(body)),
        "Host": f"127.0.0.1:{spec.port}",
    }
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", spec.port)) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body)
        wait_until(lambda: _metric(spec.url, COMPUTATIONS) == 1, timeout=30, what="the long round holds a slot")
    wait_until(lambda: _metric(spec.url, COMPUTATIONS) == 0, timeout=60, what="the slot freed after the client hung up")
    # Freed by the hang-up, not by the round running to its end.
    assert _metric(spec.url, STEPS) < primes.total_steps(primes.initial(LONG))
