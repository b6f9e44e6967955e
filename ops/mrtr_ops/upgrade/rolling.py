"""The rolling upgrade from worker version 1 to version 2 (and its rollback), on any `Fleet`.

Each step is rolled out to every instance before the next one starts, so a
request in flight never meets an instance that cannot serve it:

1. `add-key`: the v2 key joins the ring; every instance can open with it.
2. `replace wN`: start a v2 instance, wait until it is in rotation, drain a v1
   instance (its computations hand back and finish elsewhere), remove it.
   Repeat for every v1 instance. v2 writes the v1 state layout meanwhile.
3. `contract-format`: the whole fleet is v2: switch it to the v2 layout.
4. `promote-key`: the v2 key seals.
5. `retire-key`: once every state sealed with the old key has expired (one
   state TTL after the promotion), one worker re-seals every task record
   under the new key (task records outlive a state TTL: up to the task TTL),
   then the old key leaves the ring. If the reseal cannot run (Redis down),
   the step fails and the old key stays; a record no key opens is counted
   in the step, not waited for (it is lost with or without the old key).

Rollback replaces v2 instances by v1 ones the same way, after switching the
fleet back to the v1 layout (and waiting one TTL if it had contracted, so no
state in the v2 layout is still alive; `--no-wait` accepts that such calls
restart instead).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import httpx

from mrtr_ops.fleet import AdminError, Fleet, FleetWorker, admin_call, metric
from mrtr_worker.sealing.keyring import KeyRing, new_secret

SKEW_MARGIN_SECONDS = 2.0
"""Added to the TTL before retiring a key: the SDK accepts tokens minted slightly in the future."""


@dataclass
class Step:
    name: str
    started: float
    ended: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


StepListener = Callable[[Step], None]

RESEAL_TIMEOUT_SECONDS = 300.0
"""How long one worker may take to walk the task records (one Redis round trip or two per record)."""


class RetireRefused(RuntimeError):
    """The old key stays in the ring: task records could not be moved off it first."""


class RollingUpgrade:
    def __init__(
        self,
        fleet: Fleet,
        *,
        state_ttl: float | None = None,
        new_key: str = "v2",
        on_step: StepListener | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._fleet = fleet
        # The longest TTL any instance seals with: how long a state sealed now may still come back.
        self._ttl = (
            state_ttl
            if state_ttl is not None
            else max(float(admin_call(w, "GET", "/admin/state")["state_ttl_seconds"]) for w in fleet.workers())
        )
        self._new_key = new_key
        self._on_step = on_step or (lambda step: None)
        self._sleep = sleep
        self.steps: list[Step] = []
        self._promoted_at = 0.0
        self._old_opened_at_promotion = 0.0

    # --- the two directions --------------------------------------------------------------------------

    def upgrade(self) -> list[Step]:
        old_key = self._ring().primary
        if self._new_key != old_key:
            self._step("add-key", self._add_key)
        for worker in [w for w in self._fleet.workers() if w.version == 1]:
            self._step(f"replace {worker.instance_id}", partial(self._replace, worker, 2))
        self._step("contract-format", lambda: self._set_format(2))
        if self._new_key != old_key:
            self._step("promote-key", partial(self._promote, old_key))
            self._step("retire-key", lambda: self._retire(old_key))
        return self.steps

    def rollback(self, *, wait_for_states: bool = True) -> list[Step]:
        contracted = any(admin_call(w, "GET", "/admin/state")["write_format"] == 2 for w in self._fleet.workers())
        self._step("expand-format", lambda: self._set_format(1))
        if contracted and wait_for_states:
            self._step("wait-states", lambda: self._wait(self._ttl + SKEW_MARGIN_SECONDS))
        for worker in [w for w in self._fleet.workers() if w.version == 2]:
            self._step(f"replace {worker.instance_id}", partial(self._replace, worker, 1))
        return self.steps

    # --- steps -----------------------------------------------------------------------------------------

    def _step(self, name: str, action: Callable[[], dict[str, Any] | None]) -> None:
        step = Step(name=name, started=time.time())
        step.detail = action() or {}
        step.ended = time.time()
        self.steps.append(step)
        self._on_step(step)

    def _replace(self, old: FleetWorker, version: int) -> dict[str, Any]:
        fmt = self._fleet_write_format() if version == 2 else 1
        new = self._fleet.start_worker(version, {"MRTR_WORKER_WRITE_STATE_FORMAT": str(fmt)})
        drained_at = time.time()
        self._fleet.drain_worker(old.instance_id)
        return {"started": new.instance_id, "drained": old.instance_id, "drain_seconds": time.time() - drained_at}

    def _add_key(self) -> dict[str, Any]:
        ring = self._ring()
        if self._new_key not in ring.keys:
            self._write_ring(ring.with_key(self._new_key, new_secret()))
        return self._reload_all()

    def _promote(self, old_key: str) -> dict[str, Any]:
        self._write_ring(self._ring().promoted(self._new_key))
        detail = self._reload_all()
        self._promoted_at = time.time()
        self._old_opened_at_promotion = self._opened_with(old_key)
        return detail

    def _retire(self, old_key: str) -> dict[str, Any]:
        self._wait(self._promoted_at + self._ttl + SKEW_MARGIN_SECONDS - time.time())
        accepted_after = self._opened_with(old_key) - self._old_opened_at_promotion
        tasks = self._reseal_tasks(old_key)
        self._write_ring(self._ring().without_key(old_key))
        return {
            **self._reload_all(),
            "old_key": old_key,
            "old_key_states_accepted_after_promotion": accepted_after,
            "tasks_reseal": tasks,
        }

    def _reseal_tasks(self, old_key: str) -> dict[str, Any]:
        """Ask one worker to move every task record onto the new primary; refuse to go on if it cannot."""
        with_store = [w for w in self._fleet.workers() if admin_call(w, "GET", "/admin/state").get("task_store")]
        if not with_store:
            return {"task_store": False}
        try:
            counts = admin_call(with_store[0], "POST", "/admin/tasks/reseal", timeout=RESEAL_TIMEOUT_SECONDS)
        except (AdminError, httpx.HTTPError) as exc:
            raise RetireRefused(
                f"not retiring key {old_key!r}: the task records were not resealed ({exc}); "
                "the ring still holds it; run the upgrade again once the task store is back"
            ) from exc
        return {"worker": with_store[0].instance_id, **counts}

    def _set_format(self, fmt: int) -> dict[str, Any]:
        for worker in self._fleet.workers():
            admin_call(worker, "POST", "/admin/state-format", write=fmt)
        return {"write_format": fmt}

    # --- helpers ---------------------------------------------------------------------------------------

    def _wait(self, seconds: float) -> dict[str, Any]:
        if seconds > 0:
            self._sleep(seconds)
        return {"waited_seconds": max(0.0, seconds)}

    def _ring(self) -> KeyRing:
        return KeyRing.parse(self._fleet.keyring_file.read_text())

    def _write_ring(self, ring: KeyRing) -> None:
        # In place, not by rename: a container sees a bind-mounted file's new content only this way.
        with self._fleet.keyring_file.open("r+") as file:
            file.seek(0)
            file.write(ring.dumps())
            file.truncate()

    def _reload_all(self) -> dict[str, Any]:
        answers = [admin_call(w, "POST", "/admin/keyring/reload") for w in self._fleet.workers()]
        return {
            "keys": answers[0]["keys"] if answers else [],
            "primary": answers[0]["primary_key"] if answers else None,
        }

    def _fleet_write_format(self) -> int:
        formats = {admin_call(w, "GET", "/admin/state")["write_format"] for w in self._fleet.workers()}
        return max(formats) if formats == {2} else 1

    def _opened_with(self, key: str) -> float:
        return sum(
            metric(w, "mrtr_worker_state_keys_total", operation="opened", key=key) for w in self._fleet.workers()
        )


def step_record(step: Step) -> dict[str, Any]:
    return asdict(step)
