"""The scenario file (TOML): which tools to call, with which arguments and answers, and what to expect.

One file per server under test (docs/fleet-check.md shows one). Every mistake in it is a
`ScenarioError` naming the call and the field, before any process starts.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrtr_client import ScriptedInputs
from mrtr_locust.mcp_calls import SAMPLED_TEXT, CallSpecError, McpCall


class ScenarioError(ValueError):
    """The scenario file cannot be used; the message names the file, the call and the field."""


@dataclass(frozen=True)
class Expect:
    """What a call's answer must be; with neither field, the answer of one instance to the same call."""

    structured: Any = None
    text: str | None = None

    @property
    def given(self) -> bool:
        return self.structured is not None or self.text is not None


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    weight: int = 1
    task: bool = False
    answers: dict[str, Any] = field(default_factory=dict)
    expect: Expect = field(default_factory=Expect)

    def inputs(self) -> ScriptedInputs:
        """The probes' answers, those `McpUser` gives the load: by key, else the form's defaults (no URL mode)."""
        return ScriptedInputs(forms=dict(self.answers), sample=lambda _params: SAMPLED_TEXT, roots=[], url_action=None)

    def mapping(self) -> dict[str, Any]:
        """The call as plain data for the load's `McpCall.from_mapping` (no `expect`: the check judges itself)."""
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "weight": self.weight,
            "task": self.task,
            "answers": self.answers,
        }


@dataclass(frozen=True)
class Scenario:
    name: str
    calls: tuple[Call, ...]
    tokens: tuple[str, ...] = ()
    """Bearer tokens of distinct principals: the first for every call, the second for the foreign-principal probe."""


_TOP_KEYS = frozenset({"name", "call", "tokens"})


def load_scenario(path: Path) -> Scenario:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML ({exc})") from None
    return parse_scenario(data, where=str(path))


def parse_scenario(data: dict[str, Any], *, where: str = "scenario") -> Scenario:
    unknown = sorted(data.keys() - _TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {unknown}; known: {sorted(_TOP_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}: `name` must be a non-empty string")
    raw_calls = data.get("call")
    if not isinstance(raw_calls, list) or not raw_calls:
        raise ScenarioError(f"{where}: at least one [[call]] table is needed")
    tokens = data.get("tokens", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
        raise ScenarioError(f"{where}: `tokens` must be a list of bearer tokens (strings)")
    calls = tuple(_call(raw, f"{where}: [[call]] {n + 1}") for n, raw in enumerate(raw_calls))
    return Scenario(name=name, calls=calls, tokens=tuple(tokens))


def _call(raw: Any, where: str) -> Call:
    """A `[[call]]` table, read by the same rules as `McpCall.from_mapping` (the load runs it as one)."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a [[call]] must be a table")
    if "name" in raw:
        raise ScenarioError(f"{where}: `name` is not used by the fleet check (its report names calls by tool)")
    try:
        spec = McpCall.from_mapping(raw)
    except CallSpecError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    expect = raw.get("expect", {})
    return Call(
        spec.tool,
        dict(spec.arguments),
        spec.weight,
        spec.task,
        dict(spec.answers),
        Expect(structured=expect.get("structured"), text=expect.get("text")),
    )
