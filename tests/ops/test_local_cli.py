"""`scripts/cluster`'s switches reach the workers' environment."""

from __future__ import annotations

import argparse

import pytest

from mrtr_ops.local.__main__ import worker_env


def _args(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"shedding": "on", "max_slice_ms": None, "step_aside": False, **given})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"MRTR_WORKER_SHEDDING": "true"}),
        ({"shedding": "off"}, {"MRTR_WORKER_SHEDDING": "false"}),
        ({"max_slice_ms": 300}, {"MRTR_WORKER_SHEDDING": "true", "MRTR_WORKER_MAX_SLICE_MS": "300"}),
        ({"step_aside": True}, {"MRTR_WORKER_SHEDDING": "true", "MRTR_WORKER_STEP_ASIDE": "true"}),
    ],
)
def test_the_switches_become_worker_settings(given: dict[str, object], expected: dict[str, str]) -> None:
    assert worker_env(_args(**given)) == expected
