"""Answer `prompts/get` for an unknown prompt, or with the wrong arguments, with -32602.

The SDK's `MCPServer.get_prompt` turns every failure into one `ValueError`
(an unknown name, a missing or unexpected argument, and a real bug alike),
which its dispatcher answers as -32603 "Internal server error" while logging
a traceback. The spec's answer to a bad prompt name or bad arguments is
-32602 (invalid params), as the SDK already answers an unknown resource. This
middleware checks both against the registered prompts before the handler
runs, so only real failures are left as internal errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS


class PromptGuard:
    def __init__(self, server: MCPServer) -> None:
        self._server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "prompts/get" and isinstance(ctx.params, Mapping):
            await self._check(ctx.params)
        return await call_next(ctx)

    async def _check(self, params: Mapping[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            return  # not a prompt name at all: the SDK's parameter validation answers that
        prompt = next((p for p in await self._server.list_prompts() if p.name == name), None)
        if prompt is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}", data={"name": name})
        given = set(arguments) if isinstance(arguments, Mapping) else set()
        declared = {arg.name: bool(arg.required) for arg in prompt.arguments or []}
        missing = sorted(arg for arg, required in declared.items() if required and arg not in given)
        unexpected = sorted(given - set(declared))
        if missing or unexpected:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Invalid arguments for prompt {name}",
                data={"name": name, "missing": missing, "unexpected": unexpected},
            )
