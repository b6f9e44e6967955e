"""Pure parts of the task store, without processes: records, statuses, keys, sealing, jobs' answers."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from mrtr_test_packs.conformance_jobs import MULTI_INPUT
from mrtr_worker.compute.computation import State
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.sealing.codec import FleetStateCodec
from mrtr_worker.sealing.keyring import new_ring, new_secret
from mrtr_worker.tasks.jobs import compute_job, form_answer
from mrtr_worker.tasks.record import READABLE_RECORD_FORMATS, InvalidTransition, TaskRecord, UnreadableRecord
from mrtr_worker.tasks.sealing import RecordSealer
from mrtr_worker.tasks.wire import Status

READABLE = READABLE_RECORD_FORMATS[1]


def _record(**changes: Any) -> TaskRecord:
    base = TaskRecord(
        task_id="t" * 32,
        principal=None,
        job="confirm_delete",
        state={"filename": "a.txt", "confirm": None, "remaining_ms": 0},
        status=Status.WORKING,
        created_ms=1_700_000_000_000,
        updated_ms=1_700_000_000_000,
        ttl_ms=60_000,
        poll_ms=500,
    )
    return replace(base, **changes)


def test_document_round_trip_keeps_unknown_fields() -> None:
    record = _record(extra={"added_by_v3": {"x": 1}}, steps=4, visited=[["w1", 1]])
    doc = record.to_document()
    assert doc["fmt"] == 1
    assert TaskRecord.from_document(doc, READABLE) == record


@pytest.mark.parametrize("fmt", [None, 2, "1", True, [1]])
def test_unknown_formats_are_refused(fmt: object) -> None:
    doc = _record().to_document()
    doc["fmt"] = fmt
    with pytest.raises(UnreadableRecord):
        TaskRecord.from_document(doc, READABLE)


def test_malformed_document_is_refused() -> None:
    doc = _record().to_document()
    del doc["state"]
    with pytest.raises(UnreadableRecord):
        TaskRecord.from_document(doc, READABLE)


def test_terminal_statuses_never_change() -> None:
    for terminal in (Status.COMPLETED, Status.FAILED, Status.CANCELLED):
        record = _record().moved(terminal, 1)
        assert record.terminal
        for status in Status:
            with pytest.raises(InvalidTransition):
                record.moved(status, 2)


def test_input_required_cannot_complete_directly() -> None:
    paused = _record().moved(Status.INPUT_REQUIRED, 1)
    with pytest.raises(InvalidTransition):
        paused.moved(Status.COMPLETED, 2)
    assert paused.moved(Status.WORKING, 2).status is Status.WORKING
    assert paused.moved(Status.CANCELLED, 2).status is Status.CANCELLED


def test_question_keys_are_never_reused() -> None:
    request = {"method": "elicitation/create", "params": {}}
    first = _record().asking({"confirm": request}, 1)
    resumed = first.moved(Status.WORKING, 2, input_requests={}, question_keys={})
    second = resumed.asking({"confirm": request}, 3)
    assert list(first.input_requests) != list(second.input_requests)
    assert first.question_keys == {next(iter(first.input_requests)): "confirm"}


def test_wire_views() -> None:
    record = _record()
    created = record.create_result()
    assert created["resultType"] == "task"
    assert created["createdAt"] == "2023-11-14T22:13:20.000Z"
    assert not {"result", "error", "inputRequests", "requestState"} & set(created)
    paused = record.asking({"confirm": {"method": "elicitation/create", "params": {}}}, 1)
    assert "inputRequests" in paused.detailed()
    done = record.moved(Status.COMPLETED, 2, result={"content": []})
    assert done.detailed()["result"] == {"resultType": "complete", "content": []}
    assert "error" not in done.detailed()
    failed = record.moved(Status.FAILED, 2, error={"code": -32603, "message": "x"})
    assert failed.detailed()["error"]["code"] == -32603
    assert "result" not in failed.detailed()


def test_sealed_records_hide_answers_and_open_after_rotation() -> None:
    ring = new_ring("k1")
    codec = FleetStateCodec(ring, max_token_bytes=1 << 20)
    sealer = RecordSealer(codec, READABLE)
    record = _record(state={"filename": "secret-plans.txt", "confirm": True, "remaining_ms": 0})
    sealed = sealer.seal(record)
    assert "secret-plans" not in sealed
    codec.use_ring(ring.with_key("k2", new_secret()).promoted("k2"))  # rotation: k2 seals, k1 still opens
    assert sealer.open(record.task_id, sealed) == record
    resealed = sealer.seal(record)
    codec.use_ring(new_ring("other"))
    with pytest.raises(UnreadableRecord):
        sealer.open(record.task_id, resealed)


def test_a_record_moved_to_another_id_does_not_open() -> None:
    sealer = RecordSealer(FleetStateCodec(new_ring("k1"), max_token_bytes=1 << 20), READABLE)
    sealed = sealer.seal(_record())
    with pytest.raises(UnreadableRecord):
        sealer.open("u" * 32, sealed)


def test_form_answers() -> None:
    request = {
        "method": "elicitation/create",
        "params": {"requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
    }
    assert form_answer({"action": "accept", "content": {"ok": True}}, request) == (True, {"ok": True})
    assert form_answer({"action": "decline"}, request) == (False, None)
    assert form_answer({"action": "accept", "content": {"ok": "yes"}}, request) is None
    assert form_answer({"ignored": True}, request) is None
    assert form_answer("nonsense", request) is None


def test_multi_input_answers_one_at_a_time() -> None:
    job = MULTI_INPUT
    state: State = job.initial({})
    assert set(job.questions(state)) == {"name", "confirm"}
    answered = job.answer(state, "name", {"action": "accept", "content": {"name": "n", "confirm": True}})
    assert answered is not None
    assert set(job.questions(answered)) == {"confirm"}
    assert job.answer(answered, "confirm", {"ignored": True}) is None


def test_estimate_pi_job_asks_once_then_finishes() -> None:
    job = compute_job(ESTIMATE_PI)

    class Inline:
        async def run_step(self, step: Any, state: State) -> State:
            result: State = step(state)
            return result

    state = job.initial({"samples": 1000, "seed": 1, "ask_to_refine": True, "chunk": 500})

    async def advance(current: State) -> State:
        return await job.advance(current, Inline())

    while not job.questions(state):
        state = asyncio.run(advance(state))
    assert list(job.questions(state)) == ["refine"]
    declined = job.answer(state, "refine", {"action": "decline"})
    assert declined is not None
    assert job.done(declined)
    assert job.result(declined)["structuredContent"]["samples"] == 1000
