"""The `collatz` pack: what the entry point names (`PACK`), and the two tools its `register` adds.

* `longest_collatz(limit)` runs the `LONGEST_COLLATZ` computation: the worker's
  engine steps it and hands it back between steps when the instance is busy,
  draining or has used its time slice; the client retries and any instance
  continues. Called with the tasks extension, it becomes a task instead (its job
  is in `PACK.jobs`, so every instance with this package installed can run it).
* `collatz_walk()` asks which number to follow, then whether to show the whole
  path: two form questions in two rounds, the first answer carried to the last
  round in the sealed state, so no instance asks anything twice.

Everything from the worker comes from `mrtr_worker.plugin`, its public surface.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mrtr_example_pack.collatz import LONGEST_COLLATZ
from mrtr_worker.plugin import (
    CallToolResult,
    Context,
    InputRequestWire,
    InputRequiredResult,
    MCPServer,
    Need,
    PackEnv,
    Round,
    TaskSupport,
    TextContent,
    ToolPack,
    compute_job,
    form,
    offer,
    read_form,
    require,
)

REFUSED = {"decline": "declined", "cancel": "cancelled"}
MAX_LIMIT = 10_000_000
MAX_START = 10**12

Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="search the starts 1..limit")]
Chunk = Annotated[int | None, Field(ge=100, le=1_000_000, description="starts examined per step")]


def start_question() -> InputRequestWire:
    return form(
        "Which number should we follow to 1?",
        {"start": {"type": "integer", "title": "Start", "minimum": 1, "maximum": MAX_START}},
        ["start"],
    )


def path_question(start: int, steps: int, peak: int) -> InputRequestWire:
    return form(
        f"{start} reaches 1 after {steps} steps, peaking at {peak}. Show the whole path?",
        {"show": {"type": "boolean", "title": "Show the path", "default": False}},
        ["show"],
    )


def walk(start: int) -> list[int]:
    """The Collatz path from `start` to 1, both included."""
    path = [start]
    while path[-1] != 1:
        n = path[-1]
        path.append(3 * n + 1 if n & 1 else n >> 1)
    return path


def _result(text: str, structured: dict[str, Any] | None = None, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured, is_error=error)


def register(server: MCPServer, env: PackEnv) -> None:
    engine, identity = env.engine, env.identity
    env.tasks.declare("longest_collatz", TaskSupport.OPTIONAL)  # may become a task (tasks extension)
    env.quiet.declare_silent("longest_collatz")  # never notifies: its short rounds are answered as plain JSON

    @server.tool(description="The start not above `limit` with the longest Collatz chain (sheds between chunks).")
    async def longest_collatz(limit: Limit, ctx: Context, chunk: Chunk = None) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        arguments = {"limit": limit, "chunk": chunk}
        task = offer() if not rnd.data else None  # a first round whose client declared the tasks extension
        if task is not None:
            return task.become(LONGEST_COLLATZ.name, arguments)
        return await engine.run(rnd, LONGEST_COLLATZ, arguments)

    @server.tool(description="Follow a number of your choice to 1 (asks which, then whether to show the path).")
    async def collatz_walk(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="collatz_walk asks its questions through form elicitation")
        start: int | None = rnd.data.get("start")  # the first answer, carried in the sealed state
        if start is None:
            answer = read_form(rnd.responses, "start", start_question())
            if answer is None or answer.problem is not None:  # not answered yet, or an answer that breaks the form
                return rnd.ask({"start": start_question()}, {})
            if answer.content is None:
                return _result(f"No number to follow: the question was {REFUSED[answer.action]}.", error=True)
            start = int(answer.content["start"])
        path = walk(start)
        steps, peak = len(path) - 1, max(path)
        question = path_question(start, steps, peak)
        answer = read_form(rnd.responses, "show_path", question)
        if answer is None or answer.problem is not None:
            return rnd.ask({"show_path": question}, {"start": start})
        summary: dict[str, Any] = {"start": start, "steps": steps, "peak": peak}
        if answer.content is not None and answer.content["show"]:
            summary["path"] = path
        return _result(f"{start} reaches 1 after {steps} steps, peaking at {peak}.", summary)


PACK = ToolPack(register, jobs=(compute_job(LONGEST_COLLATZ),))
"""What the entry point `collatz` names: the tools, and the task job `longest_collatz` runs as."""
