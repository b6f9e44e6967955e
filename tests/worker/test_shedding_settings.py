"""The shedding settings: defined once (`SheddingSettings`), read from their flat variables, refused clearly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mrtr_worker.compute.policy import SHEDDING_FIELDS, SheddingSettings, environment_name
from mrtr_worker.config import WorkerSettings, environment_names, setting_name
from mrtr_worker.sealing.keyring import new_ring


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A worker's minimal environment, without any shedding variable of the machine running the tests."""
    for name in SHEDDING_FIELDS:
        monkeypatch.delenv(environment_name(name), raising=False)
    monkeypatch.setenv("MRTR_WORKER_KEYRING", new_ring("k1").dumps())
    monkeypatch.setenv("MRTR_WORKER_ALLOW_ANONYMOUS", "true")
    return monkeypatch


def test_without_variables_the_worker_runs_the_policys_own_defaults(environment: pytest.MonkeyPatch) -> None:
    assert WorkerSettings().shedding == SheddingSettings()


@pytest.mark.parametrize(
    ("variable", "text", "field", "expected"),
    [
        ("MRTR_WORKER_SHEDDING", "false", "enabled", False),
        ("MRTR_WORKER_SHEDDING", "off", "enabled", False),
        ("MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS", "5", "max_concurrent", 5),
        ("MRTR_WORKER_MAX_SLICE_MS", "300", "max_slice_ms", 300),
        ("MRTR_WORKER_STRAGGLER_RATIO", "0", "straggler_ratio", 0.0),
        ("MRTR_WORKER_QUEUE_WAIT_MS", "250", "queue_wait_ms", 250),
        ("MRTR_WORKER_STEP_ASIDE", "true", "step_aside", True),
    ],
)
def test_each_setting_is_read_from_its_own_variable(
    environment: pytest.MonkeyPatch, variable: str, text: str, field: str, expected: object
) -> None:
    environment.setenv(variable, text)
    shedding = WorkerSettings().shedding
    assert getattr(shedding, field) == expected
    others = {name for name in SHEDDING_FIELDS if name != field}
    assert all(getattr(shedding, name) == getattr(SheddingSettings(), name) for name in others)


@pytest.mark.parametrize(
    ("variable", "text"),
    [
        ("MRTR_WORKER_MAX_SLICE_MS", "-1"),
        ("MRTR_WORKER_STRAGGLER_RATIO", "1.5"),
        ("MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS", "0"),
        ("MRTR_WORKER_SHEDDING", "maybe"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(environment: pytest.MonkeyPatch, variable: str, text: str) -> None:
    environment.setenv(variable, text)
    with pytest.raises(ValidationError) as refused:
        WorkerSettings()
    assert [setting_name(error["loc"]) for error in refused.value.errors()] == [variable]


def test_the_bounds_hold_wherever_the_settings_are_built() -> None:
    with pytest.raises(ValidationError):
        SheddingSettings(max_slice_ms=-1)


def test_environment_gives_back_what_the_worker_reads(environment: pytest.MonkeyPatch) -> None:
    """What a benchmark or the lab starts a worker with is exactly the settings object it built."""
    wanted = SheddingSettings(enabled=False, max_concurrent=1, max_slice_ms=0, straggler_at_admission=False)
    variables = wanted.environment()
    assert variables == {
        "MRTR_WORKER_SHEDDING": "false",
        "MRTR_WORKER_MAX_CONCURRENT_COMPUTATIONS": "1",
        "MRTR_WORKER_MAX_SLICE_MS": "0",
        "MRTR_WORKER_STRAGGLER_AT_ADMISSION": "false",
    }
    for name, text in variables.items():
        environment.setenv(name, text)
    assert WorkerSettings().shedding == wanted


def test_tests_and_embedders_pass_the_nested_model(environment: pytest.MonkeyPatch) -> None:
    chosen = SheddingSettings(max_slice_ms=1)
    assert WorkerSettings(shedding=chosen).shedding == chosen


def test_every_variable_a_worker_reads_is_listed() -> None:
    names = environment_names()
    assert {"MRTR_WORKER_SHEDDING", "MRTR_WORKER_MAX_SLICE_MS", "MRTR_WORKER_PORT"} <= names
    assert "MRTR_WORKER_ENABLED" not in names  # the switch keeps its name
