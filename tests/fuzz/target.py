"""A real worker process under fuzz: send raw requests, judge the answers, watch it stay up.

The fuzz suite shares one worker (the `target` fixture); nothing else talks
to it, so its log and its rejection counters see only the suite's cases, and
the tests run one at a time, so a before/after reading of a counter is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from mrtr_ops.local.process import ManagedProcess, WorkerSpec
from mrtr_ops.metrics_page import MetricsPage
from tests.fuzz.calls import Call, envelope, headers_for
from tests.fuzz.oracle import Sent, Verdict, judge
from tests.support.wire import McpHttp

REJECTIONS = "mrtr_worker_state_rejections_total"
MAX_BODY_BYTES = 1024 * 1024
"""The worker's default `MRTR_WORKER_MAX_BODY_BYTES`."""
MAX_HEADER_BYTES = 32 * 1024
"""The worker's default `MRTR_WORKER_MAX_HEAD_BYTES`: past it a 431, or the connection ends while the client writes."""


class FuzzTarget:
    """Not a dataclass: hypothesis prints dataclass fields (the whole environment) with every failing case."""

    def __init__(self, spec: WorkerSpec, process: ManagedProcess, log_path: Path) -> None:
        self.spec, self.process, self.log_path = spec, process, log_path
        self.mcp = McpHttp(f"{spec.url}/mcp")
        self._log_offset = 0

    def __repr__(self) -> str:  # short: hypothesis prints it with every failing case
        return f"FuzzTarget({self.spec.instance_id} at {self.spec.url})"

    @property
    def endpoint(self) -> str:
        return f"{self.spec.url}/mcp"

    def close(self) -> None:
        self.mcp.close()

    def send(self, sent: Sent) -> tuple[Verdict, httpx.Response | None]:
        """POST `sent` as is, judge the answer, and check the process is still there and logged no traceback."""
        try:
            headers = [(name.encode("latin-1"), value) for name, value in sent.headers]
            response = self.mcp.http.post(self.endpoint, content=sent.body, headers=headers)
        except httpx.TransportError:
            # Over the body limit the worker may answer 413 and close while the body is still arriving;
            # a header block the HTTP server cannot take (hundreds of KiB) is refused at the connection.
            header_bytes = sum(len(name) + len(value) for name, value in sent.headers)
            assert len(sent.body) > MAX_BODY_BYTES or header_bytes > MAX_HEADER_BYTES, (
                f"connection failed on a {len(sent.body)}-byte body with {header_bytes} bytes of headers"
            )
            self.assert_unharmed()
            return Verdict(413 if len(sent.body) > MAX_BODY_BYTES else 431, "transport", {}), None
        logged = self._new_log()  # read before judging, so a failed case does not leak into the next one
        verdict = judge(sent, response)
        self._assert_unharmed(logged)
        return verdict, response

    def call(self, call: Call, params: dict[str, Any], *, headers: dict[str, str] | None = None) -> Verdict:
        """One well-formed request for `call` with these params (a state, answers), judged by the oracle."""
        body = json.dumps({**call.document(), "params": {**params, "_meta": envelope(call.capabilities)}}).encode()
        extra = [(name, value.encode("latin-1")) for name, value in (headers or {}).items()]
        sent = Sent(body, [*headers_for(json.loads(body)), *extra])
        verdict, _ = self.send(sent)
        return verdict

    def assert_unharmed(self) -> None:
        """The worker process is alive and has logged no traceback since the last check."""
        self._assert_unharmed(self._new_log())

    def _assert_unharmed(self, logged: bytes) -> None:
        assert self.process.running, f"the worker died; see {self.log_path}"
        assert b"Traceback" not in logged, logged.decode(errors="replace")[-3000:]

    def _new_log(self) -> bytes:
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            new = log.read()
        self._log_offset += len(new)
        return new

    def assert_healthy(self) -> None:
        """End of a batch: alive, health check answers, nothing left in the log."""
        self.assert_unharmed()
        health = self.mcp.http.get(f"{self.spec.url}/healthz")
        assert health.status_code == 200, health.text
        assert health.json()["instance"] == self.spec.instance_id

    def rejections(self) -> dict[str, float]:
        """`mrtr_worker_state_rejections_total` by reason."""
        page = MetricsPage.parse(self.mcp.http.get(f"{self.spec.url}/metrics").text)
        return page.by_label(REJECTIONS, "reason")


def rejections_added(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Reasons whose count grew between two readings, and by how much."""
    return {reason: n - before.get(reason, 0.0) for reason, n in after.items() if n != before.get(reason, 0.0)}


def call_params(params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """`params` with extra members (a state, answers) on top."""
    return {**params, **{key: value for key, value in extra.items() if value is not None}}
