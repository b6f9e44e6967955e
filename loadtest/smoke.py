"""A small Locust smoke test: short calls and the login flow through the MRTR client, each answer checked.

locust -f loadtest/smoke.py --host http://127.0.0.1:8080 --headless -u 4 -r 2 -t 20s
(against a cluster that wants tokens: MRTR_ISSUER_KEY_FILE=secrets/issuer-private.pem locust ...)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from locust import User, between, task

from mrtr_client import CallResult, Client, ScriptedInputs
from mrtr_dev_issuer import token_from_environment
from mrtr_locust.target import HostedClient, run_host

LOGINS = {"github_login": {"name": "octocat"}, "google_login": {"name": "octo"}, "microsoft_login": {"name": "o"}}


class WrongAnswer(AssertionError):
    """A complete result that is not the right one: a Locust failure, like a failed request."""


class McpSmokeUser(User):
    wait_time = between(0.05, 0.3)

    def on_start(self) -> None:
        token = token_from_environment(f"smoke-user-{id(self)}")
        self._client = HostedClient(lambda url: Client(url, ScriptedInputs(forms=dict(LOGINS)), token=token))

    @property
    def mcp(self) -> Client:
        """The client for the host of the run going now (a new host given in the web UI is followed at once)."""
        return self._client.client(run_host(self))

    def on_stop(self) -> None:
        self._client.close()

    def _measure(self, name: str, call: Callable[[], CallResult], check: Callable[[CallResult], bool]) -> None:
        started = time.perf_counter()
        error: Exception | None = None
        hops = 0
        try:
            done = call()
            hops = len(done.trace.hops)
            if not check(done):
                raise WrongAnswer(f"{name}: unexpected result {done.result!r:.200}")
        except Exception as exc:
            error = exc
        self.environment.events.request.fire(
            request_type="MCP",
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=hops,
            exception=error,
            context={},
        )

    @task(3)
    def echo(self) -> None:
        self._measure("echo", lambda: self.mcp.call_tool("echo", {"text": "hi"}), _echoed("hi"))

    @task(1)
    def link_accounts(self) -> None:
        self._measure("link_accounts", lambda: self.mcp.call_tool("link_accounts"), _linked)


def _echoed(text: str) -> Callable[[CallResult], bool]:
    return lambda done: done.structured == {"text": text}


def _linked(done: CallResult) -> bool:
    linked: dict[str, Any] = done.structured.get("linked", {}) if isinstance(done.structured, dict) else {}
    return (
        not done.trace.reasked and all(LOGINS[key]["name"] == value for key, value in linked.items()) and bool(linked)
    )
