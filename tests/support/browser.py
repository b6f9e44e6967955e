"""Headless Chromium for the browser tests: Debian's chromium and chromedriver (`scripts/browser-setup`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


@contextmanager
def headless_chromium(window: str = "820,720") -> Iterator[webdriver.Chrome]:
    """A fresh headless browser of `window` size ("width,height"), quit at the end; fails if none is installed."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("headless Chromium is not installed: run scripts/browser-setup (scripts/test does)")
    options = Options()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}"):
        options.add_argument(argument)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()
