"""Answering the server's input requests: elicitation, sampling and roots.

An `InputHandler` declares the client capabilities it supports (sent with
every request) and answers one embedded request at a time. The handlers here
cover scripted answers (tests, load tests) and schema-driven defaults; the
CLI has an interactive one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mrtr_client.errors import InputDeclined

Answer = dict[str, Any]


class InputHandler(Protocol):
    """Answers the input requests of `input_required` results."""

    def capabilities(self) -> dict[str, Any]:
        """The `clientCapabilities` this handler can honour."""
        ...

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer | Awaitable[Answer]:
        """The `InputResponse` for one input request (`elicitation/create`, `sampling/createMessage`, `roots/list`)."""
        ...


class NoInputs:
    """Declares no capabilities; a server must not ask it anything."""

    def capabilities(self) -> dict[str, Any]:
        return {}

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        raise InputDeclined(f"no handler for input request {key!r} ({request.get('method')})")


def default_form_content(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fill a flat elicitation schema from its defaults, else the first enum value, else a plain value."""
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            content[name] = prop["default"]
        elif prop.get("enum"):
            content[name] = prop["enum"][0]
        elif prop.get("oneOf"):
            content[name] = prop["oneOf"][0]["const"]
        else:
            content[name] = {"boolean": True, "number": 0, "integer": 0, "array": []}.get(prop.get("type"), "test")
    return content


def sampling_answer(text: str, model: str = "scripted") -> Answer:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": model, "stopReason": "endTurn"}


@dataclass
class ScriptedInputs:
    """Canned answers, keyed by input-request key; unknown form keys get schema defaults.

    `forms` maps a key to the form content to submit, or to an action string
    (`"decline"`, `"cancel"`). `sample` turns a sampling request's params into
    the model's text. `roots` lists root URIs. `url_action` answers URL-mode
    elicitations: `accept` only claims the user finished in the browser, so a
    server that checks (the demo's `connect_vault`) asks again until its page
    has seen them; a script with no browser behind it should decline.
    """

    forms: dict[str, dict[str, Any] | str] = field(default_factory=dict)
    sample: Callable[[Mapping[str, Any]], str] | None = None
    roots: list[str] | None = None
    url_action: str | None = "accept"
    elicitation: bool = True

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.elicitation:
            caps["elicitation"] = {"form": {}, **({"url": {}} if self.url_action else {})}
        if self.sample is not None:
            caps["sampling"] = {}
        if self.roots is not None:
            caps["roots"] = {}
        return caps

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        method = request.get("method")
        params: Mapping[str, Any] = request.get("params") or {}
        if method == "elicitation/create" and self.elicitation:
            if params.get("mode") == "url":
                if self.url_action is None:
                    raise InputDeclined("URL-mode elicitation not supported")
                return {"action": self.url_action}
            scripted = self.forms.get(key)
            if isinstance(scripted, str):
                return {"action": scripted}
            content = scripted if scripted is not None else default_form_content(params.get("requestedSchema") or {})
            return {"action": "accept", "content": content}
        if method == "sampling/createMessage" and self.sample is not None:
            return sampling_answer(self.sample(params))
        if method == "roots/list" and self.roots is not None:
            return {"roots": [{"uri": uri} for uri in self.roots]}
        raise InputDeclined(f"cannot answer input request {key!r} ({method})")
