"""Bounds on what a client may send back as `inputResponses`, checked before anything is decoded.

A worker asks at most a handful of questions per round, each with a small
answer. A retry that carries hundreds of answers, or one answer of megabytes,
is not a user answering a form: it is refused with a clear error instead of
being parsed, validated and held in memory.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS


class LimitAnswers:
    """SDK middleware: refuse too many `inputResponses`, or one that is too large, with -32602 and the limit."""

    def __init__(self, max_answers: int, max_answer_bytes: int) -> None:
        self._max_answers = max_answers
        self._max_answer_bytes = max_answer_bytes

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        answers = ctx.params.get("inputResponses") if isinstance(ctx.params, dict) else None
        if isinstance(answers, dict):
            self._check(answers)
        return await call_next(ctx)

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
