"""The tasks extension as the SDK serves it: three methods and a `tools/call` interceptor.

Installed only on a worker with a task store, so only such a worker
advertises `io.modelcontextprotocol/tasks` in `server/discover`; elsewhere
`tasks/*` stay -32601. Every method needs the extension declared in that
request's client capabilities (-32021 otherwise), and over HTTP its `Mcp-Name`
header must be present and equal `params.taskId` (-32020, HTTP 400), the
routing header rule the SDK applies to `tools/call` but not to extension methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.inbound import decode_header_value
from mcp_types import CallToolRequestParams, RequestParams
from pydantic import Field

from mrtr_worker.tasks import errors
from mrtr_worker.tasks.offer import Escalation, TaskSupport, TaskTools, offering, withdraw
from mrtr_worker.tasks.service import TaskService
from mrtr_worker.tasks.wire import EXTENSION_ID, TASKS_CANCEL, TASKS_GET, TASKS_UPDATE


class TaskIdParams(RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")
    """Loosely typed on purpose: an answer to a key that is not outstanding is ignored, whatever its shape."""


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and EXTENSION_ID in (extensions or {})


class TasksExtension(Extension):
    identifier = EXTENSION_ID

    def __init__(self, service: TaskService, tools: TaskTools) -> None:
        self._service = service
        self._tools = tools

    @property
    def task_tools(self) -> TaskTools:
        """Which tools may become tasks, and how (the resume fast path serves no task-only tool)."""
        return self._tools

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(TASKS_GET, TaskIdParams, self._get),
            MethodBinding(TASKS_UPDATE, UpdateTaskParams, self._update),
            MethodBinding(TASKS_CANCEL, TaskIdParams, self._cancel),
        )

    @staticmethod
    def _admit(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
        require_client_extension(ctx, EXTENSION_ID)
        request = ctx.request
        headers = getattr(request, "headers", None)
        header = headers.get("mcp-name") if headers is not None else None
        if headers is not None and (header is None or decode_header_value(header.strip()) != task_id):
            raise errors.name_mismatch(header, task_id)

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        return await self._service.get(ctx, params.task_id)

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        await self._service.update(ctx, params.task_id, params.input_responses)
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        self._admit(ctx, params.task_id)
        await self._service.cancel(ctx, params.task_id)
        return {}

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        support = self._tools.support(params.name)
        if support is None:
            return await call_next(ctx)
        if not declared(ctx):
            if support is TaskSupport.REQUIRED:
                require_client_extension(ctx, EXTENSION_ID)
            return await call_next(ctx)
        escalation = Escalation()
        token = offering(escalation)
        try:
            result = await call_next(ctx)
        finally:
            withdraw(token)
        if escalation.job is None:
            return result  # answered at once, or an MRTR round first
        return await self._service.create(ctx, escalation.job, escalation.arguments)
