"""The vault page (`/vault/connect`, `/vault/sign-in`) driven over plain HTTP, as a person's browser would.

URL-mode elicitation sends the user to this page; whoever checks `connect_vault`
end to end must complete it: the route tests, the browser test's set-up and
`scripts/interop` (for clients nobody here wrote) all do it with this one visitor.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx

CSRF_FIELD = re.compile(r'name="csrf" value="([^"]+)"')


def flow_of(url: str) -> str:
    """The flow id a vault link carries."""
    return parse_qs(urlsplit(url).query)["flow"][0]


def csrf_in(page: str) -> str:
    """The CSRF token of a vault page's form."""
    found = CSRF_FIELD.search(page)
    if found is None:
        raise ValueError(f"no CSRF field on the vault page: {page[:500]!r}")
    return found.group(1)


class PageVisitor:
    """A browser without a browser: cookies kept, forms read and posted, redirects followed."""

    def __init__(self) -> None:
        self.http = httpx.Client(timeout=30.0, follow_redirects=True)

    def open(self, url: str) -> httpx.Response:
        return self.http.get(url)

    def sign_in(self, url: str, token: str) -> httpx.Response:
        """Open the link, sign in with a token on the page, land back on the link."""
        page = self.open(url)
        base = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
        form = {"flow": flow_of(url), "csrf": csrf_in(page.text), "token": token}
        return self.http.post(f"{base}/vault/sign-in", data=form)

    def submit_key(self, url: str, api_key: str, *, csrf: str | None = None) -> httpx.Response:
        page = self.open(url)
        base = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
        form = {"flow": flow_of(url), "csrf": csrf if csrf is not None else csrf_in(page.text), "api_key": api_key}
        return self.http.post(f"{base}/vault/connect", data=form)

    def close(self) -> None:
        self.http.close()
