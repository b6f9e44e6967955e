"""Run resumable computations step by step, handing them back to the client whenever the policy says so.

Keeping the event loop free: every step is CPU-bound pure Python, so it runs
in a step process (one per computation slot, `step_pool`), never on the event
loop's thread. The loop only awaits the step's future, which is why health
checks, metrics and short calls keep answering in milliseconds while long
computations run. (A thread pool would not do: the GIL would let a busy
step hold up the loop for its whole switch interval, again and again.)

A call's progress lives only in its sealed state: between rounds this
instance keeps nothing, so the retry can land on any instance.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from mrtr_protocol.busy import RETRY_AFTER_KEY, SERVER_BUSY
from mrtr_protocol.rounds import EndOfRound
from mrtr_worker.compute.computation import Computation, State
from mrtr_worker.compute.fleet_load import FleetLoad
from mrtr_worker.compute.policy import Arrival, Boundary, Busy, HandBack, SheddingPolicy, SheddingSettings, Wait
from mrtr_worker.compute.queue_estimate import QueueEstimate
from mrtr_worker.compute.queueing import wait_for_slot
from mrtr_worker.compute.slots import Slots
from mrtr_worker.compute.standing import Judgement, Standing, from_peer, last_instance
from mrtr_worker.compute.step_pool import StepPool
from mrtr_worker.lifecycle import Lifecycle
from mrtr_worker.metrics import WorkerMetrics
from mrtr_worker.tool_api import inputs
from mrtr_worker.tool_api.capabilities import Need, allows, require
from mrtr_worker.tool_api.rounds import Round

COMPUTE_META_KEY = "mrtr-cluster.dev/compute"
"""Vendor `_meta` key on a computation's complete result: steps in all, hops, instances visited."""
REFUSED_KEY = "refused"
"""In the state of a round refused at admission: the next instance learns that this one was full."""


class Engine:
    """One worker's computation engine: its slots, its process pool and its shedding policy."""

    def __init__(
        self,
        settings: SheddingSettings,
        lifecycle: Lifecycle,
        metrics: WorkerMetrics,
        *,
        executor: Executor | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`executor` and `clock` are seams for tests: steps run there instead of in the engine's own
        process pool (which is then never started; the caller owns the executor), and slices are
        timed by `clock` (seconds) instead of `time.monotonic`.
        """
        self.policy = SheddingPolicy(settings)
        self._slots = Slots(settings.max_concurrent)
        self._lifecycle = lifecycle
        self._metrics = metrics
        self._executor = executor
        self._clock = clock
        self._pool: StepPool | None = None
        self.standing = Standing.for_step_aside(settings.step_aside)
        """What this instance learned of its own speed against its peers', from the rounds it served."""
        self._max_workers = settings.max_concurrent
        self._queue = QueueEstimate(settings.max_concurrent)
        """How long a round arriving now would queue for a slot: what a busy refusal is judged by."""
        self.fleet_load = FleetLoad(settings.fleet_full_hold_ms)
        """Whether the fleet looks full from here, from the rounds other full instances refused."""
        metrics.fleet_full.set_function(lambda: float(self.fleet_load.full(self._clock(), self._slots.waiting)))
        metrics.stepping_aside.set_function(lambda: float(self.stepping_aside()))
        metrics.queued.set_function(lambda: float(self._slots.waiting))

    def stepping_aside(self) -> bool:
        """Whether this instance asks to be out of the proxy's rotation: it knows it is slow and would hand every
        round on (`SheddingPolicy.steps_aside`); its `/readyz` answers 429 meanwhile (`mrtr_protocol.fleet`)."""
        aside = self.standing.aside(self.policy.settings.straggler_ratio, self._clock())
        return self.policy.steps_aside(aside=aside)

    @property
    def slots(self) -> Slots:
        """The compute slots, shared with the task runner: a task slice that computes holds one too."""
        return self._slots

    async def start(self) -> None:
        if self._executor is not None:
            return
        self._pool = StepPool(self._max_workers)
        await self._pool.start()

    async def stop(self) -> None:
        """End the step processes, so none outlives the worker, without waiting for them to wind down.

        By now every computation has handed its state back (a drain) or the grace period is over, and
        steps are pure, so nothing a step process holds is worth waiting for: they are killed, not asked
        to finish, which would cost each one an interpreter teardown (a few hundred ms on a busy machine).
        """
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.stop()

    async def run_step(self, step: Callable[[State], State], state: State) -> State:
        """One pure step in a step process (or the test's executor): task slices and rounds alike."""
        if self._executor is not None:
            return await asyncio.get_running_loop().run_in_executor(self._executor, step, state)
        assert self._pool is not None, "engine not started"
        result: State = await self._pool.run(step, state)
        return result

    async def run(
        self, rnd: Round, computation: Computation, arguments: dict[str, Any]
    ) -> CallToolResult | InputRequiredResult:
        """One round of a computation: resume from the state, step until done or told to yield."""
        state: State = rnd.data["checkpoint"] if "checkpoint" in rnd.data else computation.initial(arguments)
        steps: int = rnd.data.get("steps", 0)
        pending = rnd.data.get("question")
        if pending is not None:
            question = computation.question(state)
            if question is not None and question.key == pending:
                answer = inputs.read_form(rnd.responses, question.key, question.request)
                if answer is None or answer.problem is not None:
                    # Asking again needs this retry's own capability: it may have dropped what the first
                    # round declared, and the user's answer is owed, so -32021 rather than a silent decline.
                    why = f"{computation.name} is waiting for the answer to {pending!r} (form elicitation)"
                    require(rnd.capabilities, Need.FORM, why=why)
                    return rnd.ask({question.key: question.request}, self._data(state, steps, question=pending))
                state = question.apply(state, answer.content)

        last = last_instance(rnd.trace.visited)
        refused_elsewhere = rnd.data.get(REFUSED_KEY) is True and last not in (None, rnd.identity.instance_id)
        self.fleet_load.note(refused_elsewhere=refused_elsewhere, now=self._clock())
        arrival = Arrival(
            pace=rnd.trace.pace,
            hops=rnd.trace.fair_hops,
            instance_id=rnd.identity.instance_id,
            last=last,
            draining=self._lifecycle.draining,
            slow=self._note_pace(rnd, computation.name) is Judgement.SLOW,
            full=not self._slots.available,
            can_hand_back=rnd.can_hand_back,
            fleet_full=self.fleet_load.full(self._clock(), self._slots.waiting),
            fresh=steps == 0,
            expected_wait_ms=self._queue.wait_ms(self._slots.waiting),
        )
        decision = self.policy.arrives(arrival)
        if isinstance(decision, Busy):
            self._metrics.busy_refusals.inc()
            raise _busy_error(decision, self.policy.settings.refuse_new_after_ms)
        if isinstance(decision, HandBack):
            return self._hand_back(rnd, state, steps, decision)
        if isinstance(decision, Wait):
            if not await self._queue_for_slot(decision.leave is not None, decision.patience_s):
                assert decision.leave is not None  # only a wait that may end has a way out
                return self._hand_back(rnd, state, steps, decision.leave)
        else:
            taken = self._slots.try_acquire()
            assert taken, "a slot was free when the policy decided, and nothing ran since"
        self._metrics.computations.inc()
        held_from = self._clock()
        try:
            return await self._run_slice(rnd, computation, state, steps, fled=decision.fled)
        finally:
            self._metrics.computations.dec()
            self._slots.release()
            self._queue.held(self._clock() - held_from)

    async def _queue_for_slot(self, movable: bool, patience: float | None) -> bool:
        """Wait for a slot (True), or leave the queue (False): on a rebalance, counted as moved, or when the wait
        runs out. Only a call that may move listens for a rebalance."""
        if not movable:
            return await wait_for_slot(self._slots, None, patience)
        signal = self._lifecycle.rebalanced
        with signal.listening() as kick:
            if await wait_for_slot(self._slots, kick, patience):
                return True
            signal.left()
            return False

    async def _run_slice(
        self, rnd: Round, computation: Computation, state: State, steps: int, *, fled: bool
    ) -> CallToolResult | InputRequiredResult:
        started = self._clock()
        here = 0  # steps in this slice: the pace this instance keeps
        reference = self.standing.reference(computation.name, started)
        pace_here = not from_peer(rnd.trace.visited, rnd.identity.instance_id)
        steps_counter = self._metrics.compute_steps.labels(tool=computation.name)
        try:
            while not computation.done(state):
                question = computation.question(state)
                if question is not None:
                    if allows(rnd.capabilities, Need.FORM):
                        self._carry_pace(rnd, here, started, EndOfRound.INPUT)
                        data = self._data(state, steps, question=question.key)
                        return rnd.ask({question.key: question.request}, data)
                    state = question.apply(state, None)  # cannot ask: proceed as if declined
                    continue
                boundary = Boundary(
                    slice_ms=(self._clock() - started) * 1000,
                    hops=rnd.trace.fair_hops,
                    waiting=self._slots.waiting,
                    draining=self._lifecycle.draining,
                    steps=here,
                    pace=rnd.trace.pace,
                    fled=fled,
                    pace_here=pace_here,
                    reference=reference,
                    instance_id=rnd.identity.instance_id,
                    fleet_full=self.fleet_load.full(self._clock(), self._slots.waiting),
                )
                end = self.policy.at_step_end(boundary) if rnd.can_hand_back else None
                if end is not None:
                    return self._hand_back(rnd, state, steps, end)
                state = await self.run_step(computation.step, state)
                steps += 1
                here += 1
                steps_counter.inc()
            return self._complete(rnd, computation, state, steps)
        finally:
            # Every slice that ran steps, however it ended, tells this instance its own speed.
            now = self._clock()
            self.standing.observe(computation.name, here, (now - started) * 1000, now)

    def _note_pace(self, rnd: Round, tool: str) -> Judgement:
        """Note the pace this round brings in, then what this instance's standing at `tool` says to do with it."""
        now = self._clock()
        peer = from_peer(rnd.trace.visited, rnd.identity.instance_id)
        self.standing.bring(tool, rnd.trace.pace, peer=peer, now=now)
        judgement = self.standing.judge(tool, self.policy.settings.straggler_ratio, now)
        if judgement is Judgement.PROBE:
            self.standing.start_probe(tool, now)
        return judgement

    def _carry_pace(self, rnd: Round, here: int, started: float, reason: EndOfRound) -> None:
        """Fold this slice's step rate into the request's pace (sealed with the round's trace)."""
        elapsed_ms = (self._clock() - started) * 1000
        rnd.trace.pace = self.policy.measured(rnd.trace.pace, here, elapsed_ms, reason, rnd.identity.instance_id)

    def _hand_back(self, rnd: Round, state: State, steps: int, end: HandBack) -> InputRequiredResult:
        """End the round as the policy decided: the pace it carries on is sealed with its trace."""
        rnd.trace.pace = end.pace
        data = self._data(state, steps)
        if end.reason is EndOfRound.ADMISSION:
            data[REFUSED_KEY] = True  # the instance it lands on next learns that this one is full
        return rnd.hand_back(data, end.reason, retry_after_ms=end.retry_after_ms)

    @staticmethod
    def _data(state: State, steps: int, *, question: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"checkpoint": state, "steps": steps}
        if question is not None:
            data["question"] = question
        return data

    @staticmethod
    def _complete(rnd: Round, computation: Computation, state: State, steps: int) -> CallToolResult:
        result = computation.result(state)
        visited = [*rnd.trace.visited, [rnd.identity.instance_id, rnd.identity.version]]
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(result))],
            structured_content=result,
            _meta={COMPUTE_META_KEY: {"steps": steps, "hops": rnd.trace.hops, "visited": visited}},
        )


def _busy_error(busy: Busy, limit_ms: int) -> MCPError:
    """The busy refusal of a new call (`mrtr_protocol.busy`): nothing ran for it; it may come back later."""
    return MCPError(
        code=SERVER_BUSY,
        message=(
            f"The fleet is full: a new call would wait about {busy.expected_wait_ms / 1000:.1f} s for a compute slot"
            f" here (the limit is {limit_ms / 1000:.1f} s). Nothing ran; send it again after {busy.retry_after_ms} ms."
        ),
        data={RETRY_AFTER_KEY: busy.retry_after_ms, "expectedWaitMs": round(busy.expected_wait_ms)},
    )
