"""Start-up configuration: bad or missing settings stop the worker with one clear line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrtr_worker.config import WorkerSettings
from mrtr_worker.sealing.keyring import KeyRing, KeyRingError, main, new_ring
from tests.support.paths import ROOT


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_WORKER_")}
    clean["MRTR_WORKER_ALLOW_ANONYMOUS"] = "true"  # the cases below that are about authentication override it
    return subprocess.run(
        [sys.executable, "-m", "mrtr_worker"], env={**clean, **env}, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow  # starts a worker process per case
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "set exactly one of MRTR_WORKER_KEYRING"),
        ({"MRTR_WORKER_KEYRING_FILE": "/nonexistent/ring.json"}, "/nonexistent/ring.json"),
        ({"MRTR_WORKER_KEYRING": "{not json"}, "key ring is not"),
        ({"MRTR_WORKER_KEYRING": '{"primary": "a", "keys": {"a": "c2hvcnQ"}}'}, "at least 32 needed"),
        ({"MRTR_WORKER_VERSION": "7"}, "MRTR_WORKER_VERSION"),
        ({"MRTR_WORKER_TOOL_PACKS": "demo,nope"}, "unknown tool pack"),
        ({"MRTR_WORKER_STATE_TTL_SECONDS": "-1"}, "MRTR_WORKER_STATE_TTL_SECONDS"),
        ({"MRTR_WORKER_PORT": "http"}, "MRTR_WORKER_PORT"),
        ({"MRTR_WORKER_ALLOW_ANONYMOUS": "false"}, "no issuer is configured"),
        ({"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": "/nonexistent/issuer.pem"}, "cannot read /nonexistent/issuer.pem"),
        ({"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": "/etc/passwd"}, "is not a PEM public key"),
        (
            {"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": "/etc/passwd", "MRTR_WORKER_JWT_JWKS_URL": "https://idp/jwks"},
            "at most one of MRTR_WORKER_JWT_PUBLIC_KEY_FILE",
        ),
        ({"MRTR_WORKER_ADMIN_TOKEN": "  "}, "the admin token is empty"),
        ({"MRTR_WORKER_REDIS_SENTINELS": "s:26379,oops"}, "'oops' is not host:port"),
        (
            {"MRTR_WORKER_REDIS_URL": "redis://r:6379/0", "MRTR_WORKER_REDIS_SENTINELS": "s:26379"},
            "set at most one of MRTR_WORKER_REDIS_URL",
        ),
    ],
)
def test_bad_configuration_stops_start_up_with_one_line(env: dict[str, str], expected: str, tmp_path: Path) -> None:
    if "MRTR_WORKER_KEYRING" not in env and "MRTR_WORKER_KEYRING_FILE" not in env and env:
        ring = tmp_path / "ring.json"
        ring.write_text(new_ring("k").dumps())
        env = {**env, "MRTR_WORKER_KEYRING_FILE": str(ring)}
    done = _start(env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mrtr-worker: configuration error:")
    assert expected in lines[0]
    assert "Traceback" not in done.stderr


def test_rotation_steps_keep_a_valid_ring(tmp_path: Path) -> None:
    path = tmp_path / "ring.json"
    assert main(["new", "--name", "old", "--out", str(path)]) == 0
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert main(["add", str(path), "new"]) == 0
    ring = KeyRing.parse(path.read_text())
    assert (ring.primary, list(ring.keys)) == ("old", ["old", "new"])
    assert main(["promote", str(path), "new"]) == 0
    assert KeyRing.parse(path.read_text()).sealing_order()[0] == ring.keys["new"]
    assert main(["retire", str(path), "old"]) == 0
    assert list(KeyRing.parse(path.read_text()).keys) == ["new"]


def test_the_primary_key_cannot_be_retired_and_unknown_keys_cannot_be_promoted(tmp_path: Path) -> None:
    ring = new_ring("only")
    with pytest.raises(KeyRingError, match="primary"):
        ring.without_key("only")
    with pytest.raises(KeyRingError, match="add it"):
        ring.promoted("missing")
    path = tmp_path / "ring.json"
    path.write_text(ring.dumps())
    assert main(["retire", str(path), "only"]) == 2


def test_show_never_prints_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ring.json"
    ring = new_ring("k1")
    path.write_text(ring.dumps())
    main(["show", str(path)])
    out = capsys.readouterr().out
    assert out.strip() == "k1  (primary)"


LIMITS = (
    "max_head_bytes",
    "max_headers",
    "head_timeout_seconds",
    "body_timeout_seconds",
    "max_connections",
    "keep_alive_seconds",
    "max_body_bytes",
    "state_max_bytes",
    "max_input_responses",
    "max_answer_bytes",
)
"""Every bound on what a client may send or hold: each a setting, each in docs/auth-and-limits.md's limits table."""


def _shown(field: str, value: object) -> str:
    """A default as the limits table writes it: 32 KiB, 1 MiB, 10."""
    if field.endswith("_bytes") and isinstance(value, int) and value % 1024 == 0:
        return f"{value // (1024 * 1024)} MiB" if value % (1024 * 1024) == 0 else f"{value // 1024} KiB"
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("field", LIMITS)
def test_the_limits_table_names_every_bound_with_its_default(field: str) -> None:
    page = ROOT / "docs" / "auth-and-limits.md"
    rows = [line for line in page.read_text().splitlines() if line.lstrip().startswith("| ")]
    name = f"`{field.upper()}`"
    row = next((row for row in rows if name in row), None)
    assert row is not None, f"no row of the tables in {page.name} names {name}"
    default = WorkerSettings.model_fields[field].default
    assert f"{name} ({_shown(field, default)}" in row, (row, default)
