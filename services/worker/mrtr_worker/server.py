"""Assemble the MCP server (the official SDK's `MCPServer`) for one worker instance."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.inbound import X_MCP_HEADER_KEY
from opentelemetry import trace

from mrtr_worker.compute.engine import Engine
from mrtr_worker.config import WorkerSettings
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.mcp_middleware.answer_limits import LimitAnswers
from mrtr_worker.mcp_middleware.observe import ObserveRequests
from mrtr_worker.mcp_middleware.prompt_guard import PromptGuard
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.packs import PackEnv
from mrtr_worker.packs.registry import installed_jobs, register_packs
from mrtr_worker.sdk import internals as sdk
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.replay_guard import ReplayGuard, SingleUseTools, SpentStates
from mrtr_worker.tasks.extension import TasksExtension
from mrtr_worker.tasks.offer import TaskTools
from mrtr_worker.tasks.push import TaskPush
from mrtr_worker.tasks.service import TaskService
from mrtr_worker.tool_api.quiet import QuietTools
from mrtr_worker.tool_api.rounds import WorkerInstance
from mrtr_worker.vault.tool import VaultDesk

SERVER_NAME = "mrtr-worker"

INSTRUCTIONS = (
    "A stateless MCP worker of an MRTR reference fleet. Long calls may answer input_required with only "
    "a requestState: retry at once with it, on any instance."
)


SchemaLookup = Callable[[str], Mapping[str, Any] | None]


def headerless_schemas_skipped(lookup: SchemaLookup) -> SchemaLookup:
    """The SDK's tool-schema lookup for `Mcp-Param` header checks, None for a schema that declares no header.

    Before every `tools/call` the SDK walks the tool's whole input schema twice (validity of its
    `x-mcp-header` annotations, then each annotated position) to compare headers with arguments.
    A schema with no annotation at all has nothing to compare, and the SDK skips the check when the
    lookup gives None: the same verdict, decided once per schema instead of on every call. The test is
    conservative (the key appearing anywhere in the schema's JSON keeps the full check).
    """
    verdicts: dict[int, tuple[Mapping[str, Any], bool]] = {}

    def lookup_declaring(name: str) -> Mapping[str, Any] | None:
        schema = lookup(name)
        if schema is None:
            return None
        known = verdicts.get(id(schema))
        if known is None or known[0] is not schema:
            known = verdicts[id(schema)] = (schema, X_MCP_HEADER_KEY in json.dumps(schema))
        return schema if known[1] else None

    return lookup_declaring


def tracing_configured() -> bool:
    """Whether an OpenTelemetry tracer provider is set (by code or `opentelemetry-instrument`) when the worker starts.

    Without one (the images carry only the OpenTelemetry API), every span the SDK opens is a no-op.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def build_mcp_server(
    settings: WorkerSettings,
    codec: FleetStateCodec,
    metrics: WorkerMetrics,
    identity: WorkerInstance,
    engine: Engine,
    lifecycle: Lifecycle,
    tasks: TaskService | None = None,
    *,
    vault: VaultDesk | None = None,
    push: TaskPush | None = None,
    quiet: QuietTools | None = None,
) -> MCPServer:
    """The SDK server with the fleet's shared requestState policy and the configured packs.

    With a task service (a Redis URL is configured) the tasks extension is installed and advertised;
    without one it is not, and `tasks/*` answer -32601 as on any server that does not serve them.
    """
    task_tools = TaskTools(enabled=tasks is not None)
    security = RequestStateSecurity(codec=codec, ttl=settings.state_ttl_seconds, audience=settings.audience)
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=str(identity.version),
        instructions=INSTRUCTIONS,
        request_state_security=security,
        log_level=settings.log_level.upper(),  # type: ignore[arg-type]  # validated by logging below
        extensions=[TasksExtension(tasks, task_tools)] if tasks is not None else None,
    )
    # Just outside the SDK's requestState boundary (and inside its OpenTelemetry middleware): observing
    # there sees sealed tokens and the boundary's rejections; then cheap bounds on the client's answers
    # and state, checked before the state is opened or the answers parsed.
    limits = LimitAnswers(settings.max_input_responses, settings.max_answer_bytes, settings.state_max_bytes)
    boundary = sdk.boundary_index(server)
    server.middleware[boundary:boundary] = [ObserveRequests(metrics, lifecycle), limits]
    # Innermost, after the requestState boundary: a bad prompt name or arguments is -32602, not -32603.
    server.middleware.append(PromptGuard(server))
    if push is not None:
        server.middleware.append(push)  # a listen naming taskIds; every other listen reaches the SDK's handler
    # Innermost as well: a single-use tool's state is spent in the shared Redis before the tool runs.
    single_use = SingleUseTools()
    store = None if tasks is None else tasks.store.client
    spent = (
        None if store is None else SpentStates(store, prefix=settings.redis_prefix, instance_id=identity.instance_id)
    )
    server.middleware.append(ReplayGuard(single_use, spent, ttl_seconds=settings.state_ttl_seconds))
    env = PackEnv(
        identity=identity,
        engine=engine,
        tasks=task_tools,
        vault=vault,
        single_use=single_use,
        quiet=quiet or QuietTools(),
    )
    register_packs(settings.tool_packs, server, env)
    if tasks is not None:
        installed_jobs()  # every installed pack's task jobs, loaded now: a broken pack stops the start, not a slice
    if not tracing_configured():
        # The SDK's span middleware would make a no-op span per request (5% of a hop's worker CPU).
        server.middleware[:] = [m for m in server.middleware if not isinstance(m, sdk.OpenTelemetryMiddleware)]
    lowlevel = sdk.lowlevel_server(server)
    if lowlevel.get_tool_input_schema is not None:
        lowlevel.get_tool_input_schema = headerless_schemas_skipped(lowlevel.get_tool_input_schema)
    return server
