"""What `McpUser` calls and what it saw: a call's plain description, its record, and the names of its rounds.

No Locust import, so a tool that builds calls from a scenario file (`McpCall.from_mapping`) or reads
records does not pull in gevent's patching.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrtr_client import CallResult
from mrtr_protocol.rounds import COMPLETE, ERROR, TRANSPORT
from mrtr_protocol.tasks import SUBSCRIPTIONS_LISTEN, TASK_RESULT_TYPE, TASKS_CANCEL, TASKS_GET, TASKS_UPDATE

Check = Callable[[CallResult], str | None]
"""A call's answer check: returns a failure message (or raises); None means the answer is right."""

FormAnswer = Mapping[str, Any] | str
"""An elicitation answer: the form content to accept, or an action (`"decline"`, `"cancel"`)."""

CALL_KEYS = frozenset({"tool", "arguments", "weight", "task", "answers", "expect", "name"})
EXPECT_KEYS = frozenset({"structured", "text"})

TASK_STATS = {TASKS_GET: "task:poll", TASKS_UPDATE: "task:update", TASKS_CANCEL: "task:cancel"}
TASK_STATS[SUBSCRIPTIONS_LISTEN] = "task:listen"
TASK_PUSH = "task:push"
SAMPLED_TEXT = "a canned answer from McpUser"
"""The model text of the default sampling answer."""


class CallSpecError(ValueError):
    """A call description that cannot be run (named field, what was wrong)."""


@dataclass(frozen=True)
class McpCall:
    """One entry of `McpUser.calls`: a tool, its arguments, its share of the load, its answers and check."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    weight: int = 1
    task: bool = False
    """Ask the server to run the call as a task (the tasks extension); a server without it answers at once."""
    answers: Mapping[str, FormAnswer] = field(default_factory=dict)
    """Answers to the server's input requests, by their key; a key not here gets the schema's defaults."""
    check: Check | None = None
    name: str | None = None
    """The statistics entry's name (default: the tool's name)."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise CallSpecError(f"call: 'tool' must be a non-empty string, not {self.tool!r}")
        if not isinstance(self.arguments, Mapping):
            raise CallSpecError(f"call {self.tool!r}: 'arguments' must be a table, not {self.arguments!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, int) or self.weight < 1:
            raise CallSpecError(
                f"call {self.tool!r}: 'weight' must be a whole number of at least 1, not {self.weight!r}"
            )
        if not isinstance(self.task, bool):
            raise CallSpecError(f"call {self.tool!r}: 'task' must be true or false, not {self.task!r}")
        if not isinstance(self.answers, Mapping):
            raise CallSpecError(f"call {self.tool!r}: 'answers' must be a table by input-request key")
        for key, answer in self.answers.items():
            if not isinstance(answer, Mapping | str):
                raise CallSpecError(f"call {self.tool!r}: answer {key!r} must be form content or an action string")

    @property
    def label(self) -> str:
        return self.name or self.tool

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> McpCall:
        """A call from plain data (a scenario file's `[[call]]`): `expect = {structured = ...}` or `{text = ...}`."""
        unknown = sorted(set(data) - CALL_KEYS)
        if unknown:
            raise CallSpecError(f"call {data.get('tool')!r}: unknown keys {unknown} (known: {sorted(CALL_KEYS)})")
        if "tool" not in data:
            raise CallSpecError("call: 'tool' is missing")
        fields = {key: value for key, value in data.items() if key != "expect"}
        expect = data.get("expect")
        return cls(**fields, check=None if expect is None else expect_check(data["tool"], expect))


def check_calls(owner: str, calls: Sequence[Any]) -> None:
    """A user's `calls`: at least one, each an `McpCall`."""
    if not calls:
        raise CallSpecError(f"{owner} has no calls: set `calls` to a sequence of McpCall")
    for call in calls:
        if not isinstance(call, McpCall):
            raise CallSpecError(f"{owner}: each call must be an McpCall (data: McpCall.from_mapping), not {call!r}")


def expect_check(tool: str, expect: Any) -> Check:
    """The check of an `expect` table: exact `structured` content, or the first text block equal to `text`."""
    if not isinstance(expect, Mapping) or len(expect) != 1 or not set(expect) <= EXPECT_KEYS:
        raise CallSpecError(f"call {tool!r}: 'expect' takes exactly one of {sorted(EXPECT_KEYS)}, not {expect!r}")
    if "structured" in expect:
        return structured_is(expect["structured"])
    if not isinstance(expect["text"], str):
        raise CallSpecError(f"call {tool!r}: expect.text must be a string, not {expect['text']!r}")
    return text_is(expect["text"])


def structured_is(expected: Any) -> Check:
    """A check: the answer's `structuredContent` equals `expected`."""

    def check(done: CallResult) -> str | None:
        if done.structured == expected:
            return None
        return f"structuredContent {_short(done.structured)} != expected {_short(expected)}"

    return check


def text_is(expected: str) -> Check:
    """A check: the answer's first text block equals `expected`."""

    def check(done: CallResult) -> str | None:
        texts = [b.get("text") for b in done.result.get("content", []) if b.get("type") == "text"]
        first = texts[0] if texts else None
        return None if first == expected else f"text {first!r} != expected {expected!r}"

    return check


@dataclass(frozen=True)
class McpCallRecord:
    """What one call did, handed to `McpUser.recorded` (and `for_calls(on_record=...)`) after it ends."""

    tool: str
    name: str
    arguments: Mapping[str, Any]
    task: bool
    rounds: list[str]
    """The statistics name of each exchange, in order (`round:input_required`, `round:hand_back`, `task:poll`...);
    a task's changes pushed on a stream come last, one `task:push` each."""
    round_ms: list[float]
    """How long each of `rounds` took (a push: the time from the task's creation)."""
    questions: list[str]
    """The input-request keys answered, in order."""
    instances: list[str]
    """Distinct instances that answered (the `X-Worker-Id` header), in order of first visit."""
    result: CallResult | None
    """The complete result (None when the call failed before completing)."""
    error: str | None
    """Why the call failed: a failed check, a JSON-RPC error (by code), a tool error, or what broke the call."""
    error_code: int | None
    """The JSON-RPC error code, when the call ended with one."""
    elapsed_ms: float
    error_message: str | None = None
    """The server's own message, when the call ended with a JSON-RPC error."""
    versions: list[str] = field(default_factory=list)
    """Distinct versions that answered (the `X-Worker-Version` header), in order of first visit."""
    last_version: str | None = None
    """The version of the instance that gave the last answer (a complete answer's author)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def answer(self) -> Any:
        """The answer to compare: `structuredContent`, else the text, else None (no result)."""
        if self.result is None:
            return None
        return self.result.structured if self.result.structured is not None else self.result.text


def round_name(method: str, reason: str, asked: bool) -> str:
    """The statistics name of one exchange: a tool call's round by how it ended, a task exchange by its method."""
    if method in TASK_STATS:
        return TASK_STATS[method]
    if reason in (COMPLETE, ERROR, TRANSPORT):
        return f"round:{reason}"
    if reason == TASK_RESULT_TYPE:
        return "task:create"
    return "round:input_required" if asked else "round:hand_back"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."
