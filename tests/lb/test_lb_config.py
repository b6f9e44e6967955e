"""Settings parsing: the comma-separated env form, normalization, and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mrtr_lb import Settings
from mrtr_lb.config import MIB, describe_error


def test_defaults_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_LB_BACKENDS", "http://127.0.0.1:9001/, 127.0.0.1:9002,,http://127.0.0.1:9001")
    monkeypatch.delenv("MRTR_LB_ENGINE", raising=False)
    settings = Settings()
    assert settings.engine == "lean"
    assert settings.backends == ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert settings.max_body_size == 8 * MIB
    assert settings.health_interval == 0.5
    assert settings.dns_interval == 2.0
    assert settings.read_timeout == 60.0
    assert settings.dns_target is None


def test_flags_override_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_LB_PORT", "9999")
    monkeypatch.setenv("MRTR_LB_BACKENDS", "127.0.0.1:1")
    settings = Settings(port=1234, backends="127.0.0.1:2")  # type: ignore[arg-type]
    assert settings.port == 1234
    assert settings.backends == ["http://127.0.0.1:2"]


def test_dns_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_LB_BACKEND_DNS", "worker:8000")
    assert Settings().dns_target == ("worker", 8000)


@pytest.mark.parametrize(
    "backends", ["ftp://127.0.0.1:1", "http://127.0.0.1:1/path", "http://user:pw@127.0.0.1:1", "http://"]
)
def test_bad_backend_urls(backends: str) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(backends=backends)  # type: ignore[arg-type]
    assert describe_error(info.value).startswith("MRTR_LB_BACKENDS: ")
