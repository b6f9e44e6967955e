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
        """Answers by key; a key with no answer gets its form's schema defaults (`ScriptedInputs`)."""
        return ScriptedInputs(forms=dict(self.answers), sample=lambda _params: "fleet-check", roots=[])


@dataclass(frozen=True)
class Scenario:
    name: str
    calls: tuple[Call, ...]
    tokens: tuple[str, ...] = ()
    """Bearer tokens of distinct principals: the first for every call, the second for the foreign-principal probe."""


_CALL_KEYS = frozenset({"tool", "arguments", "weight", "task", "answers", "expect"})
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
    calls = tuple(_call(raw, f"{where}: call {n + 1}") for n, raw in enumerate(raw_calls))
    return Scenario(name=name, calls=calls, tokens=tuple(tokens))


def _call(raw: Any, where: str) -> Call:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a [[call]] must be a table")
    unknown = sorted(raw.keys() - _CALL_KEYS)
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {unknown}; known: {sorted(_CALL_KEYS)}")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise ScenarioError(f"{where}: `tool` must be the name of a tool the server lists")
    arguments = raw.get("arguments", {})
    answers = raw.get("answers", {})
    weight = raw.get("weight", 1)
    task = raw.get("task", False)
    for key, value, kind in (("arguments", arguments, dict), ("answers", answers, dict), ("task", task, bool)):
        if not isinstance(value, kind):
            raise ScenarioError(f"{where} ({tool}): `{key}` must be a {kind.__name__}")
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
        raise ScenarioError(f"{where} ({tool}): `weight` must be a whole number of at least 1, not {weight!r}")
    for key, answer in answers.items():
        if not isinstance(answer, dict | str):
            raise ScenarioError(f"{where} ({tool}): answer {key!r} must be a table (form content) or an action")
    return Call(tool, arguments, weight, task, answers, _expect(raw.get("expect", {}), f"{where} ({tool})"))


def _expect(raw: Any, where: str) -> Expect:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: [call.expect] must be a table")
    unknown = sorted(raw.keys() - {"structured", "text"})
    if unknown:
        raise ScenarioError(f"{where}: unknown keys in [call.expect] {unknown}; known: ['structured', 'text']")
    if "structured" in raw and "text" in raw:
        raise ScenarioError(f"{where}: [call.expect] takes `structured` or `text`, not both")
    text = raw.get("text")
    if text is not None and not isinstance(text, str):
        raise ScenarioError(f"{where}: [call.expect] `text` must be a string")
    return Expect(structured=raw.get("structured"), text=text)
