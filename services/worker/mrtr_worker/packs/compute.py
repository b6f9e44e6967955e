"""The compute pack: long, deterministic computations that shed load across instances.

`count_primes` is the canonical long call (its structured result is exactly
`{"count": <int>}`); `hash_chain` and `estimate_pi` exercise other state
shapes, and `estimate_pi(ask_to_refine=true)` asks the user midway through
the same hand-back path.

Each tool may also run as a task (`mrtr_worker.tasks`): a fresh call (no
requestState yet) whose request declares the tasks extension becomes a task
running the same computation in checkpointed slices on the fleet; a call
that does not declare it is answered by MRTR rounds exactly as before.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import Field

from mrtr_worker.compute.computation import Computation
from mrtr_worker.compute.hashchain import HASH_CHAIN
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import COUNT_PRIMES, MAX_LIMIT
from mrtr_worker.packs import PackEnv
from mrtr_worker.tasks.offer import TaskSupport, offer
from mrtr_worker.tool_api.rounds import Round

Limit = Annotated[int, Field(ge=0, le=MAX_LIMIT, description="count primes p with p <= limit")]
Segment = Annotated[int | None, Field(ge=1_000, le=50_000_000, description="numbers sieved per step")]
Iterations = Annotated[int, Field(ge=1, le=100_000_000)]
Samples = Annotated[int, Field(ge=1, le=100_000_000)]
Chunk = Annotated[int | None, Field(ge=100, le=10_000_000, description="work per step")]


def register(server: MCPServer, env: PackEnv) -> None:
    engine, identity = env.engine, env.identity
    for tool in ("count_primes", "hash_chain", "estimate_pi"):
        env.tasks.declare(tool, TaskSupport.OPTIONAL)
        env.quiet.declare_silent(tool)  # never notifies: a round that ends within the ping window answers JSON

    async def run(
        ctx: Context, computation: Computation, arguments: dict[str, Any]
    ) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        task = offer() if not rnd.data else None
        if task is not None:
            return task.become(computation.name, arguments)
        return await engine.run(rnd, computation, arguments)

    @server.tool(description="Count the primes not above `limit` (segmented sieve; sheds between segments).")
    async def count_primes(limit: Limit, ctx: Context, segment: Segment = None) -> CallToolResult | InputRequiredResult:
        return await run(ctx, COUNT_PRIMES, {"limit": limit, "segment": segment})

    @server.tool(description="Apply SHA-256 `iterations` times to `seed`; returns the final hex digest.")
    async def hash_chain(
        seed: str, iterations: Iterations, ctx: Context, chunk: Chunk = None
    ) -> CallToolResult | InputRequiredResult:
        return await run(ctx, HASH_CHAIN, {"seed": seed, "iterations": iterations, "chunk": chunk})

    @server.tool(description="Seeded Monte Carlo estimate of pi; with ask_to_refine, offers to double the samples.")
    async def estimate_pi(
        samples: Samples, ctx: Context, seed: int = 0, ask_to_refine: bool = False, chunk: Chunk = None
    ) -> CallToolResult | InputRequiredResult:
        arguments = {"samples": samples, "seed": seed, "ask_to_refine": ask_to_refine, "chunk": chunk}
        return await run(ctx, ESTIMATE_PI, arguments)
