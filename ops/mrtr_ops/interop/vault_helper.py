"""The person at the browser: when a client is sent to the vault page, its driver calls here to complete it.

URL-mode elicitation hands the user a link the client never sees behind; a
real user signs in there and enters the key. The drivers' URL handlers POST the
link here (`{"url": ...}`), and this endpoint does what the user would, over
plain HTTP through the proxy (`mrtr_ops.vault_page`): sign in with a token of
the same user, enter the API key, and see "Vault connected". It serves only
loopback links, and remembers which flows it completed, for the checks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from mrtr_ops.local.loopback import JsonHandler, LoopbackServer
from mrtr_ops.local.process import LOOPBACK
from mrtr_ops.vault_page import PageVisitor, flow_of

CONNECTED_MARK = 'id="done"'
"""What the vault page shows once the key is stored ("Vault connected")."""


class VaultHelper(LoopbackServer):
    """A loopback HTTP endpoint that completes vault page flows as `subject`, with `api_key`."""

    def __init__(self, subject: str, token: Callable[[], str], api_key: str) -> None:
        self.subject = subject
        self._token = token
        self._api_key = api_key
        self.completed: dict[str, str] = {}
        """Flow id to the subject it was completed as."""
        self.errors: list[str] = []
        self._lock = threading.Lock()
        super().__init__(self._handler(), name="vault-helper")

    @property
    def url(self) -> str:
        return f"{super().url}/complete"

    def complete(self, url: str) -> str | None:
        """Complete the flow behind `url` on the page; None when done, else what went wrong."""
        if urlsplit(url).hostname != LOOPBACK:
            return f"not a loopback link: {url!r}"
        visitor = PageVisitor()
        try:
            signed_in = visitor.sign_in(url, self._token())
            if signed_in.status_code != 200:
                return f"sign-in answered HTTP {signed_in.status_code}"
            stored = visitor.submit_key(url, self._api_key)
            if stored.status_code != 200 or CONNECTED_MARK not in stored.text:
                return f"the key was not taken: HTTP {stored.status_code}"
        except (OSError, ValueError) as exc:
            return f"the page could not be completed: {exc}"
        finally:
            visitor.close()
        with self._lock:
            self.completed[flow_of(url)] = self.subject
        return None

    def _handler(self) -> type[JsonHandler]:
        helper = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                try:
                    url = str(json.loads(self._body())["url"])
                except (ValueError, KeyError, TypeError):
                    self._reply(400, {"error": 'expected a JSON body {"url": ...}'})
                    return
                problem = helper.complete(url)
                if problem is not None:
                    with helper._lock:
                        helper.errors.append(problem)
                    self._reply(502, {"error": problem})
                else:
                    self._reply(200, {"completed": True})

        return Handler
