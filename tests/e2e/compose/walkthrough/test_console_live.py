"""The walkthrough on compose, watched: `scripts/walkthrough --compose --prometheus` while a real browser reads
Prometheus's console (`/consoles/mrtr.html`) as an operator would (run by `scripts/compose-e2e`).

The console is rendered by Prometheus when asked for, so the browser loads it again every couple of
seconds and keeps what the "Traffic by version" table showed. The share is a one-minute rate, so the
walkthrough runs long enough for version 1's last rounds to leave that window.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By

from mrtr_ops.paths import compose_prometheus_url
from tests.support.browser import headless_chromium
from tests.support.paths import ROOT

DURATION = 150
"""Seconds of load: a quarter on version 1, the upgrade, then over a minute on version 2 alone."""
RELOAD_EVERY = 2.0
"""Seconds between two looks at the console (an operator pressing reload)."""
SCREENSHOT_VARIABLE = "MRTR_CONSOLE_SCREENSHOT"
"""Set to a path (docs/prometheus-console.png) to keep a screenshot of the console mid-upgrade there."""

Shares = dict[str, float]


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    with headless_chromium("1000,1400") as chrome:
        yield chrome


def _look(browser: webdriver.Chrome, console: str) -> Shares | None:
    """The share of rounds by version the console shows now (None while Prometheus does not serve it yet)."""
    try:
        browser.get(console)
        if not browser.find_elements(By.ID, "version-share"):
            return None
        rows = browser.find_elements(By.CSS_SELECTOR, "#version-share tr[data-version]")
        return {
            str(row.get_attribute("data-version")): float(row.find_element(By.CLASS_NAME, "share").text) for row in rows
        }
    except WebDriverException:
        return None


def _watch(browser: webdriver.Chrome, walkthrough: subprocess.Popen[bytes], log: Path, shot: Path) -> list[Shares]:
    """What the console showed, look after look, from when the walkthrough gives its address (its fleet and
    Prometheus are up, fresh) until it ends; a screenshot mid-upgrade."""
    console = f"{compose_prometheus_url()}/consoles/mrtr.html"
    while walkthrough.poll() is None and f"watch the upgrade live at {console}" not in log.read_text(errors="replace"):
        time.sleep(0.5)
    seen: list[Shares] = []
    while walkthrough.poll() is None:
        shares = _look(browser, console)
        if shares:
            seen.append(shares)
            if not shot.exists() and 0.2 <= shares.get("2", 0.0) <= 0.8:
                browser.save_screenshot(str(shot))
        time.sleep(RELOAD_EVERY)
    return seen


def test_the_console_shows_traffic_move_to_version_2_and_the_report_agrees(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    out, log = tmp_path / "walkthrough", tmp_path / "walkthrough.log"
    command = [sys.executable, "-m", "mrtr_ops.walkthrough", "--compose", "--prometheus", "--duration", str(DURATION)]
    with log.open("wb") as output:
        walkthrough = subprocess.Popen([*command, "--out", str(out)], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        seen = _watch(browser, walkthrough, log, tmp_path / "console.png")
    finally:
        if walkthrough.poll() is None:
            walkthrough.terminate()
        walkthrough.wait(60)
    printed = log.read_text(errors="replace")
    assert walkthrough.returncode == 0, printed[-4000:]

    assert seen, "the console never showed rounds by version"
    assert seen[0] == {"1": 1.0}, f"before the upgrade all rounds are on version 1: {seen[:5]}"
    version_2 = [shares.get("2", 0.0) for shares in seen]
    rose = next((i for i, share in enumerate(version_2) if share > 0.0), len(seen))
    assert all(shares == {"1": 1.0} for shares in seen[:rose]), "version 1 served all until version 2 came"
    assert any(0.0 < share < 1.0 for share in version_2), "mid-upgrade both versions served"
    all_on_2 = [i for i, shares in enumerate(seen) if shares.get("2") == 1.0 and shares.get("1", 0.0) == 0.0]
    assert all_on_2, f"version 2 came to serve all rounds, version 1 none: {seen[-5:]}"
    assert all_on_2[0] > rose

    if os.environ.get(SCREENSHOT_VARIABLE):
        shutil.copyfile(tmp_path / "console.png", os.environ[SCREENSHOT_VARIABLE])
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["prometheus"]["calls_by_version"]) == {"1", "2"}
    assert "The two agree." in (out / "summary.md").read_text(), (out / "summary.md").read_text()
