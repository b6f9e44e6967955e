"""A failed call's record still says where it went: the response hook's view of its exchanges."""

from __future__ import annotations

import httpx

from mrtr_fleet_check.load import Visits, record_of
from mrtr_fleet_check.scenario import Call
from mrtr_protocol import WORKER_ID_HEADER, WORKER_VERSION_HEADER


def test_a_refused_call_names_the_instances_and_versions_it_met() -> None:
    visits = Visits()
    for instance, version in (("w1", "1"), ("w2", "2"), ("w1", "1")):
        visits(httpx.Response(200, headers={WORKER_ID_HEADER: instance, WORKER_VERSION_HEADER: version}))
    record = record_of(Call("add_up"), visits.trace(), error="Invalid or expired requestState")
    assert record.instances == ["w1", "w2"]
    assert record.versions == ["1", "2"]
    assert record.finished_by == "1"
    assert (record.rounds, record.hand_backs) == (0, 0)  # known from headers only: no round is counted
    assert not record.completed


def test_a_server_that_names_nothing_leaves_the_record_without_places() -> None:
    visits = Visits()
    visits(httpx.Response(400))
    record = record_of(Call("add_up"), visits.trace(), lost="RetryBudgetExhausted: gave up")
    assert (record.instances, record.versions, record.finished_by) == ([], [], None)
