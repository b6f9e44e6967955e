"""`mrtr-call` against a real worker: answers come from --answer, each hop is shown."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from mrtr_client.cli import AnswerNeeded, TerminalInputs
from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import WorkerSpec
from mrtr_ops.local.redis import RedisServer
from tests.conftest import StartWorker


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr_client.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_links_accounts_from_preset_answers_and_shows_each_hop(worker: WorkerSpec) -> None:
    done = _cli(
        "--url",
        f"{worker.url}/mcp",
        "--answer",
        "github_login.name=octocat",
        "--answer",
        "google_login.name=octo",
        "link_accounts",
    )
    assert done.returncode == 0, done.stderr
    hop_lines = [line for line in done.stdout.splitlines() if line.startswith("hop ")]
    assert len(hop_lines) == 3
    assert worker.instance_id in hop_lines[0]
    assert "input" in hop_lines[0]
    assert "input" in hop_lines[1]
    assert "complete" in hop_lines[2]
    structured = json.loads(done.stdout[done.stdout.index("{") :])
    assert structured == {"linked": {"github_login": "octocat", "google_login": "octo"}}


def test_the_cli_reports_a_tool_error_with_exit_1(worker: WorkerSpec) -> None:
    done = _cli("--url", f"{worker.url}/mcp", "--yes", "no_such_tool")
    assert done.returncode == 1
    assert "Unknown tool" in done.stdout


def test_the_cli_reports_an_unreachable_server_clearly(worker: WorkerSpec) -> None:
    done = _cli("--url", "http://127.0.0.1:9/mcp", "--yes", "link_accounts")
    assert done.returncode == 1
    assert done.stderr.startswith("mrtr-call: gave up after")


URL_REQUEST = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Open the vault page.", "url": "https://vault.example.org/connect?flow=abc"},
}


def test_a_url_request_shows_the_url_and_its_site_and_waits_for_enter(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = TerminalInputs({}, [], interactive=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("\nn\n"))
    assert inputs.answer("vault", URL_REQUEST) == {"action": "accept"}  # Enter: done in the browser
    assert inputs.answer("vault", URL_REQUEST) == {"action": "decline"}  # n
    assert inputs.answer("vault", URL_REQUEST) == {"action": "decline"}  # end of input: nobody is there
    shown = capsys.readouterr().out
    assert "open: https://vault.example.org/connect?flow=abc" in shown
    assert "site: vault.example.org" in shown
    assert "press Enter once you are done in the browser" in shown


def test_yes_never_accepts_a_url_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    inputs = TerminalInputs({}, [], interactive=False, assume_yes=True)
    assert inputs.answer("vault", URL_REQUEST) == {"action": "decline"}
    assert sys.stdin.read() == "\n"  # it did not even wait for Enter


@pytest.fixture(scope="module")
def vault_worker(
    start_worker: StartWorker, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[WorkerSpec, DevIssuer]:
    """A worker that serves connect_vault: Redis and the development issuer."""
    directory = tmp_path_factory.mktemp("issuer")
    issuer = DevIssuer.ensure(directory)
    env = {
        "MRTR_WORKER_REDIS_URL": redis_server.url,
        "MRTR_WORKER_REDIS_PREFIX": "vault-cli:",
        "MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(directory / PUBLIC_KEY_NAME),
    }
    spec, _ = start_worker(env=env)
    return spec, issuer


def test_the_cli_waits_for_enter_and_is_asked_again_until_the_page_saw_the_user(
    vault_worker: tuple[WorkerSpec, DevIssuer],
) -> None:
    spec, issuer = vault_worker
    args = ("--url", f"{spec.url}/mcp", "--token", issuer.mint("alice"), "connect_vault")
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_client.cli", *args], capture_output=True, text=True, timeout=60, input="\n"
    )
    links = [line.split("open: ", 1)[1] for line in done.stdout.splitlines() if "open: " in line]
    assert len(links) == 2, done.stdout  # Enter without the page: asked again...
    assert links[0] == links[1]  # ...with the same URL
    assert "no more input: declined" in done.stdout
    assert done.returncode == 1
    assert "Vault connection was declined." in done.stdout


def test_the_cli_with_yes_declines_a_url_request(vault_worker: tuple[WorkerSpec, DevIssuer]) -> None:
    spec, issuer = vault_worker
    done = _cli("--url", f"{spec.url}/mcp", "--token", issuer.mint("alice"), "--yes", "connect_vault")
    assert done.stdout.count("open: ") == 1
    assert "--yes: a URL needs a person in a browser" in done.stdout
    assert done.returncode == 1
    assert "Vault connection was declined." in done.stdout


# --- no terminal: answers come from --answer or the schema's defaults, never made up (issue 21 section 3) -------


def test_without_a_terminal_the_cli_stops_and_names_the_answer_it_needs(worker: WorkerSpec) -> None:
    """Given only the GitHub login, the CLI used to submit "test" as the Google one."""
    done = _cli("--url", f"{worker.url}/mcp", "--answer", "github_login.name=octocat", "link_accounts")
    assert done.returncode == 1
    assert "--answer google_login.name=VALUE" in done.stderr
    assert "no terminal" in done.stderr
    assert "Linked" not in done.stdout
    assert "test" not in done.stdout


def test_with_yes_a_form_nobody_answered_is_declined(worker: WorkerSpec) -> None:
    done = _cli("--url", f"{worker.url}/mcp", "--yes", "--answer", "github_login.name=octocat", "link_accounts")
    assert done.returncode == 1  # the tool's own error result: a declined login links nothing
    assert "--yes: no answer for name, so this form is declined" in done.stdout
    assert "Google login was declined; nothing linked." in done.stdout


FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "Refine?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "refine": {"type": "boolean", "default": False},
                "note": {"type": "string"},
                "name": {"type": "string", "enum": ["a", "b"]},
            },
            "required": ["refine", "name"],
        },
    },
}


def test_a_form_is_filled_from_answers_and_defaults_only() -> None:
    inputs = TerminalInputs({"q": {"name": "b"}}, [], interactive=False)
    assert inputs.answer("q", FORM) == {"action": "accept", "content": {"refine": False, "name": "b"}}  # no note


def test_a_required_field_with_no_answer_and_no_default_is_never_filled_in() -> None:
    """Not even with an enum's first value: that would be a choice nobody made."""
    with pytest.raises(AnswerNeeded, match=r"--answer q\.name=VALUE \(or give --yes"):
        TerminalInputs({}, [], interactive=False).answer("q", FORM)
    assert TerminalInputs({}, [], interactive=False, assume_yes=True).answer("q", FORM) == {"action": "decline"}


def test_the_end_of_input_at_a_terminal_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(AnswerNeeded, match=r"q\.name"):
        TerminalInputs({}, [], interactive=True).answer("q", FORM)


def test_without_a_terminal_no_model_reply_is_made_up() -> None:
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    with pytest.raises(AnswerNeeded, match="no terminal"):
        TerminalInputs({}, [], interactive=False).answer("m", sampling)
