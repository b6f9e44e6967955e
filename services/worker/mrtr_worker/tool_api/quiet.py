"""Where a pack declares its quiet and silent tools, for the `/mcp` edge to serve them without the SDK's deferral.

A quiet tool never notifies and returns at once: its calls are answered as JSON straight away. A
silent tool never notifies but may run long (a computation's round): its calls keep the deferral's
pings, done with plain asyncio (`mrtr_worker.edge.quiet_calls` says how). Declaring is all a pack
does; the edge reads the declarations.
"""

from __future__ import annotations


class QuietTools:
    """The tools whose calls never notify and return at once; packs declare them where they register them."""

    def __init__(self) -> None:
        self._tools: set[bytes] = set()
        self.silent: set[bytes] = set()
        """Tools that never notify but may run long: JSON when they end inside the ping window."""

    def declare(self, tool: str) -> None:
        self._tools.add(tool.encode())

    def declare_silent(self, tool: str) -> None:
        self.silent.add(tool.encode())

    def __contains__(self, tool: object) -> bool:
        return tool in self._tools
