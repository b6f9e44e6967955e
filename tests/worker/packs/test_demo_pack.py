"""The demo pack end to end through our client: every kind of input, each through the same MRTR path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mrtr_client import Client, ScriptedInputs
from mrtr_ops.local.process import WorkerSpec
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.conftest import StartWorker
from tests.support.schema import check_server_message
from tests.support.wire import parse_body

ELICIT: dict[str, Any] = {"elicitation": {}}


def schema_checked_http() -> httpx.Client:
    """An httpx client that validates every worker message against the official schema as it arrives."""

    def check(response: httpx.Response) -> None:
        response.read()
        message = parse_body(response)
        if message:
            check_server_message(response.request.headers["mcp-method"], message)

    return httpx.Client(timeout=30, event_hooks={"response": [check]})


@pytest.fixture
def client_for(worker: WorkerSpec) -> Iterator[Any]:
    clients: list[Client] = []

    def make(inputs: Any) -> Client:
        clients.append(Client(f"{worker.url}/mcp", inputs, http=schema_checked_http()))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def test_link_accounts_asks_each_login_once_and_links_them(client_for: Any) -> None:
    client = client_for(ScriptedInputs(forms={"github_login": {"name": "octocat"}, "google_login": {"name": "octo"}}))
    done = client.call_tool("link_accounts")
    assert done.structured == {"linked": {"github_login": "octocat", "google_login": "octo"}}
    assert [q.key for q in done.trace.questions] == ["github_login", "google_login"]  # one per round
    assert done.trace.reasked == []
    assert [hop.reason for hop in done.trace.hops] == ["input", "input", "complete"]


def test_answers_given_over_several_rounds_are_never_asked_again(worker: WorkerSpec) -> None:
    with httpx.Client() as http:
        url = f"{worker.url}/mcp"
        params: dict[str, Any] = {"_meta": request_meta(ELICIT), "name": "link_accounts", "arguments": {}}
        headers = request_headers("tools/call", params)
        first = http.post(url, headers=headers, content=encode_request(1, "tools/call", params))
        asked_first = set(first.json()["result"]["inputRequests"])
        second_params = {
            **params,
            "requestState": first.json()["result"]["requestState"],
            "inputResponses": {"github_login": {"action": "accept", "content": {"name": "octocat"}}},
        }
        second = http.post(url, headers=headers, content=encode_request(2, "tools/call", second_params))
        assert asked_first == {"github_login"}
        assert set(second.json()["result"]["inputRequests"]) == {"google_login"}


def test_answers_offered_before_being_asked_are_used(client_for: Any, worker: Any) -> None:
    answers = {key: {"action": "accept", "content": {"name": "early"}} for key in ("github_login", "google_login")}
    params = {"_meta": request_meta(ELICIT), "name": "link_accounts", "arguments": {}, "inputResponses": answers}
    with httpx.Client() as http:
        body = encode_request(1, "tools/call", params)
        reply = http.post(f"{worker.url}/mcp", headers=request_headers("tools/call", params), content=body)
    result = reply.json()["result"]
    assert result["structuredContent"] == {"linked": {"github_login": "early", "google_login": "early"}}


@pytest.mark.parametrize(("action", "text"), [("decline", "declined"), ("cancel", "cancelled")])
def test_a_declined_login_ends_the_call_with_an_error_result(client_for: Any, action: str, text: str) -> None:
    done = client_for(ScriptedInputs(forms={"github_login": action})).call_tool("link_accounts")
    assert done.is_error
    assert done.text == f"GitHub login was {text}; nothing linked."


def test_sampling_tool_uses_the_clients_model(client_for: Any) -> None:
    client = client_for(ScriptedInputs(sample=lambda params: f"haiku on: {params['messages'][0]['content']['text']}"))
    done = client.call_tool("write_haiku", {"topic": "rain"})
    assert done.structured == {"topic": "rain", "haiku": "haiku on: Write a haiku about rain."}


def test_roots_tool_lists_the_clients_roots(client_for: Any) -> None:
    done = client_for(ScriptedInputs(roots=["file:///a", "file:///b"])).call_tool("scan_roots")
    assert done.structured == {"roots": ["file:///a", "file:///b"], "count": 2}


def test_the_secret_tool_without_a_vault_store_says_it_is_unavailable(client_for: Any) -> None:
    # The URL-mode flow itself (the page, the store, the browser, the capability it needs) is in
    # test_vault_routes / test_vault_browser: with the replay guard on, it needs a worker with Redis.
    done = client_for(ScriptedInputs()).call_tool("connect_vault")
    assert done.is_error
    assert "MRTR_WORKER_REDIS_URL is unset" in done.text  # the vault store and the replay guard both need Redis


def test_a_single_use_tool_without_redis_is_refused_at_once(client_for: Any) -> None:
    """`prime_report` accepts each state at most once, which needs the shared store: refused before it asks."""
    done = client_for(ScriptedInputs()).call_tool("prime_report")
    assert done.is_error
    assert done.trace.questions == []
    assert "at most once" in done.text
    assert "MRTR_WORKER_REDIS_URL" in done.text


def test_the_prompt_asks_first_then_returns_messages(client_for: Any) -> None:
    done = client_for(ScriptedInputs(forms={"preferred_name": {"name": "Ada"}})).get_prompt("onboarding")
    assert "Greet Ada" in done.result["messages"][0]["content"]["text"]


def test_the_resource_asks_first_then_returns_contents(client_for: Any) -> None:
    done = client_for(ScriptedInputs(forms={"detail": {"detail": "full"}})).read_resource("mrtr://reports/7")
    assert done.result["contents"][0]["text"] == "Report 7 (full)"


def test_version_2_needs_the_microsoft_login_too(start_worker: StartWorker) -> None:
    v2, _ = start_worker(version=2)
    answers = {k: {"name": k.split("_")[0]} for k in ("github_login", "google_login", "microsoft_login")}
    with Client(f"{v2.url}/mcp", ScriptedInputs(forms=dict(answers))) as client:
        done = client.call_tool("link_accounts")
    assert set(done.structured["linked"]) == {"github_login", "google_login", "microsoft_login"}
    assert {hop.version for hop in done.trace.hops} == {"2"}
