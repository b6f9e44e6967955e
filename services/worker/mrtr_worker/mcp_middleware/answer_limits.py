"""Bounds on what a client sends back (its `inputResponses` and the `requestState`), checked before anything is decoded.

A worker asks at most a handful of questions per round, each with a small
answer. A retry that carries hundreds of answers, or one answer of megabytes,
is not a user answering a form: it is refused with a clear error instead of
being parsed, validated and held in memory. A `requestState` larger than any
the fleet seals is refused the same way, by its length alone, with the limit
in `data` (the requestState boundary would only say "Invalid or expired"); it
is still counted and logged as the boundary's `oversized` rejection.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mrtr_worker.mcp_middleware.rejections import SDK_LOGGER
from mrtr_worker.sealing.codec import OVERSIZED

_rejections = logging.getLogger(SDK_LOGGER)


class LimitAnswers:
    """SDK middleware: refuse too many `inputResponses`, one that is too large, or an oversized `requestState`,
    each with -32602 and the limit."""

    def __init__(self, max_answers: int, max_answer_bytes: int, max_state_bytes: int) -> None:
        self._max_answers = max_answers
        self._max_answer_bytes = max_answer_bytes
        self._max_state_bytes = max_state_bytes

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if isinstance(ctx.params, dict):
            state = ctx.params.get("requestState")
            if isinstance(state, str) and len(state) > self._max_state_bytes:
                self._refuse_state(ctx.method, state)
            answers = ctx.params.get("inputResponses")
            if isinstance(answers, dict):
                self._check(answers)
        return await call_next(ctx)

    def _refuse_state(self, method: str, state: str) -> None:
        size = len(state.encode("utf-8", "surrogatepass"))
        # The line the requestState boundary writes for each rejection: the same log, the same metric.
        _rejections.warning("requestState rejected on %s: %s", method, OVERSIZED)
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Invalid requestState: {size} bytes (at most {self._max_state_bytes}), larger than any sealed",
            # The SDK's reason as well, so a client that recognises a refused state by it still does.
            data={
                "reason": "invalid_request_state",
                "limit": "requestStateBytes",
                "max": self._max_state_bytes,
                "got": size,
            },
        )

    def _check(self, answers: dict[str, Any]) -> None:
        if len(answers) > self._max_answers:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"too many inputResponses: {len(answers)} (at most {self._max_answers})",
                data={"limit": "inputResponses", "max": self._max_answers, "got": len(answers)},
            )
        for key, answer in answers.items():
            # surrogatepass: a lone surrogate is legal in JSON text ("\ud800") and must be measured, not raise.
            size = len(json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if size > self._max_answer_bytes:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"inputResponses[{key[:64]!r}] is {size} bytes (at most {self._max_answer_bytes})",
                    data={"limit": "answerBytes", "max": self._max_answer_bytes, "got": size},
                )
