"""Builders for the input requests a tool can embed in `input_required`, and readers for the answers.

The builders return wire-shaped dicts (the SDK validates them into its models);
the readers take the SDK's parsed `InputResponses` and say plainly what the
client answered, so a handler never pokes at union types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, TextContent

InputRequestWire = dict[str, Any]

SECRET_WORDS = re.compile(
    r"pass ?(word|phrase|code)|secret|token|api ?key|private ?key|credential|\b(pin|otp)\b"
    # Payment credentials: card numbers, card security codes, bank account numbers.
    r"|\b(credit|debit|payment|bank) ?card|\bcard ?(number|num|no)\b|\bcc ?(number|num|no)\b"
    r"|\bcv[vc]2?\b|\bcard ?(verification|security) ?(value|code)|\bsecurity ?code"
    r"|\biban\b|\b(bank ?)?account ?(number|num|no)\b|\brouting ?number|\bsort ?code",
    re.IGNORECASE,
)
"""What a form must never ask for: the client, and every hop of its state, would see the answer.

Matched against `words` of each text (never the raw text), so `cardNumber`, `card_number` and
"Card number" are one phrase and `pin` is a whole word: `card_pin` and "PIN" are refused,
"spinach", "opinion" and "pinned" are not.
"""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LETTER_DIGIT = re.compile(r"(?<=[A-Za-z])(?=[0-9]{2,})|(?<=[0-9])(?=[A-Za-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def words(text: str) -> str:
    """`text` as lowercase words split at camelCase, separators and digit runs: `payoutIBAN_2` -> "payout iban 2"."""
    spaced = _LETTER_DIGIT.sub(" ", _CAMEL.sub(" ", text))
    return " ".join(_SEPARATORS.sub(" ", spaced).lower().split())


class SecretInForm(ValueError):
    """A form was built to ask for a secret; use `url_elicitation` so the secret never crosses the client."""


def form(message: str, properties: Mapping[str, Any], required: list[str] | None = None) -> InputRequestWire:
    """A form-mode elicitation. Never for secrets: those go through `url_elicitation`, and this refuses them."""
    _refuse_secrets(message, properties)
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = required
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def _refuse_secrets(message: str, properties: Mapping[str, Any]) -> None:
    texts = [message]
    for name, spec in properties.items():
        texts.append(name)
        if isinstance(spec, Mapping):
            texts.extend(str(spec.get(field, "")) for field in ("title", "description", "format"))
    for text in texts:
        if found := SECRET_WORDS.search(words(text)):
            raise SecretInForm(f"form asks for a secret ({found.group(0)!r} in {text!r}); use URL-mode elicitation")


def url_elicitation(message: str, url: str) -> InputRequestWire:
    """A URL-mode elicitation: the user completes the flow in a browser the client cannot see."""
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}


def sampling(prompt: str, *, max_tokens: int, system_prompt: str | None = None) -> InputRequestWire:
    params: dict[str, Any] = {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    }
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    return {"method": "sampling/createMessage", "params": params}


def roots() -> InputRequestWire:
    return {"method": "roots/list", "params": {}}


@dataclass(frozen=True)
class FormAnswer:
    """What the user did with a form: `content` is set only for a valid accept."""

    action: str
    content: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept" and self.content is not None


def read_form(responses: Mapping[str, Any], key: str, request: InputRequestWire) -> FormAnswer | None:
    """The answer to form `key`, validated against the schema we asked with; None if absent.

    An accept whose content does not satisfy the schema is reported with a
    `problem`, so the caller can ask again instead of trusting it.
    """
    answer = responses.get(key)
    if not isinstance(answer, ElicitResult):
        return None
    if answer.action != "accept":
        return FormAnswer(action=answer.action)
    content = dict(answer.content or {})
    schema = request["params"]["requestedSchema"]
    try:
        jsonschema.validate(content, schema)
    except jsonschema.ValidationError as exc:
        return FormAnswer(action="accept", problem=exc.message)
    return FormAnswer(action="accept", content=content)


def read_url_consent(responses: Mapping[str, Any], key: str) -> str | None:
    """The action taken on a URL elicitation (`accept`, `decline`, `cancel`), or None if absent."""
    answer = responses.get(key)
    return answer.action if isinstance(answer, ElicitResult) else None


def read_sampled_text(responses: Mapping[str, Any], key: str) -> str | None:
    """The model's text from a sampling answer, or None if absent or not text."""
    answer = responses.get(key)
    if not isinstance(answer, CreateMessageResult):
        return None
    content = answer.content
    return content.text if isinstance(content, TextContent) else None


def read_roots(responses: Mapping[str, Any], key: str) -> list[str] | None:
    """Root URIs from a roots answer, or None if absent."""
    answer = responses.get(key)
    if not isinstance(answer, ListRootsResult):
        return None
    return [str(root.uri) for root in answer.roots]
