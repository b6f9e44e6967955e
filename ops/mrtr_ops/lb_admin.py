"""The proxy's admin API (`/lb/` on its admin listener), as every ops tool, benchmark and test uses it.

    GET  /lb/backends                       every backend: url, state, healthy, drained, in_flight, next, ...
    POST /lb/backends/{drain,undrain}?url=...
    GET  /lb/metrics                        the proxy's Prometheus page
    GET  /lb/healthz                        (the only call without the token)

The admin listener is not the public one (`MRTR_LB_ADMIN_HOST`/`_PORT`,
127.0.0.1:8090 by default) and wants the fleet's admin token. A backend is
*in rotation* when it is healthy and not drained: the proxy sends it new
requests. Membership is not an admin call: a backend joins and leaves through
the proxy's discovery (DNS, or the local cluster's backends file).
(`services/lb/mrtr_lb/admin.py` serves this API.)
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal

import httpx

from mrtr_ops.metrics_page import MetricsPage
from mrtr_ops.waiting import wait_until

Action = Literal["drain", "undrain"]


def in_rotation(entry: dict[str, Any] | None) -> bool:
    """Whether a `/lb/backends` entry gets new requests (an absent one does not)."""
    return bool(entry and entry.get("healthy") and not entry.get("drained"))


class LbAdmin:
    """A client of one proxy's admin API; thread-safe (one `httpx.Client`).

    `admin_url` is the admin listener's base URL, `token` the fleet's admin token.
    """

    def __init__(self, admin_url: str, token: str | None, *, timeout: float = 5.0) -> None:
        self.url = admin_url.rstrip("/")
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LbAdmin:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------------------------

    def backends(self) -> list[dict[str, Any]]:
        """The pool as the proxy sees it, in its order."""
        response = self._http.get("/lb/backends")
        response.raise_for_status()
        listing: list[dict[str, Any]] = response.json()
        return listing

    def by_url(self) -> dict[str, dict[str, Any]]:
        return {entry["url"]: entry for entry in self.backends()}

    def backend(self, url: str) -> dict[str, Any] | None:
        return self.by_url().get(url)

    def rotation(self) -> set[str]:
        """The URLs of the backends in rotation."""
        return {entry["url"] for entry in self.backends() if in_rotation(entry)}

    def metrics(self) -> MetricsPage:
        response = self._http.get("/lb/metrics")
        response.raise_for_status()
        return MetricsPage.parse(response.text)

    # --- acting --------------------------------------------------------------------------------------

    def act(self, action: Action, url: str) -> dict[str, Any]:
        """One membership action on a backend; its entry after the action."""
        response = self._http.post(f"/lb/backends/{action}", params={"url": url})
        response.raise_for_status()
        entry: dict[str, Any] = response.json()
        return entry

    def drain(self, url: str) -> dict[str, Any]:
        """Out of the rotation; requests in flight on it finish."""
        return self.act("drain", url)

    def undrain(self, url: str) -> dict[str, Any]:
        return self.act("undrain", url)

    # --- waiting -------------------------------------------------------------------------------------

    def wait_for_backends(
        self, urls: Iterable[str], *, in_rotation: bool = True, timeout: float = 15.0, interval: float = 0.05
    ) -> None:
        """Until every one of `urls` is in the rotation (or, with `in_rotation=False`, none is)."""
        wanted = set(urls)

        def seen() -> bool:
            rotation = self.rotation()
            return wanted <= rotation if in_rotation else not wanted & rotation

        where = "in" if in_rotation else "out of"
        wait_until(seen, timeout=timeout, interval=interval, what=f"{sorted(wanted)} {where} the proxy's rotation")

    def wait_for_backend(
        self, url: str, *, in_rotation: bool = True, timeout: float = 15.0, interval: float = 0.05
    ) -> None:
        """Until the backend is in the rotation (or, with `in_rotation=False`, out of it or gone)."""
        self.wait_for_backends([url], in_rotation=in_rotation, timeout=timeout, interval=interval)

    def wait_until_gone(self, url: str, *, timeout: float = 15.0, interval: float = 0.05) -> None:
        """Until the proxy no longer lists the backend at all (its discovery dropped it)."""
        wait_until(
            lambda: url not in self.by_url(), timeout=timeout, interval=interval, what=f"{url} gone from the proxy"
        )
