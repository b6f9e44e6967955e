"""Reading a swarm service's tasks and update status (recorded Docker API answers; no Docker needed)."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_ops.swarm.tasks import (
    Task,
    converged,
    parse_task,
    parse_time,
    parse_update_status,
    replacements,
    running_images,
)

V1 = "sha256:" + "1" * 64
V2 = "sha256:" + "2" * 64
T0 = 1_796_019_000.0


def stamp(seconds: float) -> str:
    """A Docker API time `seconds` after T0, with nanoseconds as the API writes them."""
    from datetime import UTC, datetime

    whole = datetime.fromtimestamp(int(T0 + seconds), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{(T0 + seconds) % 1:.9f}"[2:]
    return f"{whole}.{fraction}Z"


def raw_task(
    task_id: str, slot: int, image: str, state: str, desired: str, created: float, changed: float, exit_code: int = 0
) -> dict[str, Any]:
    return {
        "ID": task_id,
        "CreatedAt": stamp(created),
        "Slot": slot,
        "Spec": {"ContainerSpec": {"Image": image}},
        "Status": {
            "Timestamp": stamp(changed),
            "State": state,
            "ContainerStatus": {"ContainerID": f"c-{task_id}", "ExitCode": exit_code},
        },
        "DesiredState": desired,
    }


def test_docker_times_with_nanoseconds_read_as_unix_seconds() -> None:
    assert parse_time("2026-11-30T06:16:00.834073541Z") == pytest.approx(1_796_019_360.834073)
    assert parse_time("2026-11-30T06:16:00Z") == 1_796_019_360.0
    assert parse_time("2026-11-30T06:16:00.5Z") == 1_796_019_360.5


def test_a_task_reads_its_slot_image_states_times_and_exit_code() -> None:
    task = parse_task(raw_task("old1", 1, V1, "shutdown", "shutdown", 0, 40.25, exit_code=0))
    assert (task.id, task.slot, task.image, task.state, task.desired_state) == ("old1", 1, V1, "shutdown", "shutdown")
    assert task.created == pytest.approx(T0)
    assert task.changed == pytest.approx(T0 + 40.25)
    assert task.exit_code == 0
    assert task.container_id == "c-old1"
    assert task.stopped
    assert not task.running


def test_a_running_task_has_no_exit_code_yet() -> None:
    task = parse_task(raw_task("new1", 1, V2, "running", "running", 30, 35))
    assert task.running
    assert task.exit_code is None


def test_a_task_killed_after_its_grace_period_shows_137() -> None:
    task = parse_task(raw_task("old1", 1, V1, "shutdown", "shutdown", 0, 40, exit_code=137))
    assert task.exit_code == 137


def mid_update() -> list[Task]:
    """Slot 1 replaced, slot 2 running both (start-first), slot 3 not yet touched."""
    return [
        parse_task(raw_task("old1", 1, V1, "shutdown", "shutdown", 0, 41)),
        parse_task(raw_task("new1", 1, V2, "running", "running", 30, 38)),
        parse_task(raw_task("old2", 2, V1, "running", "running", 0, 5)),
        parse_task(raw_task("new2", 2, V2, "running", "running", 45, 52)),
        parse_task(raw_task("old3", 3, V1, "running", "running", 0, 5)),
    ]


def test_running_images_takes_the_newest_task_of_each_slot() -> None:
    assert running_images(mid_update()) == {1: V2, 2: V2, 3: V1}


def test_a_service_in_the_middle_of_an_update_has_not_converged() -> None:
    assert not converged(mid_update(), V2, 3)
    assert not converged(mid_update(), V1, 3)


def test_a_service_whose_replicas_all_run_the_image_has_converged() -> None:
    tasks = [
        parse_task(raw_task("old1", 1, V1, "shutdown", "shutdown", 0, 41)),
        *(parse_task(raw_task(f"new{n}", n, V2, "running", "running", 30, 38)) for n in (1, 2, 3)),
    ]
    assert converged(tasks, V2, 3)
    assert not converged(tasks, V2, 4)
    assert not converged(tasks, V1, 3)


def test_a_task_still_starting_is_not_converged() -> None:
    tasks = [parse_task(raw_task(f"t{n}", n, V1, "starting" if n == 2 else "running", "running", 0, 1)) for n in (1, 2)]
    assert not converged(tasks, V1, 2)


def test_replacements_pair_each_slots_new_task_with_the_old_one_it_stopped() -> None:
    tasks = [
        parse_task(raw_task("old1", 1, V1, "shutdown", "shutdown", 0, 41)),
        parse_task(raw_task("new1", 1, V2, "running", "running", 30, 38)),
        parse_task(raw_task("old2", 2, V1, "shutdown", "shutdown", 0, 60, exit_code=137)),
        parse_task(raw_task("new2", 2, V2, "running", "running", 45, 52)),
        parse_task(raw_task("old3", 3, V1, "running", "running", 0, 5)),
    ]
    steps = replacements(tasks, V1, V2, since=T0 + 29, label="update v1->v2")
    assert [s.name for s in steps] == ["update v1->v2 slot 1", "update v1->v2 slot 2"]
    assert steps[0].started == pytest.approx(T0 + 30)
    assert steps[0].ended == pytest.approx(T0 + 41)
    assert steps[0].detail == {"new_task": "new1", "old_task": "old1", "old_exit_code": 0}
    assert steps[1].detail["old_exit_code"] == 137


def test_a_rollback_is_told_apart_from_the_first_v1_tasks_by_time() -> None:
    tasks = [
        parse_task(raw_task("first1", 1, V1, "shutdown", "shutdown", 0, 41)),
        parse_task(raw_task("v2-1", 1, V2, "shutdown", "shutdown", 30, 121)),
        parse_task(raw_task("back1", 1, V1, "running", "running", 110, 115)),
    ]
    steps = replacements(tasks, V2, V1, since=T0 + 100, label="rollback v2->v1")
    assert len(steps) == 1
    assert steps[0].detail == {"new_task": "back1", "old_task": "v2-1", "old_exit_code": 0}


def test_update_status_reads_state_and_times() -> None:
    status = parse_update_status(
        {"UpdateStatus": {"State": "completed", "StartedAt": stamp(10), "CompletedAt": stamp(55), "Message": "done"}}
    )
    assert status.done
    assert status.state == "completed"
    assert status.completed is not None
    assert status.completed - status.started == pytest.approx(45)


def test_an_update_in_progress_or_never_started() -> None:
    updating = parse_update_status({"UpdateStatus": {"State": "updating", "StartedAt": stamp(10)}})
    assert not updating.done
    assert updating.completed is None
    never = parse_update_status({})
    assert (never.state, never.started, never.done) == ("", 0.0, False)


@pytest.mark.parametrize("state", ["paused", "rollback_completed", "rollback_paused"])
def test_the_swarm_stops_by_itself_in_these_states(state: str) -> None:
    assert parse_update_status({"UpdateStatus": {"State": state, "StartedAt": stamp(0)}}).done
