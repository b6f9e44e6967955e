"""The benchmark must keep running; its figures are for the README, never asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_upstream_smoke() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mrtr_lab.upstream_client", "--duration", "0.2", "--concurrency", "1", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for name in ("aiohttp.ClientSession", "httpx.AsyncClient", "mrtr_lb (aiohttp.web", "uvicorn ASGI"):
        assert name in result.stdout
