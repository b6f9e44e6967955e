"""The chaos pack: toxic tools, only for chaos runs (`MRTR_WORKER_TOOL_PACKS=...,chaos`).

Each runs only as a task and misbehaves on purpose (`mrtr_test_packs.chaos_jobs`): one
raises, one calls `sys.exit(42)` (docket's toxic task), one never ends and
is stopped by the run-time limit. A pack of its own, off by default, because
a tool that spins until a limit is a lever no real fleet should offer, and
the conformance pack holds only what the conformance suite calls by name.
"""

from __future__ import annotations

from mrtr_test_packs.chaos_jobs import EXITS, NEVER_ENDS, RAISES, TOXIC_JOBS
from mrtr_worker.plugin import CallToolResult, MCPServer, PackEnv, TaskSupport, ToolPack, offer


def register(server: MCPServer, env: PackEnv) -> None:
    tools = env.tasks
    for name in (RAISES, EXITS, NEVER_ENDS):
        tools.declare(name, TaskSupport.REQUIRED)

    def as_task(name: str) -> CallToolResult:
        task = offer()
        return tools.unavailable(name) if task is None else task.become(name, {})

    @server.tool(name=RAISES, description="A task whose first step raises (chaos runs): it must end failed.")
    def chaos_raise() -> CallToolResult:
        return as_task(RAISES)

    @server.tool(name=EXITS, description="A task whose first step calls sys.exit(42) (chaos runs): it must end failed.")
    def chaos_exit() -> CallToolResult:
        return as_task(EXITS)

    @server.tool(name=NEVER_ENDS, description="A task that never finishes (chaos runs): the run-time limit fails it.")
    def chaos_forever() -> CallToolResult:
        return as_task(NEVER_ENDS)


PACK = ToolPack(register, jobs=TOXIC_JOBS)
"""What the entry point `chaos` names: the toxic tools and the jobs they become."""
