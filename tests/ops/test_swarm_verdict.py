"""What the swarm walkthrough counts as a broken rolling update (no Docker needed)."""

from __future__ import annotations

from mrtr_ops.swarm.tasks import Task, UpdateStatus
from mrtr_ops.swarm.walkthrough import Options, RollingPass, swarm_problems
from mrtr_ops.upgrade.rolling import Step

LOAD_ENDED = 1000.0
MASTER = Task("m", 1, "loadtest", "complete", "running", 0.0, LOAD_ENDED, 0, "")


def rolling(state: str = "completed", exit_codes: tuple[int | None, ...] = (0, 0, 0), *, rollback: bool = False,
            last_stop: float = 900.0) -> RollingPass:  # fmt: skip
    steps = []
    for slot, code in enumerate(exit_codes, 1):
        step = Step(
            f"slot {slot}", started=100.0 * slot, ended=last_stop if slot == len(exit_codes) else 100.0 * slot + 20
        )
        step.detail = {"new_task": f"n{slot}", "old_task": f"o{slot}", "old_exit_code": code}
        steps.append(step)
    status = UpdateStatus(state, started=50.0, completed=950.0, message="")
    return RollingPass("rollback v2->v1" if rollback else "update v1->v2", rollback, status, 50.0, steps)


def test_a_clean_update_and_rollback_have_no_problem() -> None:
    assert swarm_problems([rolling(), rolling("rollback_completed", rollback=True)], MASTER, LOAD_ENDED, 3) == []


def test_an_update_the_swarm_rolled_back_by_itself_is_a_problem() -> None:
    problems = swarm_problems([rolling("rollback_completed")], MASTER, LOAD_ENDED, 3)
    assert any("the swarm says rollback_completed" in p for p in problems)


def test_a_paused_rollback_is_a_problem() -> None:
    assert swarm_problems([rolling("rollback_paused", rollback=True)], MASTER, LOAD_ENDED, 3)


def test_a_task_killed_after_its_grace_period_is_a_problem() -> None:
    problems = swarm_problems([rolling(exit_codes=(0, 137, 0))], MASTER, LOAD_ENDED, 3)
    assert any("did not exit 0" in p for p in problems)


def test_a_slot_left_unreplaced_is_a_problem() -> None:
    problems = swarm_problems([rolling(exit_codes=(0, 0))], MASTER, LOAD_ENDED, 3)
    assert problems == ["update v1->v2: 2 of 3 slots replaced"]


def test_a_slot_replaced_after_the_load_ended_is_a_problem() -> None:
    problems = swarm_problems([rolling(last_stop=LOAD_ENDED + 5)], MASTER, LOAD_ENDED, 3)
    assert problems == ["update v1->v2: a slot was replaced after the load had ended"]


def test_a_master_that_never_finished_is_a_problem() -> None:
    running = Task("m", 1, "loadtest", "running", "running", 0.0, 10.0, None, "")
    assert swarm_problems([rolling()], running, LOAD_ENDED, 3) == ["the Locust master did not finish"]


def test_the_load_leaves_room_for_each_rolling_pass() -> None:
    one, two = Options(), Options(rollback=True)
    assert two.run_time - one.run_time == one.run_time - one.warmup - one.tail
    assert one.run_time > one.warmup + one.tail
