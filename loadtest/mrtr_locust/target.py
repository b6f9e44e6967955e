"""Each user's MRTR client, for the host of the run that is going now.

Locust sets a user class's `host` from whatever started the run (`--host`,
the web UI's start form, a master's spawn message) on every start, but a
user built its client once: users that went on running called the first
run's host for ever (a new host posted to the web UI while users ran, on a
local runner and on every worker of a distributed one). So a user asks for
its client at every call: the same one while the host stays, a new one (the
old one closed) when the host changed. A run with no host fails each call
with a message saying where to give one, instead of crashing the spawn.
No Locust import at run time, so tests can read `NO_HOST` without gevent's patching.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mrtr_client import Client

if TYPE_CHECKING:
    from locust import User

NO_HOST = (
    "no host for this run: give the proxy's base URL in the web UI's start form or with "
    "--host http://<proxy>:<port> (the MCP endpoint is /mcp)"
)


class MissingHost(Exception):
    """The run was started without a host: every call fails with this, each counted as a failed request."""

    def __init__(self) -> None:
        super().__init__(NO_HOST)


def run_host(user: User) -> str | None:
    """The host of the run going now: what started it (the web UI's form, `--host`, a master's spawn message).

    Locust copies a non-empty one onto the user class and never clears it, so after a run on host A a
    start with the host field emptied would still call A; the environment holds what was really sent.
    A class's own `host` counts only when nothing was given at all.
    """
    given = user.environment.host
    return given if given is not None else user.host


def mcp_url(host: str) -> str:
    """The proxy's base URL (`--host`) with `/mcp` added, unless it is already there."""
    base = host.rstrip("/")
    return base if base.endswith("/mcp") else f"{base}/mcp"


class HostedClient:
    """A user's client for its current host: `client(host)` at every call, `close()` when the user stops."""

    def __init__(self, build: Callable[[str], Client]) -> None:
        self._build = build
        """Makes the client for one MCP URL (the user's inputs, token and transport)."""
        self._client: Client | None = None
        self._url: str | None = None

    @property
    def url(self) -> str | None:
        """The MCP URL the current client calls (None before the first call)."""
        return self._url

    def client(self, host: str | None) -> Client:
        if not host:
            raise MissingHost()
        url = mcp_url(host)
        if self._client is None or url != self._url:
            self.close()
            self._client, self._url = self._build(url), url
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._url = None
