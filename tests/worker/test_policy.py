"""SheddingPolicy decisions as boundary tables: no processes, no network.

Defaults under test: min slice 200 ms, max slice 2000 ms, priority after 4 hops,
retry hint 25 ms doubling per hop up to 500 ms.
"""

from __future__ import annotations

import pytest

from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.policy import Boundary, SheddingPolicy, SheddingSettings

DEFAULT = SheddingPolicy(SheddingSettings())
OFF = SheddingPolicy(SheddingSettings(enabled=False))
NO_SLICE = SheddingPolicy(SheddingSettings(max_slice_ms=0))


def boundary(slice_ms: float = 0, *, hops: int = 0, waiting: int = 0, draining: bool = False) -> Boundary:
    return Boundary(slice_ms=slice_ms, hops=hops, waiting=waiting, draining=draining)


@pytest.mark.parametrize(
    ("policy", "hops", "prioritized"),
    [
        (DEFAULT, 0, False),
        (DEFAULT, 3, False),
        (DEFAULT, 4, True),  # exactly priority_after_hops
        (DEFAULT, 50, True),
        (SheddingPolicy(SheddingSettings(priority_after_hops=1)), 0, False),
        (SheddingPolicy(SheddingSettings(priority_after_hops=1)), 1, True),
        (OFF, 0, True),  # shedding off: every call queues for a slot instead of being refused
        (OFF, 3, True),
    ],
)
def test_admission_refuses_only_requests_not_yet_prioritized(
    policy: SheddingPolicy, hops: int, prioritized: bool
) -> None:
    assert policy.prioritized(hops) is prioritized


@pytest.mark.parametrize(
    ("reason", "hops", "retry_after_ms"),
    [
        (EndOfRound.ADMISSION, 0, 25),
        (EndOfRound.ADMISSION, 1, 50),
        (EndOfRound.ADMISSION, 3, 200),
        (EndOfRound.ADMISSION, 4, 400),
        (EndOfRound.ADMISSION, 5, 500),  # 800 capped
        (EndOfRound.ADMISSION, 30, 500),
        # A yield frees the slot for someone else: the client may come back at once.
        (EndOfRound.PRESSURE, 3, 0),
        (EndOfRound.SLICE, 3, 0),
        (EndOfRound.DRAIN, 3, 0),
    ],
)
def test_retry_hint_backs_off_only_after_a_refused_admission(
    reason: EndOfRound, hops: int, retry_after_ms: int
) -> None:
    assert DEFAULT.retry_after_ms(reason, hops) == retry_after_ms


# (policy, boundary, expected reason or None to run the next step)
BOUNDARIES = {
    # nothing to do
    "fresh, idle": (DEFAULT, boundary(0), None),
    # pressure: only once the minimum slice has run
    "pressure before min slice": (DEFAULT, boundary(199.9, waiting=1), None),
    "pressure at min slice": (DEFAULT, boundary(200, waiting=1), EndOfRound.PRESSURE),
    "pressure, many waiting": (DEFAULT, boundary(1500, waiting=3), EndOfRound.PRESSURE),
    "min slice, nobody waiting": (DEFAULT, boundary(200), None),
    "pressure wins over slice": (DEFAULT, boundary(2500, waiting=1), EndOfRound.PRESSURE),
    "pressure with slice off": (NO_SLICE, boundary(200, waiting=1), EndOfRound.PRESSURE),
    # time slice: even on an idle worker
    "just before the slice": (DEFAULT, boundary(1999.9), None),
    "at the slice": (DEFAULT, boundary(2000), EndOfRound.SLICE),
    "past the slice": (DEFAULT, boundary(9000), EndOfRound.SLICE),
    "slice off": (NO_SLICE, boundary(10**7), None),
    # drain: at once, whatever else holds
    "drain at once": (DEFAULT, boundary(0, draining=True), EndOfRound.DRAIN),
    "drain over pressure": (DEFAULT, boundary(500, waiting=2, draining=True), EndOfRound.DRAIN),
    "drain over slice": (DEFAULT, boundary(5000, draining=True), EndOfRound.DRAIN),
    "drain, prioritized": (DEFAULT, boundary(0, hops=4, draining=True), EndOfRound.DRAIN),
    "drain, shedding off": (OFF, boundary(0, draining=True), EndOfRound.DRAIN),
    # fairness: after priority_after_hops hand-backs a request is not shed again (except by a drain)
    "3 hops, pressure": (DEFAULT, boundary(200, hops=3, waiting=1), EndOfRound.PRESSURE),
    "3 hops, slice": (DEFAULT, boundary(2000, hops=3), EndOfRound.SLICE),
    "4 hops, pressure": (DEFAULT, boundary(200, hops=4, waiting=1), None),
    "4 hops, slice": (DEFAULT, boundary(2000, hops=4), None),
    "40 hops, both": (DEFAULT, boundary(10**6, hops=40, waiting=9), None),
    "priority after 1 hop": (SheddingPolicy(SheddingSettings(priority_after_hops=1)), boundary(10**6, hops=1), None),
    # shedding off: no pressure, no slice
    "off, pressure": (OFF, boundary(10**6, waiting=5), None),
    "off, slice": (OFF, boundary(10**6), None),
}


@pytest.mark.parametrize(("policy", "at", "expected"), BOUNDARIES.values(), ids=BOUNDARIES.keys())
def test_boundary(policy: SheddingPolicy, at: Boundary, expected: EndOfRound | None) -> None:
    assert policy.at_boundary(at) == expected


def test_custom_slices() -> None:
    policy = SheddingPolicy(SheddingSettings(min_slice_ms=10, max_slice_ms=50))
    assert policy.at_boundary(boundary(9, waiting=1)) is None
    assert policy.at_boundary(boundary(10, waiting=1)) == EndOfRound.PRESSURE
    assert policy.at_boundary(boundary(49)) is None
    assert policy.at_boundary(boundary(50)) == EndOfRound.SLICE
