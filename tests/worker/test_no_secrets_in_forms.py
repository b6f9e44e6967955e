"""Secrets never travel in form mode: every form the worker sends is checked on the wire.

A form's answer passes through the client and rides in the sealed state from
hop to hop; a secret must instead be entered on the service's own page
(URL-mode elicitation). This drives every tool, prompt and resource of every
pack through a real worker, answering whatever it asks, and inspects each
question it sends.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from mrtr_client import Client, MrtrError, ScriptedInputs
from mrtr_client.inputs import Answer
from mrtr_ops.local.process import WorkerSpec
from mrtr_worker.inputs import SecretInForm, form
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

SECRETS = re.compile(r"password|passphrase|secret|token|api.?key|private.?key|credential|\bpin\b", re.IGNORECASE)


class RecordingInputs(ScriptedInputs):
    """Answers everything (schema defaults, accept URLs, sample, roots) and keeps every question."""

    def __init__(self) -> None:
        super().__init__(sample=lambda params: "a sampled answer", roots=["file:///workspace"])
        self.seen: list[Mapping[str, Any]] = []

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        self.seen.append(request)
        return super().answer(key, request)


def _argument(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer":
        return max(int(schema.get("minimum", 10)), 10)
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    return "rain"


def _arguments(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    properties: Mapping[str, Any] = input_schema.get("properties", {})
    return {name: _argument(spec) for name, spec in properties.items() if name in input_schema.get("required", [])}


@pytest.fixture(scope="module")
def everything(start_worker: StartWorker) -> WorkerSpec:
    return start_worker(tool_packs=("demo", "compute", "conformance"))[0]


@pytest.fixture(scope="module")
def questions(everything: WorkerSpec) -> list[Mapping[str, Any]]:
    url = f"{everything.url}/mcp"
    lister = McpHttp(url)
    tools = lister.call("tools/list", {}).result["tools"]
    prompts = lister.call("prompts/list", {}).result["prompts"]
    templates = lister.call("resources/templates/list", {}).result["resourceTemplates"]
    lister.close()
    inputs = RecordingInputs()
    with Client(url, inputs, http=httpx.Client(timeout=60)) as client:
        for tool in tools:
            # A call may refuse the generated arguments; only the questions asked matter here.
            with contextlib.suppress(MrtrError):
                client.call_tool(tool["name"], _arguments(tool.get("inputSchema", {})))
        for prompt in prompts:
            arguments = {a["name"]: "rain" for a in prompt.get("arguments") or [] if a.get("required")}
            with contextlib.suppress(MrtrError):
                client.get_prompt(prompt["name"], arguments)
        for template in templates:
            with contextlib.suppress(MrtrError):
                client.read_resource(re.sub(r"\{[^}]+\}", "42", template["uriTemplate"]))
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
