"""The interop run's vault helper endpoint (`mrtr_ops.interop.vault_helper`), in process: what it refuses.

Completing a real flow needs a cluster and a bearer row (`scripts/interop` runs those); here only its own
HTTP surface: a body that is not `{"url": ...}` and a link off loopback are answered, recorded, never done.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mrtr_ops.interop.vault_helper import VaultHelper


@pytest.fixture
def helper() -> Iterator[VaultHelper]:
    started = VaultHelper("alice", lambda: "no-token", "sk-test").start()
    yield started
    started.stop()


def test_it_listens_on_loopback_at_complete(helper: VaultHelper) -> None:
    assert helper.url.startswith("http://127.0.0.1:")
    assert helper.url.endswith("/complete")


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'{"link": "x"}'])
def test_a_body_without_a_url_is_a_clear_400(helper: VaultHelper, body: bytes) -> None:
    answer = httpx.post(helper.url, content=body)
    assert (answer.status_code, answer.json()) == (400, {"error": 'expected a JSON body {"url": ...}'})
    assert helper.completed == {}


def test_a_link_off_loopback_is_refused_and_recorded(helper: VaultHelper) -> None:
    link = "https://example.com/vault/connect?flow=f1"
    answer = httpx.post(helper.url, json={"url": link})
    assert answer.status_code == 502
    assert answer.json() == {"error": f"not a loopback link: {link!r}"}
    assert helper.errors == [f"not a loopback link: {link!r}"]
    assert helper.completed == {}
