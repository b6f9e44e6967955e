"""The vault page and `connect_vault` on a real worker with Redis and the development issuer, over plain HTTP.

The tool completes only when the store shows the flow completed on the page by
the caller; the client's `accept` alone asks again with the same URL. The page
refuses another user, forms without the session's CSRF token, and expired flows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import ManagedProcess, WorkerSpec, free_port
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_worker.vault.flows import key_fingerprint
from mrtr_worker.vault.session import COOKIE
from tests.support.vault import PageVisitor, VaultCall, asked_url, csrf_in, flow_of

pytestmark = pytest.mark.slow

PREFIX = "vault-routes:"
STATE_TTL_SECONDS = 120
API_KEY = "sk-test-" + "7" * 24


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def vault_worker(
    redis_server: RedisServer, keyring_file: Path, log_dir: Path, issuer: tuple[DevIssuer, Path]
) -> Iterator[tuple[WorkerSpec, ManagedProcess]]:
    """One worker with Redis and the issuer; its public URL is its own address (no proxy in these tests)."""
    port = free_port()
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": PREFIX,
        "MRTR_WORKER_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "MRTR_WORKER_STATE_TTL_SECONDS": str(STATE_TTL_SECONDS),
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
        "MRTR_WORKER_ALLOW_ANONYMOUS": "true",
    }
    spec = WorkerSpec("vault-routes", port, keyring_file, tool_packs=("demo",), extra_env=tuple(env.items()))
    process = spec.process(log_dir).start()
    try:
        process.wait_ready()
        yield spec, process
    finally:
        process.stop()


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def call_as(vault_worker: tuple[WorkerSpec, ManagedProcess], issuer: tuple[DevIssuer, Path]) -> Iterator[Any]:
    calls: list[VaultCall] = []

    def make(subject: str | None) -> VaultCall:
        token = None if subject is None else issuer[0].mint(subject)
        calls.append(VaultCall(f"{vault_worker[0].url}/mcp", token))
        return calls[-1]

    yield make
    for call in calls:
        call.close()


@pytest.fixture
def visitor() -> Iterator[PageVisitor]:
    page = PageVisitor()
    yield page
    page.close()


def test_accept_without_completion_asks_again_with_the_same_url(call_as: Any, vault_worker: Any, store: Any) -> None:
    call = call_as("alice")
    url = asked_url(call.round())
    assert url.startswith(f"{vault_worker[0].url}/vault/connect?flow=")
    again = call.round("accept")
    assert asked_url(again) == url  # same flow, same URL: the client's word is not enough
    assert "not show this connection as completed" in again["inputRequests"]["vault"]["params"]["message"]
    record = store.hgetall(f"{PREFIX}vault:{flow_of(url)}")
    assert record["status"] == "pending"
    assert json.loads(record["owner"])[1] == "alice"
    assert 0 < store.pttl(f"{PREFIX}vault:{flow_of(url)}") <= STATE_TTL_SECONDS * 1000  # expires with the state


def test_the_caller_completes_the_flow_on_the_page_and_the_retry_completes(
    call_as: Any, visitor: PageVisitor, issuer: Any, vault_worker: Any, log_dir: Path
) -> None:
    call = call_as("alice")
    url = asked_url(call.round())
    signed_in = visitor.sign_in(url, issuer[0].mint("alice"))
    assert signed_in.status_code == 200
    assert 'id="who"' in signed_in.text
    assert "alice" in signed_in.text
    done_page = visitor.submit_key(url, API_KEY)
    assert done_page.status_code == 200
    assert 'id="done"' in done_page.text
    done = call.round("accept")
    assert done.get("isError") is not True, done
    assert done["structuredContent"] == {
        "flow": flow_of(url),
        "connected": True,
        "keyRef": key_fingerprint(API_KEY),
        "completedBy": "alice",
    }
    assert API_KEY not in json.dumps(done)  # the key never reaches the MCP client
    worker_log = (log_dir / f"{vault_worker[0].instance_id}.log").read_text()
    assert API_KEY not in worker_log
    assert "completed by alice" in worker_log


def test_another_user_is_refused_and_the_call_does_not_complete(
    call_as: Any, visitor: PageVisitor, issuer: Any, vault_worker: Any, store: Any, log_dir: Path
) -> None:
    alice = call_as("alice")
    url = asked_url(alice.round())
    refused = visitor.sign_in(url, issuer[0].mint("bob"))
    assert refused.status_code == 403
    assert 'id="refused"' in refused.text
    assert "bob" in refused.text
    # Bob posts a key for Alice's flow with his own valid session (his CSRF token from his own flow's page).
    own_url = asked_url(call_as("bob").round())
    bob_csrf = csrf_in(visitor.open(own_url).text)
    posted = visitor.http.post(
        f"{vault_worker[0].url}/vault/connect", data={"flow": flow_of(url), "csrf": bob_csrf, "api_key": API_KEY}
    )
    assert posted.status_code == 403
    assert 'id="refused"' in posted.text
    assert store.hget(f"{PREFIX}vault:{flow_of(url)}", "status") == "pending"
    assert asked_url(alice.round("accept")) == url  # still not completed: Alice is asked again
    log = (log_dir / f"{vault_worker[0].instance_id}.log").read_text()
    assert "bob (issuer mrtr-dev-issuer) submitted a key for another user's flow; refused" in log


def test_forms_without_the_sessions_csrf_token_are_refused(
    call_as: Any, visitor: PageVisitor, issuer: Any, vault_worker: Any, store: Any
) -> None:
    base = vault_worker[0].url
    url = asked_url(call_as("alice").round())
    visitor.open(url)  # a session with a CSRF token exists now
    forged = visitor.http.post(f"{base}/vault/sign-in", data={"flow": flow_of(url), "token": issuer[0].mint("mallory")})
    assert forged.status_code == 403
    assert "CSRF" in forged.text
    visitor.sign_in(url, issuer[0].mint("alice"))
    wrong = visitor.submit_key(url, API_KEY, csrf="not-the-token")
    assert wrong.status_code == 403
    cross_site = visitor.http.post(
        f"{base}/vault/connect",
        data={"flow": flow_of(url), "csrf": csrf_in(visitor.open(url).text), "api_key": API_KEY},
        headers={"Origin": "https://attacker.example"},
    )
    assert cross_site.status_code == 403
    assert store.hget(f"{PREFIX}vault:{flow_of(url)}", "status") == "pending"


def test_the_session_cookie_is_sealed_httponly_and_samesite(call_as: Any, visitor: PageVisitor, issuer: Any) -> None:
    url = asked_url(call_as("alice").round())
    first = visitor.open(url)
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=v1.")  # sealed with the fleet's key ring
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/vault" in cookie
    assert first.headers["content-security-policy"].startswith("default-src 'none'")
    assert first.headers["referrer-policy"] == "same-origin"  # the flow id never leaves as a referrer
    visitor.http.cookies.set(COOKIE, "v1.forged", path="/vault")
    assert 'id="token"' in visitor.open(url).text  # a forged session is no session: sign in again


def test_an_expired_flow_is_refused_by_the_page_and_the_tool(
    call_as: Any, visitor: PageVisitor, issuer: Any, store: Any
) -> None:
    call = call_as("alice")
    url = asked_url(call.round())
    key = f"{PREFIX}vault:{flow_of(url)}"
    store.pexpire(key, 1)  # the state's TTL, run out (Redis expires it itself)
    wait_until(lambda: store.exists(key) == 0, timeout=10, what="Redis to expire the flow")
    page = visitor.sign_in(url, issuer[0].mint("alice"))
    assert page.status_code == 404
    assert 'id="expired"' in page.text
    ended = call.round("accept")
    assert ended["isError"] is True
    assert "expired" in ended["content"][0]["text"]


def test_a_declined_flow_ends_the_call_and_its_link(call_as: Any, store: Any) -> None:
    call = call_as("alice")
    url = asked_url(call.round())
    ended = call.round("decline")
    assert ended["isError"] is True
    assert ended["content"][0]["text"] == "Vault connection was declined."
    assert store.exists(f"{PREFIX}vault:{flow_of(url)}") == 0


def test_an_anonymous_caller_gets_a_clear_error(call_as: Any) -> None:
    ended = call_as(None).round()
    assert ended["isError"] is True
    assert "needs a signed-in caller" in ended["content"][0]["text"]


def test_without_redis_the_tool_is_unavailable_not_broken(worker: WorkerSpec) -> None:
    call = VaultCall(f"{worker.url}/mcp", None)  # the session's default worker: no Redis
    try:
        ended = call.round()
    finally:
        call.close()
    assert ended["isError"] is True
    assert "MRTR_WORKER_REDIS_URL is unset" in ended["content"][0]["text"]  # the vault and its replay guard need it


def test_a_vault_state_is_accepted_once(call_as: Any) -> None:
    call = call_as("alice")
    url = asked_url(call.round())
    first_state = call.state
    assert asked_url(call.round("accept")) == url  # the state is spent here...
    replayed = call.message("accept", state=first_state)  # ...so presenting it again is refused
    assert replayed["error"]["code"] == -32602
    assert replayed["error"]["data"] == {"reason": "request_state_replayed"}


def test_url_mode_is_required(call_as: Any) -> None:
    refused = call_as("alice").message(capabilities={"elicitation": {"form": {}}})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


SCOPE = "mcp:call"


@pytest.fixture(scope="module")
def scoped_worker(
    redis_server: RedisServer, keyring_file: Path, log_dir: Path, issuer: tuple[DevIssuer, Path]
) -> Iterator[WorkerSpec]:
    """A worker that requires the `mcp:call` scope (`MRTR_WORKER_REQUIRED_SCOPES`) of every token."""
    port = free_port()
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": "vault-scoped:",
        "MRTR_WORKER_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]),
        "MRTR_WORKER_ALLOW_ANONYMOUS": "false",
        "MRTR_WORKER_REQUIRED_SCOPES": SCOPE,
    }
    spec = WorkerSpec("vault-scoped", port, keyring_file, tool_packs=("demo",), extra_env=tuple(env.items()))
    process = spec.process(log_dir).start()
    try:
        process.wait_ready()
        yield spec
    finally:
        process.stop()


def test_a_token_refused_at_mcp_for_its_scopes_cannot_sign_in_to_bind_a_key(
    scoped_worker: WorkerSpec, visitor: PageVisitor, issuer: Any, store: Any, log_dir: Path
) -> None:
    """The same user's token from a client not granted the scope: refused at /mcp, and by the page too."""
    scoped, unscoped = issuer[0].mint("alice", scopes=[SCOPE]), issuer[0].mint("alice", client_id="low-privilege")
    call, low = VaultCall(f"{scoped_worker.url}/mcp", scoped), VaultCall(f"{scoped_worker.url}/mcp", unscoped)
    try:
        assert low.message()["error"] == "insufficient_scope"
        url = asked_url(call.round())
        refused = visitor.sign_in(url, unscoped)
        assert refused.status_code == 403
        assert f"lacks the scope(s) this service requires ({SCOPE})" in refused.text
        assert visitor.submit_key(url, API_KEY).status_code == 401  # not signed in: the key is not taken
        assert store.hget(f"vault-scoped:vault:{flow_of(url)}", "status") == "pending"
        assert asked_url(call.round("accept")) == url  # the flow is not completed
        log = (log_dir / f"{scoped_worker.instance_id}.log").read_text()
        assert f"vault sign-in refused: alice's token lacks the required scope(s) ['{SCOPE}']" in log
        # The control: the token /mcp accepts signs in and completes the flow.
        assert visitor.sign_in(url, scoped).status_code == 200
        assert 'id="done"' in visitor.submit_key(url, API_KEY).text
        assert call.round("accept")["structuredContent"]["completedBy"] == "alice"
    finally:
        call.close()
        low.close()
