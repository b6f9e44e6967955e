"""A swarm service's tasks and update status as plain data, read without Docker.

The Docker API describes a service's tasks (one per slot and attempt) as JSON.
The rolling update needs a few facts from them: which image each running task
has, whether the service has converged on one image, and when each slot was
replaced (its new task created, its old task stopped, and how the old one
exited: 0 after a drain, 137 if the grace period ran out). Keeping the reading
apart from the client makes it testable on recorded answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mrtr_ops.upgrade.rolling import Step

UPDATE_DONE = frozenset({"completed", "paused", "rollback_completed", "rollback_paused"})
"""`UpdateStatus.State` values after which the swarm changes nothing more by itself."""

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: str) -> float:
    """Docker's RFC 3339 time with up to nanoseconds (`2026-11-30T06:15:40.123456789Z`) as Unix seconds."""
    text = value.replace("Z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    return datetime.fromisoformat(text).timestamp()


@dataclass(frozen=True)
class Task:
    id: str
    slot: int
    image: str
    state: str
    """What the task is (`Status.State`): new, pending, ..., starting, running, complete, shutdown, failed, ..."""
    desired_state: str
    """What the swarm wants it to be: `running`, or `shutdown` once it is being replaced."""
    created: float
    changed: float
    """When `state` was last reported (for a stopped task: when it stopped)."""
    exit_code: int | None
    error: str
    container_id: str = ""

    @property
    def running(self) -> bool:
        return self.state == "running" and self.desired_state == "running"

    @property
    def stopped(self) -> bool:
        return self.state in {"complete", "shutdown", "failed", "rejected", "orphaned", "remove"}


def parse_task(raw: Mapping[str, Any]) -> Task:
    status: Mapping[str, Any] = raw.get("Status", {})
    container: Mapping[str, Any] = status.get("ContainerStatus", {})
    exit_code = container.get("ExitCode")
    return Task(
        id=str(raw["ID"]),
        slot=int(raw.get("Slot", 0)),
        image=str(raw["Spec"]["ContainerSpec"]["Image"]),
        state=str(status.get("State", "")),
        desired_state=str(raw.get("DesiredState", "")),
        created=parse_time(raw["CreatedAt"]),
        changed=parse_time(status.get("Timestamp", raw["CreatedAt"])),
        exit_code=int(exit_code) if exit_code is not None and status.get("State") != "running" else None,
        error=str(status.get("Err", "")),
        container_id=str(container.get("ContainerID", "")),
    )


def running_images(tasks: Iterable[Task]) -> dict[int, str]:
    """Slot -> image of the task running there (the newest, while start-first runs two)."""
    images: dict[int, tuple[float, str]] = {}
    for task in tasks:
        if task.running and (task.slot not in images or task.created > images[task.slot][0]):
            images[task.slot] = (task.created, task.image)
    return {slot: image for slot, (_, image) in sorted(images.items())}


def converged(tasks: Iterable[Task], image: str, replicas: int) -> bool:
    """Exactly `replicas` tasks are meant to run, all run, all on `image`."""
    wanted = [t for t in tasks if t.desired_state == "running"]
    return len(wanted) == replicas and all(t.running and t.image == image for t in wanted)


def replacements(tasks: Iterable[Task], old_image: str, new_image: str, since: float, label: str) -> list[Step]:
    """One step per slot replaced since `since`: from the new task's creation to the old one's stop.

    `detail` says which tasks, and the old task's exit code (0: it drained and
    exited by itself within the grace period).
    """
    by_slot: dict[int, list[Task]] = {}
    for task in tasks:
        by_slot.setdefault(task.slot, []).append(task)
    steps = []
    for slot, slot_tasks in sorted(by_slot.items()):
        new = [t for t in slot_tasks if t.image == new_image and t.created >= since]
        old = [t for t in slot_tasks if t.image == old_image and t.stopped and t.changed >= since]
        if not new or not old:
            continue
        first_new = min(new, key=lambda t: t.created)
        last_old = max(old, key=lambda t: t.changed)
        step = Step(
            name=f"{label} slot {slot}", started=first_new.created, ended=max(last_old.changed, first_new.created)
        )
        step.detail = {"new_task": first_new.id, "old_task": last_old.id, "old_exit_code": last_old.exit_code}
        steps.append(step)
    return sorted(steps, key=lambda s: s.started)


@dataclass(frozen=True)
class UpdateStatus:
    state: str
    """`updating`, `paused`, `completed`, `rollback_started`, `rollback_paused`, `rollback_completed` ('' if none)."""
    started: float
    completed: float | None
    message: str

    @property
    def done(self) -> bool:
        return self.state in UPDATE_DONE


def parse_update_status(service_attrs: Mapping[str, Any]) -> UpdateStatus:
    raw: Mapping[str, Any] = service_attrs.get("UpdateStatus") or {}
    started = raw.get("StartedAt")
    completed = raw.get("CompletedAt")
    return UpdateStatus(
        state=str(raw.get("State", "")),
        started=parse_time(started) if started else 0.0,
        completed=parse_time(completed) if completed else None,
        message=str(raw.get("Message", "")),
    )
