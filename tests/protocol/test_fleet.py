"""The worker-proxy contract's own rules: statuses read, rebalance answers written and read, no SDK needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mrtr_protocol.fleet import MOVED, Readiness, moved_by, rebalance_answer


@pytest.mark.parametrize(
    ("status", "readiness"),
    [
        (200, Readiness.READY),
        (503, Readiness.NOT_READY),
        (429, Readiness.STEPPED_ASIDE),
        (500, Readiness.NOT_READY),
        (404, Readiness.NOT_READY),
        (204, Readiness.NOT_READY),  # only 200 is ready
    ],
)
def test_a_status_reads_as_one_readiness(status: int, readiness: Readiness) -> None:
    assert Readiness.of(status) is readiness


def test_a_rebalance_answer_round_trips() -> None:
    assert rebalance_answer(2) == {MOVED: 2}
    assert moved_by(rebalance_answer(2)) == 2


@pytest.mark.parametrize("answer", [{"rebalanced": 2}, {MOVED: -1}, {MOVED: True}, {MOVED: "2"}, [2], None])
def test_an_answer_outside_the_contract_is_refused_by_name(answer: object) -> None:
    with pytest.raises(ValueError, match="not a rebalance answer"):
        moved_by(answer)


def test_a_negative_count_is_never_written() -> None:
    with pytest.raises(ValueError, match="moved must be >= 0"):
        rebalance_answer(-1)


def test_the_contract_imports_without_the_sdk() -> None:
    """The proxy installs mrtr-protocol without its `sdk` extra: the package and `fleet` must import alone."""
    code = "import sys; sys.modules['mcp'] = sys.modules['mcp_types'] = None; import mrtr_protocol.fleet, mrtr_lb"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
