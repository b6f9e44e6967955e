"""Rebalance on join needs the workers' admin token: every way we run the proxy hands it over."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from mrtr_lb import Settings
from tests.support.paths import ROOT


def test_compose_gives_the_proxy_the_workers_admin_token() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    lb, worker = services["lb"], services["worker"]
    assert "admin_token" in lb["secrets"]
    assert "admin_token" in worker["secrets"]
    assert lb["environment"]["MRTR_LB_ADMIN_TOKEN_FILE"] == worker["environment"]["MRTR_WORKER_ADMIN_TOKEN_FILE"]


def test_the_token_is_read_from_the_file_or_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text("from-the-file\n")
    monkeypatch.setenv("MRTR_LB_ADMIN_TOKEN_FILE", str(token_file))
    assert Settings(backends=["127.0.0.1:1"]).admin_token_text() == "from-the-file"
    monkeypatch.delenv("MRTR_LB_ADMIN_TOKEN_FILE")
    monkeypatch.setenv("MRTR_LB_ADMIN_TOKEN", "from-the-variable")
    settings = Settings(backends=["127.0.0.1:1"])
    assert settings.admin_token_text() == "from-the-variable"
    assert settings.rebalance_on_join, "on by default"
    assert "from-the-variable" not in repr(settings), "a secret is not printed"


def test_a_token_from_both_places_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        Settings(backends=["127.0.0.1:1"], admin_token=SecretStr("a"), admin_token_file=tmp_path / "t")
