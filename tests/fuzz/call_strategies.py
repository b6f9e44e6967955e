"""Well-formed requests with fuzzed content: tool arguments, answers, prompt arguments, resource URIs.

Where `wire_strategies` breaks the JSON-RPC structure (most such cases stop
at the parser or the parameter validation), these keep the envelope valid and
put plausible or hostile values where the tools read them, so the cases reach
the handlers, the form validation and the computations.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.fuzz.calls import Call
from tests.fuzz.wire_strategies import any_text, hostile_values

ALL_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}

_text = any_text
_int = st.integers(-10, 100_000) | st.sampled_from([0, 1, 99, 100, 1_000, 10**7, 10**8, 10**8 + 1, 2 * 10**9 + 1])
_optional_int = st.none() | _int
ARGUMENTS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "echo": {"text": _text},
    "link_accounts": {},
    "write_haiku": {"topic": _text},
    "scan_roots": {},
    "connect_vault": {},
    "count_primes": {"limit": _int, "segment": _optional_int},
    "hash_chain": {"seed": _text, "iterations": _int, "chunk": _optional_int},
    "estimate_pi": {"samples": _int, "seed": _int, "ask_to_refine": st.booleans(), "chunk": _optional_int},
}
"""Each tool's parameters, with values of the declared type (edge values and odd text included)."""

ANSWER_KEYS = {
    "link_accounts": ("github_login", "google_login", "microsoft_login"),
    "write_haiku": ("haiku",),
    "scan_roots": ("roots",),
    "connect_vault": ("vault",),
    "estimate_pi": ("refine",),
}
"""The `inputResponses` keys each tool reads."""

plausible = st.one_of(
    st.integers(-5, 5_000),
    st.booleans(),
    st.text(max_size=12),
    any_text,
    st.none(),
)
"""Values a validator might accept, so the handler runs."""

actions = st.sampled_from(["accept", "decline", "cancel"]) | any_text
form_answers = st.fixed_dictionaries(
    {"action": actions},
    optional={
        "content": st.dictionaries(
            st.sampled_from(["name", "refine", "detail"]) | any_text, plausible | hostile_values, max_size=3
        )
    },
)
sampling_answers = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["assistant", "user"]) | any_text,
        "content": st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": any_text}),
        "model": any_text,
    }
)
roots_answers = st.fixed_dictionaries(
    {
        "roots": st.lists(
            st.fixed_dictionaries({"uri": st.sampled_from(["file:///w", "file:///"]) | any_text}), max_size=3
        )
    }
)
answers = st.one_of(form_answers, sampling_answers, roots_answers, hostile_values)


@st.composite
def tool_calls(draw: st.DrawFn) -> Call:
    """A `tools/call` with fuzzed arguments and, sometimes, fuzzed answers to the tool's questions."""
    tool = draw(st.sampled_from(sorted(ARGUMENTS)))
    arguments = {
        name: draw(typed if draw(st.integers(0, 3)) else hostile_values)  # three in four of the declared type
        for name, typed in ARGUMENTS[tool].items()
        if draw(st.integers(0, 5))
    }
    if draw(st.integers(0, 5)) == 0:
        arguments[draw(any_text)] = draw(plausible)
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    keys = ANSWER_KEYS.get(tool, ())
    with_answers: bool = draw(st.booleans())
    if keys and with_answers:
        answered = [key for key in keys if draw(st.booleans())]
        params["inputResponses"] = {key: draw(answers) for key in answered}
    return Call(f"tool:{tool}", "tools/call", params, draw(st.sampled_from([ALL_CAPABILITIES, {}])))


@st.composite
def prompt_and_resource_calls(draw: st.DrawFn) -> Call:
    """`prompts/get` with fuzzed names, arguments and answers; `resources/read` with fuzzed URIs."""
    if draw(st.booleans()):
        name = draw(st.sampled_from(["onboarding", "no_such_prompt"]) | any_text)
        params: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            params["arguments"] = draw(st.dictionaries(any_text, plausible, max_size=2))
        if draw(st.booleans()):
            params["inputResponses"] = {"preferred_name": draw(answers)}
        return Call("prompt", "prompts/get", params, ALL_CAPABILITIES)
    uri = draw(
        st.sampled_from(["mrtr://reports/", "mrtr://", "file:///", ""]).flatmap(lambda p: any_text.map(p.__add__))
    )
    params = {"uri": uri}
    if draw(st.booleans()):
        params["inputResponses"] = {"detail": draw(answers)}
    return Call("resource", "resources/read", params, ALL_CAPABILITIES)
