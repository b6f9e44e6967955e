"""Everything a tool pack of your own needs, in one place: import from here, and nowhere else in `mrtr_worker`.

This is the worker's public surface for packs that live in their own package
(docs/plugins.md walks through writing one; `examples/collatz-pack` is one). The
worker's modules may move; these names stay, with these meanings:

* the pack: `ToolPack` (what the entry point names), `PackEnv` (what `register`
  receives), `ENTRY_POINT_GROUP` (`mrtr_worker.tool_packs`), `PackError`;
* a round of a tool that asks: `Round` (`data`, `responses`, `capabilities`; `ask`,
  `hand_back`), `EndOfRound`, the input builders `form`, `url_elicitation`,
  `sampling`, `roots` and the readers `read_form` (`FormAnswer`), `read_sampled_text`,
  `read_roots`, `SecretInForm`, and `Need`/`require`/`allows` for capability checks;
* a long computation: `Computation`, `State`, `Question`, `run_uninterrupted` (the
  reference a test compares against); a tool runs it with `env.engine.run(rnd, computation, arguments)`;
* tasks: `TaskSupport`, `offer` (and its `TaskOffer`), `Job` and `compute_job`; for a job
  written by hand, `StepRunner` (what its `advance` receives), `text_result`, `form_answer`
  (reading a task question's answer) and `TaskFailure` (ending the task `failed`);
* the MCP SDK types a handler uses: `MCPServer`, `Context`, `CallToolResult`,
  `InputRequiredResult`, `TextContent`.

Names load on first use: a computation's module imports `Computation` from here
and stays light (no SDK, no web stack), because the step pool's processes import
it to run `step`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import CallToolResult, InputRequiredResult, TextContent

    from mrtr_protocol.rounds import EndOfRound
    from mrtr_worker.compute.computation import Computation, Question, State, run_uninterrupted
    from mrtr_worker.packs import PackEnv
    from mrtr_worker.packs.registry import ENTRY_POINT_GROUP, PackError, ToolPack
    from mrtr_worker.tasks.jobs import Job, StepRunner, TaskFailure, compute_job, form_answer, text_result
    from mrtr_worker.tasks.offer import TaskOffer, TaskSupport, offer
    from mrtr_worker.tool_api.capabilities import Need, allows, require
    from mrtr_worker.tool_api.inputs import (
        FormAnswer,
        InputRequestWire,
        SecretInForm,
        form,
        read_form,
        read_roots,
        read_sampled_text,
        roots,
        sampling,
        url_elicitation,
    )
    from mrtr_worker.tool_api.rounds import Round

_SOURCES = {
    "MCPServer": "mcp.server.mcpserver",
    "Context": "mcp.server.mcpserver",
    "CallToolResult": "mcp_types",
    "InputRequiredResult": "mcp_types",
    "TextContent": "mcp_types",
    "EndOfRound": "mrtr_protocol.rounds",
    "Need": "mrtr_worker.tool_api.capabilities",
    "require": "mrtr_worker.tool_api.capabilities",
    "allows": "mrtr_worker.tool_api.capabilities",
    "Computation": "mrtr_worker.compute.computation",
    "Question": "mrtr_worker.compute.computation",
    "State": "mrtr_worker.compute.computation",
    "run_uninterrupted": "mrtr_worker.compute.computation",
    "FormAnswer": "mrtr_worker.tool_api.inputs",
    "InputRequestWire": "mrtr_worker.tool_api.inputs",
    "SecretInForm": "mrtr_worker.tool_api.inputs",
    "form": "mrtr_worker.tool_api.inputs",
    "read_form": "mrtr_worker.tool_api.inputs",
    "read_roots": "mrtr_worker.tool_api.inputs",
    "read_sampled_text": "mrtr_worker.tool_api.inputs",
    "roots": "mrtr_worker.tool_api.inputs",
    "sampling": "mrtr_worker.tool_api.inputs",
    "url_elicitation": "mrtr_worker.tool_api.inputs",
    "PackEnv": "mrtr_worker.packs",
    "ENTRY_POINT_GROUP": "mrtr_worker.packs.registry",
    "PackError": "mrtr_worker.packs.registry",
    "ToolPack": "mrtr_worker.packs.registry",
    "Round": "mrtr_worker.tool_api.rounds",
    "Job": "mrtr_worker.tasks.jobs",
    "compute_job": "mrtr_worker.tasks.jobs",
    "StepRunner": "mrtr_worker.tasks.jobs",
    "TaskFailure": "mrtr_worker.tasks.jobs",
    "form_answer": "mrtr_worker.tasks.jobs",
    "text_result": "mrtr_worker.tasks.jobs",
    "TaskOffer": "mrtr_worker.tasks.offer",
    "TaskSupport": "mrtr_worker.tasks.offer",
    "offer": "mrtr_worker.tasks.offer",
}
"""Where each public name lives today (a reorganisation of the worker changes this table, not the names)."""

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallToolResult",
    "Computation",
    "Context",
    "EndOfRound",
    "FormAnswer",
    "InputRequestWire",
    "InputRequiredResult",
    "Job",
    "MCPServer",
    "Need",
    "PackEnv",
    "PackError",
    "Question",
    "Round",
    "SecretInForm",
    "State",
    "StepRunner",
    "TaskFailure",
    "TaskOffer",
    "TaskSupport",
    "TextContent",
    "ToolPack",
    "allows",
    "compute_job",
    "form",
    "form_answer",
    "offer",
    "read_form",
    "read_roots",
    "read_sampled_text",
    "require",
    "roots",
    "run_uninterrupted",
    "sampling",
    "text_result",
    "url_elicitation",
]


def __getattr__(name: str) -> object:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
