"""Tool packs: groups of tools, prompts and resources a worker can be configured to serve."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer

from mrtr_worker.sealing.replay_guard import SingleUseTools
from mrtr_worker.tasks.offer import TaskTools
from mrtr_worker.tool_api.quiet import QuietTools
from mrtr_worker.tool_api.rounds import WorkerInstance

if TYPE_CHECKING:
    from mrtr_worker.compute.engine import Engine
    from mrtr_worker.vault.tool import VaultDesk


@dataclass(frozen=True)
class PackEnv:
    """What a pack may know about the worker it is registered on."""

    identity: WorkerInstance
    engine: Engine
    tasks: TaskTools = field(default_factory=lambda: TaskTools(enabled=False))
    """Where a pack declares which tools may become tasks (see `mrtr_worker.tasks.offer`)."""
    vault: VaultDesk | None = None
    """The vault flows in Redis and the fleet's public URL (`connect_vault`); None without Redis."""
    single_use: SingleUseTools = field(default_factory=SingleUseTools)
    """Where a pack declares the tools whose states are accepted at most once (`mrtr_worker.sealing.replay_guard`)."""
    quiet: QuietTools = field(default_factory=QuietTools)
    """Where a pack declares the tools that never notify and return at once (`mrtr_worker.tool_api.quiet`)."""


Register = Callable[[MCPServer, PackEnv], None]
