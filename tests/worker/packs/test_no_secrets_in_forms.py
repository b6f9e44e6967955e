"""Secrets never travel in form mode: every form the worker sends is checked on the wire.

A form's answer passes through the client and rides in the sealed state from
hop to hop; a secret must instead be entered on the service's own page
(URL-mode elicitation). This drives every tool, prompt and resource of every
pack, built in or installed, through a real worker, answering whatever it asks, and inspects each
question it sends.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr_client import Client, MrtrError, ScriptedInputs
from mrtr_client.inputs import Answer
from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from mrtr_worker.packs.registry import available_packs
from mrtr_worker.tool_api.inputs import SecretInForm, form
from tests.conftest import StartWorker
from tests.support.packs import prompt_arguments, template_uri, tool_arguments
from tests.support.wire import McpHttp

SECRETS = re.compile(
    r"password|passphrase|secret|token|api.?key|private.?key|credential|\bpin\b"
    r"|card.?number|credit.?card|\bcv[vc]|\biban\b|account.?number",
    re.IGNORECASE,
)


class RecordingInputs(ScriptedInputs):
    """Answers everything (schema defaults, accept URLs, sample, roots) and keeps every question."""

    def __init__(self) -> None:
        super().__init__(sample=lambda params: "a sampled answer", roots=["file:///workspace"])
        self.seen: list[Mapping[str, Any]] = []

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        self.seen.append(request)
        return super().answer(key, request)


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def everything(start_worker: StartWorker, redis_server: RedisServer, issuer: tuple[DevIssuer, Path]) -> WorkerSpec:
    """Every pack, with Redis and a token issuer: the vault (signed-in callers only), the task tools and the
    single-use tools are served only with them."""
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": "forms:",
        "MRTR_WORKER_PUBLIC_URL": "https://mrtr.example.com",
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
    }
    return start_worker(tool_packs=available_packs(), env=env)[0]  # installed ones too (the example pack)


@pytest.fixture(scope="module")
def questions(everything: WorkerSpec, issuer: tuple[DevIssuer, Path]) -> list[Mapping[str, Any]]:
    url = f"{everything.url}/mcp"
    lister = McpHttp(url)
    tools = lister.call("tools/list", {}).result["tools"]
    prompts = lister.call("prompts/list", {}).result["prompts"]
    templates = lister.call("resources/templates/list", {}).result["resourceTemplates"]
    lister.close()
    inputs = RecordingInputs()
    with Client(url, inputs, token=issuer[0].mint("forms"), http=httpx.Client(timeout=60)) as client:
        for tool in tools:
            # A call may refuse the generated arguments; only the questions asked matter here.
            with contextlib.suppress(MrtrError):
                client.call_tool(tool["name"], tool_arguments(tool.get("inputSchema", {})))
        for prompt in prompts:
            with contextlib.suppress(MrtrError):
                client.get_prompt(prompt["name"], prompt_arguments(prompt))
        for template in templates:
            with contextlib.suppress(MrtrError):
                client.read_resource(template_uri(template["uriTemplate"]))
    return inputs.seen


def _forms(questions: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        q["params"]
        for q in questions
        if q.get("method") == "elicitation/create" and q["params"].get("mode", "form") == "form"
    ]


def test_the_packs_ask_many_forms(questions: list[Mapping[str, Any]]) -> None:
    assert len(_forms(questions)) >= 8  # the check below is meaningful only if forms were really seen


def test_no_form_asks_for_a_secret(questions: list[Mapping[str, Any]]) -> None:
    for params in _forms(questions):
        schema = params.get("requestedSchema", {})
        texts = [params.get("message", "")]
        for name, spec in schema.get("properties", {}).items():
            texts += [name, str(spec.get("title", "")), str(spec.get("description", ""))]
        leaking = [text for text in texts if SECRETS.search(text)]
        assert leaking == [], params


def test_the_tool_that_needs_a_secret_sends_the_user_to_a_page(questions: list[Mapping[str, Any]]) -> None:
    urls = [q["params"] for q in questions if q["params"].get("mode") == "url"]
    vault = [p for p in urls if "API key" in p["message"]]
    assert vault, urls
    assert all(p["url"].startswith("https://") for p in vault)


@pytest.mark.parametrize(
    ("message", "properties"),
    [
        ("Enter your password", {"answer": {"type": "string"}}),
        ("Connect", {"api_key": {"type": "string"}}),
        ("Connect", {"value": {"type": "string", "title": "Access token"}}),
        ("Connect", {"value": {"type": "string", "description": "your client secret"}}),
    ],
)
def test_building_a_form_that_asks_for_a_secret_fails(message: str, properties: dict[str, Any]) -> None:
    with pytest.raises(SecretInForm, match="URL-mode"):
        form(message, properties)


# The builder's word list, table-driven: payment credentials are secrets too (the elicitation rules forbid
# form mode for "passwords, API keys, access tokens or payment credentials"), ordinary words are not.

REFUSED: list[tuple[str, dict[str, Any]]] = [
    # Payment credentials, by property name in every spelling a schema uses ...
    ("Pay", {"card_number": {"type": "string"}}),
    ("Pay", {"cardNumber": {"type": "string"}}),
    ("Pay", {"CardNumber": {"type": "string"}}),
    ("Pay", {"credit_card": {"type": "string"}}),
    ("Pay", {"ccNumber": {"type": "string"}}),
    ("Pay", {"cvv": {"type": "string"}}),
    ("Pay", {"CVV2": {"type": "string"}}),
    ("Pay", {"card_cvc": {"type": "string"}}),
    ("Pay", {"securityCode": {"type": "string"}}),
    ("Pay", {"iban": {"type": "string"}}),
    ("Pay", {"payoutIBAN": {"type": "string"}}),
    ("Pay", {"pin": {"type": "string"}}),
    ("Pay", {"card_pin": {"type": "string"}}),
    ("Pay", {"pinCode": {"type": "string"}}),
    ("Pay", {"PIN-code": {"type": "string"}}),
    ("Pay", {"account_number": {"type": "string"}}),
    # ... by title ...
    ("Pay", {"value": {"type": "string", "title": "Card number"}}),
    ("Pay", {"value": {"type": "string", "title": "CVC"}}),
    ("Pay", {"value": {"type": "string", "title": "IBAN"}}),
    ("Pay", {"value": {"type": "string", "title": "PIN"}}),
    ("Pay", {"value": {"type": "string", "title": "Debit card"}}),
    # ... by description ...
    ("Pay", {"value": {"type": "string", "description": "the 16 digits of your credit card"}}),
    ("Pay", {"value": {"type": "string", "description": "the card verification value on the back"}}),
    ("Pay", {"value": {"type": "string", "description": "your bank's IBAN"}}),
    ("Pay", {"value": {"type": "string", "description": "your 4-digit PIN"}}),
    # ... by format ...
    ("Pay", {"value": {"type": "string", "format": "credit-card"}}),
    ("Pay", {"value": {"type": "string", "format": "iban"}}),
    # ... and in the message itself.
    ("Enter your card number", {"value": {"type": "string"}}),
    ("What is your IBAN?", {"value": {"type": "string"}}),
    ("Type the CVV", {"value": {"type": "string"}}),
    ("Choose a PIN", {"value": {"type": "string"}}),
    # The secrets the guard already knew, now also in camelCase and snake_case names.
    ("Connect", {"apiKey": {"type": "string"}}),
    ("Connect", {"userPassword": {"type": "string"}}),
    ("Connect", {"one_time_otp": {"type": "string"}}),
]

ALLOWED: list[tuple[str, dict[str, Any]]] = [
    ("What do you think?", {"opinion": {"type": "string", "title": "Your opinion"}}),
    ("Lunch", {"vegetable": {"type": "string", "enum": ["spinach", "kale"]}}),
    ("Lunch", {"spinach": {"type": "boolean"}}),
    ("Board", {"pinned": {"type": "boolean", "title": "Pinned to the top"}}),
    ("Board", {"pinnedAt": {"type": "string", "format": "date-time"}}),
    ("Editor", {"typing": {"type": "string", "description": "what you are typing"}}),
    ("Editor", {"spinner": {"type": "boolean", "title": "Show a spinner"}}),
    ("Map", {"pinpoint": {"type": "string", "description": "pinpoint the place"}}),
    ("Greeting", {"card_message": {"type": "string", "title": "Message for the greeting card"}}),
    ("Game", {"card_game": {"type": "string", "title": "Favourite card game"}}),
    ("Shipping", {"zip_code": {"type": "string", "title": "Postal code"}}),
    ("Shop", {"promo_code": {"type": "string", "title": "Promo code"}}),
    ("Trip", {"boarding_pass": {"type": "string", "description": "boarding pass seat"}}),
    ("Profile", {"name": {"type": "string", "title": "GitHub username"}}),
    ("Profile", {"email": {"type": "string", "format": "email"}}),
    ("Bank", {"bank_name": {"type": "string", "title": "Name of your bank"}}),
    ("Who is the prime report for, and up to which number should it count?", {"limit": {"type": "integer"}}),
]


@pytest.mark.parametrize(("message", "properties"), REFUSED, ids=[repr(c) for c in REFUSED])
def test_a_form_asking_for_a_credential_is_refused(message: str, properties: dict[str, Any]) -> None:
    with pytest.raises(SecretInForm, match="URL-mode"):
        form(message, properties)


@pytest.mark.parametrize(("message", "properties"), ALLOWED, ids=[repr(c) for c in ALLOWED])
def test_an_ordinary_form_is_built(message: str, properties: dict[str, Any]) -> None:
    assert form(message, properties)["params"]["requestedSchema"]["properties"] == properties
