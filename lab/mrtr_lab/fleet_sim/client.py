"""The client: one call's MRTR loop (retry at once after a hand-back, the retry hint, transport retries) and hedging.

The rules are `mrtr_client._loop.mrtr_loop`'s, with its `RetryPolicy`
values: a hand-back is retried at once with the state it carried, after
`retryAfterMs` if the round gave one (capped at `max_hint_delay`); a busy
refusal is sent again after its hint at most `max_busy_retries` times; a request
not answered (502, 503, 504) is sent again with the last state received
(none: the call starts over) after `backoff_initial x 2^(failures-1)`,
capped at `backoff_cap`. The loop is re-stated here, not driven, because the
real one works on bytes (JSON bodies and replies), which a thousand
simulated instances cannot afford; what it decides is three lines.

Each hop costs the client and the proxy CPU (measured per hop); where they
run on the cluster's own machine (the calibration) that CPU competes with
the steps.

Hedging (Dean and Barroso, "The Tail at Scale"): a call still running after
the recent 95th percentile of call latency is sent a second time, from the
start (with shedding off there is no state to send); the first answer wins
and the other is cancelled (its worker notices at its next step boundary).
The steps the loser ran are duplicate work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from mrtr_client import RetryPolicy
from mrtr_lab.fleet_sim.host import Cpu
from mrtr_lab.fleet_sim.instance import Attempt, Checkpoint, Outcome, Reply
from mrtr_lab.fleet_sim.proxy import Proxy

POLICY = RetryPolicy(max_rounds=10_000, max_delivery_failures=16)
"""The benchmarks' patient policy (`benchmarks._cluster.PATIENT`): no call is cut off by a round cap."""
HEDGE_QUANTILE = 0.95
HEDGE_WINDOW = 1000
"""Recent call latencies the hedging threshold is the 95th percentile of."""
HEDGE_MIN_SAMPLES = 100


@dataclass(eq=False)
class Call:
    steps: int
    step_work: Callable[[], float]
    started: float
    ended: float | None = None
    rounds: int = 0
    """Rounds that ended with a hand-back (the state carried on)."""
    failures: int = 0
    """Requests answered by the proxy for the instance (502, 503, 504)."""
    executed: int = 0
    """Steps the workers ran for this call, wherever and whether or not they were used."""
    hedged: bool = False
    failed: bool = False
    cut_at: float | None = None
    """When the run ended (a call still running then is unfinished: its time so far is a lower bound)."""
    hops: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, instance, why the exchange ended) of every exchange: the trace of a slow call."""
    busy: int = 0
    """Requests refused as busy (each sent again after its hint, within `RetryPolicy.max_busy_retries`)."""
    refused: bool = False
    """It ended refused as busy past the client's budget: a clear answer, nothing ran."""
    timed_out: bool = False
    """Its caller gave up at the client's deadline (`Client.deadline_s`): the steps it ran were for nothing."""

    @property
    def seconds(self) -> float:
        return (self.ended if self.ended is not None else float("nan")) - self.started


@dataclass
class HopCost:
    """CPU seconds per hop at the client and at the proxy, first round and later ones, and where they run."""

    client: Cpu
    proxy: Cpu
    client_first: float
    client_hop: float
    proxy_first: float
    proxy_hop: float


@dataclass
class Hedging:
    """The recent latencies and the threshold after which a call is sent again."""

    quantile: float = HEDGE_QUANTILE
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=HEDGE_WINDOW))
    threshold: float = float("inf")
    _since: int = 0

    def observe(self, seconds: float) -> None:
        self.recent.append(seconds)
        self._since += 1
        if len(self.recent) >= HEDGE_MIN_SAMPLES and self._since >= HEDGE_MIN_SAMPLES // 2:
            ordered = sorted(self.recent)
            self.threshold = ordered[min(len(ordered) - 1, int(self.quantile * len(ordered)))]
            self._since = 0


class Client:
    def __init__(
        self,
        env: simpy.Environment,
        proxy: Proxy,
        cost: HopCost,
        hedging: Hedging | None = None,
        deadline_s: float | None = None,
    ) -> None:
        """`deadline_s`: the caller gives up on a call this long after it started (not with hedging)."""
        assert hedging is None or deadline_s is None, "a hedged call has no deadline here"
        self.env = env
        self.proxy = proxy
        self.cost = cost
        self.hedging = hedging
        self.deadline_s = deadline_s

    def call(self, call: Call) -> Generator[simpy.Event, Any, None]:
        """A SimPy process: the call to its end (hedged if this client hedges, given up at the deadline)."""
        if self.deadline_s is not None:
            leg = _Leg()
            run = self.env.process(self._loop(call, leg))
            yield run | self.env.timeout(self.deadline_s)
            if not run.triggered:
                leg.cancel()
                call.timed_out = True
        elif self.hedging is None:
            yield from self._loop(call, _Leg())
        else:
            yield from self._hedged(call, self.hedging)
        if call.ended is not None and self.hedging is not None:
            self.hedging.observe(call.seconds)

    def _hedged(self, call: Call, hedging: Hedging) -> Generator[simpy.Event, Any, None]:
        primary, backup = _Leg(), _Leg()
        first = self.env.process(self._loop(call, primary))
        if hedging.threshold < float("inf"):
            yield first | self.env.timeout(hedging.threshold)
        else:
            yield first
        if first.triggered:
            return
        call.hedged = True
        second = self.env.process(self._loop(call, backup))
        yield first | second
        loser = backup if first.triggered else primary
        loser.cancel()

    def _loop(self, call: Call, leg: _Leg) -> Generator[simpy.Event, Any, None]:
        state = Checkpoint()
        failures = busy = 0
        cost = self.cost
        while not leg.cancelled:
            first = not state.sealed
            yield from cost.client.compute(cost.client_first if first else cost.client_hop)
            yield from cost.proxy.compute(cost.proxy_first if first else cost.proxy_hop)
            if leg.cancelled:
                return
            attempt = Attempt(call, state.copy(), self.env.event(), self.env.event(), first=first)
            leg.attempt = attempt
            self.proxy.forward(attempt)
            reply: Reply = yield attempt.reply
            call.hops.append((self.env.now, reply.instance, _why(reply)))
            if leg.cancelled or call.ended is not None:
                return
            if reply.status != 200:
                failures += 1
                call.failures += 1
                if failures > POLICY.max_delivery_failures:
                    call.failed = True
                    return
                yield self.env.timeout(min(POLICY.backoff_cap, POLICY.backoff_initial * 2 ** (failures - 1)))
                continue
            failures = 0
            if reply.outcome is Outcome.BUSY:
                busy += 1
                call.busy += 1
                if busy > POLICY.max_busy_retries:
                    call.refused = call.failed = True
                    return
                yield self.env.timeout(min(POLICY.max_hint_delay, reply.retry_after_ms / 1000))
                continue
            if reply.outcome is Outcome.COMPLETE:
                call.ended = self.env.now
                return
            assert reply.state is not None
            state = reply.state
            call.rounds += 1
            if reply.retry_after_ms > 0:
                yield self.env.timeout(min(POLICY.max_hint_delay, reply.retry_after_ms / 1000))


def _why(reply: Reply) -> str:
    """How a call's hop names the end of an exchange: the hand-back's reason, `busy`, or the HTTP status."""
    if reply.reason is not None:
        return reply.reason.value
    return "busy" if reply.outcome is Outcome.BUSY else str(reply.status)


@dataclass(eq=False)
class _Leg:
    """One of a hedged call's two runs (or an unhedged call's only one)."""

    attempt: Attempt | None = None
    cancelled: bool = False

    def cancel(self) -> None:
        """The client hangs up: the instance's round ends at its next step boundary, unanswered."""
        self.cancelled = True
        attempt = self.attempt
        if attempt is not None:
            if not attempt.hung_up.triggered:
                attempt.hung_up.succeed()
            if not attempt.reply.triggered:
                attempt.reply.succeed(Reply(499, Outcome.GONE))
