"""The pool on its own: fair round robin around sick backends, source bookkeeping."""

from __future__ import annotations

from collections import Counter

from mrtr_lb import Backend, BackendPool

URLS = [f"http://127.0.0.1:{9000 + i}" for i in range(4)]


def healthy_pool() -> BackendPool:
    pool = BackendPool(URLS)
    for backend in pool:
        pool.set_health(backend, True)
    return pool


def test_skipping_a_sick_backend_does_not_double_its_neighbour() -> None:
    pool = healthy_pool()
    sick = pool.get(URLS[1])
    assert sick is not None
    pool.set_health(sick, False, "test")
    picks = Counter(b.url for _ in range(30) if (b := pool.pick()) is not None)
    assert picks == {URLS[0]: 10, URLS[2]: 10, URLS[3]: 10}


def test_pick_excludes_and_runs_dry() -> None:
    pool = healthy_pool()
    tried: list[Backend] = []
    while (backend := pool.pick(tried)) is not None:
        tried.append(backend)
    assert sorted(b.url for b in tried) == URLS


def test_drained_and_unhealthy_states() -> None:
    pool = healthy_pool()
    backend = pool.get(URLS[0])
    assert backend is not None
    pool.set_drained(backend, True)
    pool.set_health(backend, False, "down")
    states = [backend.state]
    pool.set_drained(backend, False)
    states.append(backend.state)
    assert states == ["drained", "unhealthy"]
    assert backend.last_error == "down"
    assert all(pool.pick() is not backend for _ in range(8))


def test_sync_source_adds_and_removes_only_its_own() -> None:
    pool = BackendPool([URLS[0]])
    added, removed = pool.sync_source("dns", [URLS[0], URLS[1], URLS[2]])
    assert [b.url for b in added] == [URLS[1], URLS[2]]
    assert removed == []
    added, removed = pool.sync_source("dns", [URLS[2]])
    assert added == []
    assert [b.url for b in removed] == [URLS[1]]
    assert [b.url for b in pool] == [URLS[0], URLS[2]]  # the static one stays
    assert pool.sync_source("dns", [URLS[2]]) == ([], [])


def test_next_pick_is_what_pick_returns_and_moves_nothing() -> None:
    pool = healthy_pool()
    first = pool.get(URLS[0])
    assert first is not None
    pool.pick()  # the cursor now at the second
    pool.set_drained(first, True)
    seen = []
    for _ in range(6):
        upcoming = pool.next_pick()
        assert upcoming is pool.next_pick()  # asking twice moves nothing
        assert upcoming is pool.pick()
        seen.append(upcoming.url if upcoming else None)
    assert seen == [URLS[1], URLS[2], URLS[3], URLS[1], URLS[2], URLS[3]]
    assert [entry["next"] for entry in pool.snapshot()] == [False, True, False, False]


def test_next_pick_under_another_balance_or_none_in_rotation() -> None:
    pool = healthy_pool()
    pool.picker = lambda backends, excluded: backends[0]
    assert pool.next_pick() is None
    assert not any(entry["next"] for entry in pool.snapshot())
    pool.picker = None
    for backend in pool:
        pool.set_drained(backend, True)
    assert pool.next_pick() is None


def test_a_return_from_stepping_aside_is_no_join() -> None:
    """A worker that stepped aside as slow comes back for a probe round, not as capacity: no rebalance calls."""
    pool = healthy_pool()
    joined: list[str] = []
    pool.on_join(lambda backend: joined.append(backend.url))
    aside, sick = pool.get(URLS[0]), pool.get(URLS[1])
    assert aside is not None
    assert sick is not None
    pool.set_health(aside, False, "/readyz answered 429", aside=True)
    pool.set_health(sick, False, "/readyz answered 503")
    assert all(pool.pick() not in (aside, sick) for _ in range(8))
    pool.set_health(aside, True)
    pool.set_health(sick, True)
    assert joined == [URLS[1]]
    assert aside.last_error is None
    assert not aside.aside
