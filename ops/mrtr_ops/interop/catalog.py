"""What the matrix covers: the features (one call each) and the clients (one row each, pinned).

A new client is one `ClientRow` here, its pin (`drivers/package.json` or the
PyPI pins in `install.py`), a driver in `drivers/` that prints one JSON record
per feature, and the row's known gaps in `gaps.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Feature(StrEnum):
    """One call the matrix makes, named by what it exercises."""

    ELICITATION = "elicitation"
    SAMPLING = "sampling"
    ROOTS = "roots"
    HANDBACK = "handback"
    PROMPT = "prompt"
    RESOURCE = "resource"
    URL_ELICITATION = "url_elicitation"
    TASK_RESULT = "task_result"
    TASK_INPUT = "task_input"
    TASK_CANCEL = "task_cancel"
    TASK_PUSH = "task_push"
    PRIME_REPORT = "prime_report"
    TOOLS_LIST = "tools_list"
    TOOLS_CALL = "tools_call"
    LEGACY_DEFAULT = "legacy_default"


FEATURE_TITLES: dict[Feature, str] = {
    Feature.ELICITATION: "form elicitation (`link_accounts`)",
    Feature.SAMPLING: "sampling (`write_haiku`)",
    Feature.ROOTS: "roots (`scan_roots`)",
    Feature.HANDBACK: "hand-backs across instances (`count_primes`)",
    Feature.PROMPT: "prompt (`onboarding`)",
    Feature.RESOURCE: "resource (`mrtr://reports/42`)",
    Feature.URL_ELICITATION: "URL-mode elicitation (`connect_vault`)",
    Feature.TASK_RESULT: "task, default result codec (`count_primes`)",
    Feature.TASK_INPUT: "question inside a task (`estimate_pi`)",
    Feature.TASK_CANCEL: "cancel a task",
    Feature.TASK_PUSH: "push (`subscriptions/listen`)",
    Feature.PRIME_REPORT: "MRTR round, then a task (`prime_report`)",
    Feature.TOOLS_LIST: "`tools/list`",
    Feature.TOOLS_CALL: "`tools/call` (`echo`)",
    Feature.LEGACY_DEFAULT: "its default era (no `--protocol-era`)",
}

MRTR_FEATURES = (
    Feature.ELICITATION,
    Feature.SAMPLING,
    Feature.ROOTS,
    Feature.HANDBACK,
    Feature.PROMPT,
    Feature.RESOURCE,
    Feature.URL_ELICITATION,
)
TASK_FEATURES = (Feature.TASK_RESULT, Feature.TASK_INPUT, Feature.TASK_CANCEL, Feature.TASK_PUSH, Feature.PRIME_REPORT)


class Runner(StrEnum):
    """How a row's driver is started."""

    NODE = "node"
    """`node drivers/<script>` from the installed npm tree (`.cache/interop/npm`)."""
    PYTHON = "python"
    """`python drivers/py_clients.py <script> CONFIG` in the workspace's `.venv`."""
    PYTHON_TASKS = "python-tasks"
    """The same, in the separate FastMCP-tasks environment (`.cache/interop/fastmcp-tasks`)."""
    INSPECTOR = "inspector"
    """The MCP Inspector's own CLI, one invocation per feature."""


@dataclass(frozen=True)
class ClientRow:
    """One client as the matrix runs it."""

    id: str
    title: str
    short: str
    """The matrix's column heading."""
    packages: tuple[str, ...]
    """Distribution names whose installed versions the report shows (npm names, or PyPI names)."""
    runner: Runner
    script: str
    features: tuple[Feature, ...]
    bearer: bool = False
    """Also run on the `--auth` cluster with a bearer token."""


TS_CLIENT = ClientRow(
    id="ts-client",
    title="TypeScript SDK client",
    short="TS client",
    packages=("@modelcontextprotocol/client",),
    runner=Runner.NODE,
    script="ts_client.mjs",
    features=MRTR_FEATURES,
    bearer=True,
)
EXT_TASKS = ClientRow(
    id="ext-tasks",
    title="ext-tasks on the TypeScript client",
    short="ext-tasks",
    packages=("@modelcontextprotocol/ext-tasks", "@modelcontextprotocol/client"),
    runner=Runner.NODE,
    script="ts_tasks.mjs",
    features=TASK_FEATURES,
    bearer=True,
)
MCP_SDK = ClientRow(
    id="mcp-sdk",
    title="MCP Python SDK client",
    short="Python SDK",
    packages=("mcp",),
    runner=Runner.PYTHON,
    script="mcp-sdk",
    features=MRTR_FEATURES,
)
FASTMCP = ClientRow(
    id="fastmcp",
    title="FastMCP client",
    short="FastMCP",
    packages=("fastmcp",),
    runner=Runner.PYTHON,
    script="fastmcp",
    features=MRTR_FEATURES,
)
FASTMCP_TASKS = ClientRow(
    id="fastmcp-tasks",
    title="FastMCP tasks client",
    short="FastMCP tasks",
    packages=("fastmcp-tasks", "fastmcp"),
    runner=Runner.PYTHON_TASKS,
    script="fastmcp-tasks",
    features=TASK_FEATURES,
)
INSPECTOR = ClientRow(
    id="inspector",
    title="MCP Inspector CLI",
    short="Inspector CLI",
    packages=("@modelcontextprotocol/inspector",),
    runner=Runner.INSPECTOR,
    script="",
    features=(Feature.TOOLS_LIST, Feature.TOOLS_CALL, Feature.TASK_RESULT, Feature.LEGACY_DEFAULT),
)

ROWS: tuple[ClientRow, ...] = (TS_CLIENT, EXT_TASKS, MCP_SDK, FASTMCP, FASTMCP_TASKS, INSPECTOR)
TIMED_ROWS: tuple[ClientRow, ...] = (TS_CLIENT, MCP_SDK, FASTMCP)
"""The rows whose `count_primes` hand-backs are timed beside ours (the MRTR clients)."""


@dataclass(frozen=True)
class Run:
    """One row on one cluster: anonymous, or with a bearer token on the `--auth` cluster."""

    row: ClientRow
    bearer: bool

    @property
    def id(self) -> str:
        return f"{self.row.id}+bearer" if self.bearer else self.row.id

    @property
    def title(self) -> str:
        return f"{self.row.title} (bearer)" if self.bearer else self.row.title

    @property
    def short(self) -> str:
        return f"{self.row.short}, bearer" if self.bearer else self.row.short


def runs() -> tuple[Run, ...]:
    """Every row anonymously, each bearer row again right after it with a token, in the order they run."""
    return tuple(run for row in ROWS for run in (Run(row, False), *((Run(row, True),) if row.bearer else ())))
