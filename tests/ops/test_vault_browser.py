"""The vault page in a real browser: headless Chromium (Debian's, `scripts/browser-setup`) driven by Selenium.

Over a local cluster with Redis and the development issuer, through the proxy,
as a user would: a real `tools/call` of `connect_vault` answers input_required
with the URL; the browser opens it, signs in as the caller and submits the key;
the retried call completes. Then a browser signed in as another user is refused
and the caller's retried call is asked again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from mrtr_ops.local.cluster import LocalCluster
from mrtr_worker.vault.flows import key_fingerprint
from tests.support.browser import headless_chromium
from tests.support.vault import VaultCall, asked_url, flow_of

pytestmark = pytest.mark.slow

API_KEY = "vault-key-" + "5" * 24
SCREENSHOT_VARIABLE = "MRTR_VAULT_SCREENSHOT"
"""Set to a path (docs/vault-connect.png) to keep the screenshot of the key form there."""


@pytest.fixture(scope="module")
def cluster(secured_cluster: LocalCluster) -> LocalCluster:
    """Through the proxy, with Redis and the development issuer: the session's secured cluster."""
    return secured_cluster


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with headless_chromium() as chrome:
        yield chrome


def _sign_in(browser: webdriver.Chrome, url: str, token: str) -> None:
    browser.delete_all_cookies()  # a fresh browser session: nobody is signed in
    browser.get(url)
    _wait_for(browser, "token")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "sign-in").click()


def _wait_for(browser: webdriver.Chrome, element_id: str) -> str:
    """The text of the element once the page shows it; the page itself in the failure if it never does."""
    try:
        WebDriverWait(browser, 30).until(expected_conditions.presence_of_element_located((By.ID, element_id)))
    except TimeoutException:
        raise AssertionError(f"no #{element_id} on {browser.current_url}:\n{browser.page_source[:3000]}") from None
    return str(browser.find_element(By.ID, element_id).text)


def test_the_caller_connects_the_vault_in_a_browser_and_the_retried_call_completes(
    cluster: LocalCluster, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    call = VaultCall(cluster.mcp_url, cluster.issuer.mint("alice"))
    try:
        url = asked_url(call.round())
        assert url.startswith(f"{cluster.url}/vault/connect?flow=")  # through the proxy, like /mcp
        _sign_in(browser, url, cluster.issuer.mint("alice"))
        assert "alice" in _wait_for(browser, "who")
        browser.save_screenshot(str(tmp_path / "vault-connect.png"))
        if os.environ.get(SCREENSHOT_VARIABLE):
            shutil.copyfile(tmp_path / "vault-connect.png", os.environ[SCREENSHOT_VARIABLE])
        browser.find_element(By.ID, "api_key").send_keys(API_KEY)
        browser.find_element(By.ID, "connect").click()
        assert _wait_for(browser, "done") == "Vault connected"
        done = call.round("accept")
    finally:
        call.close()
    assert done.get("isError") is not True, done
    assert done["structuredContent"]["connected"] is True
    assert done["structuredContent"]["flow"] == flow_of(url)
    assert done["structuredContent"]["keyRef"] == key_fingerprint(API_KEY)


def test_a_browser_signed_in_as_another_user_is_refused_and_the_call_does_not_complete(
    cluster: LocalCluster, browser: webdriver.Chrome
) -> None:
    call = VaultCall(cluster.mcp_url, cluster.issuer.mint("alice"))
    try:
        url = asked_url(call.round())
        _sign_in(browser, url, cluster.issuer.mint("bob"))
        assert _wait_for(browser, "refused") == "This request belongs to someone else"
        assert browser.find_elements(By.ID, "api_key") == []  # no form to enter a key into
        again = call.round("accept")
    finally:
        call.close()
    assert asked_url(again) == url  # not completed: Alice is asked again, same link
