"""Bearer authentication: only the issuer's valid tokens get in, and a sealed state opens only for its principal.

The workers run as real processes trusting a development issuer; tokens are
minted the way a real identity provider would sign them, and wrong ones the
way an attacker or a misconfigured client would present them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from mrtr_client import AuthenticationFailed, Client, ScriptedInputs
from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_dev_issuer.issuer import main
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.metrics_page import MetricsPage
from mrtr_protocol.wire import encode_request, request_headers, request_meta
from tests.conftest import McpTo, StartWorker
from tests.support.wire import McpHttp

ELICIT: dict[str, Any] = {"elicitation": {}}
LINK = {"name": "link_accounts", "arguments": {}}
GITHUB = {"github_login": {"action": "accept", "content": {"name": "octocat"}}}
ADMIN_TOKEN = "operator-secret-for-tests"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="module")
def strict(start_worker: StartWorker, issuer: tuple[DevIssuer, Path]) -> WorkerSpec:
    """Tokens required (the compose setting), admin endpoints behind the operator's token."""
    _, public_key = issuer
    env = {
        "MRTR_WORKER_ALLOW_ANONYMOUS": "false",
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(public_key),
        "MRTR_WORKER_ADMIN_TOKEN": ADMIN_TOKEN,
    }
    return start_worker(env=env)[0]


@pytest.fixture(scope="module")
def lenient(start_worker: StartWorker, issuer: tuple[DevIssuer, Path]) -> WorkerSpec:
    """Anonymous calls allowed (the local development setting) while the issuer's tokens still count."""
    return start_worker(env={"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1])})[0]


def _bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def _link(mcp: McpHttp, token: str | None, state: str | None = None, answers: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = dict(LINK)
    if state is not None:
        params["requestState"] = state
    if answers is not None:
        params["inputResponses"] = answers
    return mcp.call("tools/call", params, capabilities=ELICIT, headers=_bearer(token)).message


def _raw(spec: WorkerSpec, headers: dict[str, str]) -> httpx.Response:
    """A well-formed tools/list; only the credentials vary."""
    params = {"_meta": request_meta({})}
    body = encode_request(1, "tools/list", params)
    return httpx.post(f"{spec.url}/mcp", content=body, headers=request_headers("tools/list", params, headers))


def _wrong_tokens(issuer: DevIssuer) -> dict[str, str]:
    stranger = DevIssuer(Ed25519PrivateKey.generate())
    return {
        "signed by another issuer": stranger.mint("alice"),
        "expired": issuer.mint("alice", ttl_seconds=-120),
        "for another audience": issuer.mint("alice", audience="someone-else"),
        "from another issuer name": DevIssuer(issuer.private_key, issuer="evil-issuer").mint("alice"),
        "not yet valid": issuer.mint("alice", not_before=4_000_000_000),
        "garbage": "not.a.jwt",
        "signature stripped": issuer.mint("alice").rsplit(".", 1)[0] + ".",
    }


def test_a_call_without_a_token_is_refused_with_401(strict: WorkerSpec) -> None:
    response = _raw(strict, {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "invalid_token"


@pytest.mark.parametrize(
    "case",
    [
        "signed by another issuer",
        "expired",
        "for another audience",
        "from another issuer name",
        "not yet valid",
        "garbage",
        "signature stripped",
    ],
)
def test_a_wrong_token_is_refused_with_401(
    strict: WorkerSpec, lenient: WorkerSpec, issuer: tuple[DevIssuer, Path], case: str
) -> None:
    token = _wrong_tokens(issuer[0])[case]
    for spec in (strict, lenient):  # a bad token never turns into an anonymous call
        response = _raw(spec, _bearer(token))
        assert response.status_code == 401, (spec.instance_id, response.text)
        assert "Traceback" not in response.text


def test_a_non_bearer_authorization_is_refused(lenient: WorkerSpec) -> None:
    response = _raw(lenient, {"Authorization": "Basic YWxpY2U6c2VjcmV0"})
    assert response.status_code == 401
    assert "Bearer" in response.json()["error_description"]


def test_a_valid_token_gets_through(strict: WorkerSpec, issuer: tuple[DevIssuer, Path], mcp_to: McpTo) -> None:
    token = issuer[0].mint("alice")
    first = _link(mcp_to(strict), token)
    assert first["result"]["resultType"] == "input_required"
    done = _link(mcp_to(strict), token, first["result"]["requestState"], GITHUB)
    assert done["result"]["resultType"] == "input_required"  # v1 asks for a second login next


def test_a_state_sealed_for_one_user_is_rejected_for_another(
    strict: WorkerSpec, issuer: tuple[DevIssuer, Path], mcp_to: McpTo
) -> None:
    alice, bob = issuer[0].mint("alice"), issuer[0].mint("bob")
    mcp = mcp_to(strict)
    state = _link(mcp, alice)["result"]["requestState"]
    before = MetricsPage.parse(httpx.get(f"{strict.url}/metrics").text).value("mrtr_worker_state_rejections_total")

    stolen = _link(mcp, bob, state, GITHUB)

    assert "result" not in stolen
    assert stolen["error"]["message"] == "Invalid or expired requestState"
    after = MetricsPage.parse(httpx.get(f"{strict.url}/metrics").text).value("mrtr_worker_state_rejections_total")
    assert after == before + 1
    assert _link(mcp, alice, state, GITHUB)["result"]["resultType"] == "input_required"  # the owner still can


def test_one_user_of_two_clients_is_two_principals(
    strict: WorkerSpec, issuer: tuple[DevIssuer, Path], mcp_to: McpTo
) -> None:
    mcp = mcp_to(strict)
    state = _link(mcp, issuer[0].mint("alice", client_id="app-one"))["result"]["requestState"]
    other_client = _link(mcp, issuer[0].mint("alice", client_id="app-two"), state, GITHUB)
    assert other_client["error"]["message"] == "Invalid or expired requestState"


def test_anonymous_and_authenticated_states_do_not_mix(
    lenient: WorkerSpec, issuer: tuple[DevIssuer, Path], mcp_to: McpTo
) -> None:
    mcp = mcp_to(lenient)
    alice = issuer[0].mint("alice")
    anonymous_state = _link(mcp, None)["result"]["requestState"]
    alice_state = _link(mcp, alice)["result"]["requestState"]

    assert "result" not in _link(mcp, alice, anonymous_state, GITHUB)
    assert "result" not in _link(mcp, None, alice_state, GITHUB)
    assert _link(mcp, None, anonymous_state, GITHUB)["result"]["resultType"] == "input_required"


def test_the_client_reports_a_refused_token_without_retrying(strict: WorkerSpec) -> None:
    with Client(f"{strict.url}/mcp", token="not.a.jwt") as client, pytest.raises(AuthenticationFailed) as caught:
        client.call_tool("echo", {"text": "hi"})
    assert caught.value.http_status == 401
    assert "invalid or expired" in caught.value.description


def test_the_client_completes_with_a_token(strict: WorkerSpec, issuer: tuple[DevIssuer, Path]) -> None:
    inputs = ScriptedInputs(forms={"github_login": {"name": "octocat"}, "google_login": {"name": "octo"}})
    with Client(f"{strict.url}/mcp", inputs, token=issuer[0].mint("carol")) as client:
        done = client.call_tool("link_accounts")
    assert done.structured is not None
    assert done.structured["linked"] == {"github_login": "octocat", "google_login": "octo"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN_TOKEN}],
    ids=["none", "wrong", "no-scheme"],
)
def test_admin_endpoints_need_the_operator_token(strict: WorkerSpec, headers: dict[str, str]) -> None:
    for method, path in [("GET", "/admin/state"), ("POST", "/admin/drain"), ("POST", "/admin/keyring/reload")]:
        response = httpx.request(method, f"{strict.url}{path}", headers=headers)
        assert response.status_code == 401, (path, response.text)
    assert httpx.get(f"{strict.url}/readyz").status_code == 200  # nothing was drained


def test_the_operator_token_opens_the_admin_endpoints(strict: WorkerSpec) -> None:
    response = httpx.get(f"{strict.url}/admin/state", headers=_bearer(ADMIN_TOKEN))
    assert response.status_code == 200
    assert response.json()["version"] == 1


def test_health_and_metrics_stay_open_for_the_orchestrator(strict: WorkerSpec) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(f"{strict.url}{path}").status_code == 200


def test_mint_prints_a_token_the_workers_accept(
    strict: WorkerSpec, issuer: tuple[DevIssuer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = issuer[1].parent / "issuer-private.pem"
    assert main(["mint", "dave", "--key", str(key_file), "--ttl", "60"]) == 0
    token = capsys.readouterr().out.strip()
    assert _raw(strict, _bearer(token)).status_code == 200


def test_mint_without_a_key_says_how_to_make_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mint", "dave", "--key", str(tmp_path / "missing.pem")]) == 2
    assert "scripts/compose-secrets" in capsys.readouterr().err


def test_a_state_replayed_by_its_owner_within_its_lifetime_is_accepted(
    strict: WorkerSpec, issuer: tuple[DevIssuer, Path], mcp_to: McpTo
) -> None:
    """Not prevented, by design (docs/SECURITY.md): a state is not single-use within its TTL.

    Replaying it repeats the same round for the same principal and call; a
    deployment that needs at-most-once must record consumption server-side.
    """
    token = issuer[0].mint("erin")
    mcp = mcp_to(strict)
    state = _link(mcp, token)["result"]["requestState"]
    first = _link(mcp, token, state, GITHUB)["result"]
    replay = _link(mcp, token, state, GITHUB)["result"]
    assert first["inputRequests"].keys() == replay["inputRequests"].keys() == {"google_login"}


SCOPE = "mcp:call"


@pytest.fixture(scope="module")
def scoped(start_worker: StartWorker, issuer: tuple[DevIssuer, Path]) -> dict[str, WorkerSpec]:
    """Two workers requiring the `mcp:call` scope: one requires a token, one also serves anonymous calls."""
    env = {"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]), "MRTR_WORKER_REQUIRED_SCOPES": SCOPE}
    return {
        "tokens required": start_worker(env={**env, "MRTR_WORKER_ALLOW_ANONYMOUS": "false"})[0],
        "anonymous allowed": start_worker(env={**env, "MRTR_WORKER_ALLOW_ANONYMOUS": "true"})[0],
    }


@pytest.mark.parametrize("access", ["tokens required", "anonymous allowed"])
def test_a_presented_token_needs_the_required_scopes_anonymous_access_or_not(
    scoped: dict[str, WorkerSpec], issuer: tuple[DevIssuer, Path], access: str
) -> None:
    spec = scoped[access]
    without = _raw(spec, _bearer(issuer[0].mint("alice", scopes=["other"])))
    assert without.status_code == 403
    assert without.json() == {"error": "insufficient_scope", "error_description": f"Required scope: {SCOPE}"}
    assert 'error="insufficient_scope"' in without.headers["www-authenticate"]
    assert _raw(spec, _bearer(issuer[0].mint("alice", scopes=[SCOPE, "other"]))).status_code == 200
    assert _raw(spec, {}).status_code == (200 if access == "anonymous allowed" else 401)
