"""What a call did, even when it failed: every HTTP exchange and every question, recorded on the side.

A complete call's `CallResult.trace` is the authority. A call that raised has
no trace, so each user's client runs over a transport that notes every
exchange (where it landed, its status, and why the round ended, read from the
reply the way the client reads it) and an input handler that notes every
question answered.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_client import ScriptedInputs

ROUND_META_KEY = "mrtr-cluster.dev/round"
RETRYABLE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class HopRecord:
    instance: str | None
    version: str | None
    reason: str
    ms: float
    status: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "version": self.version,
            "reason": self.reason,
            "ms": round(self.ms, 3),
            "status": self.status,
        }


class RecordingTransport(httpx.BaseTransport):
    """Passes every request to `inner` and notes the exchange in `hops`."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.hops: list[HopRecord] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        try:
            response = self.inner.handle_request(request)
            response.read()
        except Exception:
            self.hops.append(HopRecord(None, None, "transport", _ms_since(started), None))
            raise
        self.hops.append(
            HopRecord(
                response.headers.get("x-worker-id"),
                response.headers.get("x-worker-version"),
                round_end_reason(response.status_code, response.headers.get("content-type", ""), response.content),
                _ms_since(started),
                response.status_code,
            )
        )
        return response

    def close(self) -> None:
        self.inner.close()


def round_end_reason(status: int, content_type: str, body: bytes) -> str:
    """Why a round ended, as the client's trace names it: input, admission, ..., complete, error, transport."""
    if status in RETRYABLE_STATUSES:
        return "transport"
    message = _message(content_type, body)
    if message is None or "error" in message:
        return "error"
    result = message.get("result")
    if not isinstance(result, dict):
        return "error"
    if result.get("resultType", "complete") != "input_required":
        return "complete"
    meta = result.get("_meta")
    hint = meta.get(ROUND_META_KEY) if isinstance(meta, dict) else None
    return str(hint.get("reason", "input")) if isinstance(hint, dict) else "input"


def _message(content_type: str, body: bytes) -> dict[str, Any] | None:
    texts = [body.decode("utf-8", "replace")]
    if "text/event-stream" in content_type:
        texts = [line[5:].strip() for line in texts[0].splitlines() if line.startswith("data:")]
    for text in reversed(texts):
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if isinstance(parsed, dict) and ("result" in parsed or "error" in parsed):
            return parsed
    return None


@dataclass
class RecordingInputs(ScriptedInputs):
    """Scripted answers that also note each question's key, in the order asked."""

    asked: list[str] = field(default_factory=list)

    def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
        self.asked.append(key)
        return super().answer(key, request)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
