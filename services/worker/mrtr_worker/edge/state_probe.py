"""The SDK's own requestState checks, asked by the resume fast path without leaving a trace.

The fast path (`edge.fast_resume`) may serve a round only if the SDK's path would accept its
state, and must leave every other request untouched to that path, which then refuses it, logs
the reason and so counts it once (`mcp_middleware.rejections`). So it writes no check of its
own: it calls the SDK's boundary itself (`sdk.verify_state`, every claim the SDK checks now or
later), on a twin of the server's boundary that differs in two ways only:

* its codec opens with the fleet codec's `open`, which does not count the key; the probe says
  which key opened the state, and the fast path counts it when it commits, once;
* the SDK's requestState log lines are held back while a probe runs in this context (a filter
  on the SDK's logger, open to every other record), so a refusal is logged by the SDK's path only.

The one effect left is the principal binder's call, with the request's real context; the
worker's is the SDK's `authenticated_principal`, which only reads who the caller is.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary

from mrtr_worker.sdk import internals as sdk
from mrtr_worker.sealing.codec import FleetStateCodec

_probing: ContextVar[bool] = ContextVar("mrtr_state_probe", default=False)
_opened: ContextVar[str | None] = ContextVar("mrtr_state_probe_key", default=None)


@dataclass(frozen=True)
class Verified:
    """A state the SDK's boundary accepts: what serving its round needs."""

    key: str
    """The ring key that opened it (not yet counted)."""
    plaintext: str
    binding: tuple[str, str, str | None]
    """(target, argument digest, principal): what the answer's state is sealed for."""


class _Quiet(logging.Filter):
    """Let no record of the SDK's requestState logger through while a probe runs in this context."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _probing.get()


_QUIET = _Quiet()


class _Opening:
    """The fleet codec as the probe's boundary uses it: it opens without counting and remembers the key."""

    def __init__(self, codec: FleetStateCodec) -> None:
        self._codec = codec

    def seal(self, payload: bytes) -> str:
        return self._codec.seal(payload)  # the probe never seals; the server's own boundary does

    def unseal(self, token: str) -> bytes:
        key, payload = self._codec.open(token)
        _opened.set(key)
        return payload


class StateProbe:
    """`verify`: the SDK boundary's verdict on a request's state, with no log line, count or other trace."""

    def __init__(self, boundary: RequestStateBoundary, codec: FleetStateCodec) -> None:
        self._twin = sdk.with_codec(boundary, _Opening(codec))
        sdk_logger = logging.getLogger(RequestStateBoundary.__module__)
        if _QUIET not in sdk_logger.filters:
            sdk_logger.addFilter(_QUIET)

    def verify(self, ctx: ServerRequestContext[Any, Any]) -> Verified | None:
        """The accepted state of `ctx.params`, or None for anything else the SDK's check does (refuse, raise)."""
        probing, opened = _probing.set(True), _opened.set(None)
        try:
            plaintext, binding = sdk.verify_state(self._twin, ctx)
            key = _opened.get()
        except Exception:
            return None
        finally:
            _opened.reset(opened)
            _probing.reset(probing)
        return None if key is None else Verified(key, plaintext, binding)
