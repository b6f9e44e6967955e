"""An instance's standing against its peers for MRTR calls, learned from the sealed states alone.

A slow instance has to know it is slow before it runs a step, or round robin lands a call there at
every hop and the per-slice rule moves it only after a measured slice. There is no shared store: each
resumed round brings `trace.pace`, the rate its earlier instances gave it, so the paces that arrive
are a sample of the peers' rates for that tool.

* `Standing.observe`: this instance's own step rate per tool, weighted over its slices.
* `Standing.bring`: the paces arriving from peers. A pace whose newest slice ran here (the round
  was last handed back by this instance) says nothing about the peers and is left out, so a lone
  instance never has evidence.
* `slow_against`: own rate under the straggler ratio of the peers' median, each over a few samples.
  A host slow as a whole brings in low paces too, so no instance of it is judged slow.
* `Standing.judge`: run the round, hand it on (`SLOW`), or run it as a `PROBE` (a query: the caller that
  lets the probe run records it with `Standing.start_probe`).
* `Standing.aside`: whether the instance would hand on every round that comes now, so it may as well be out
  of the proxy's rotation (`MRTR_WORKER_STEP_ASIDE`: its `/readyz` says so), back in when a probe is due.
* `Standing.reference`: the peers' recent rate, the yardstick of the per-slice rule for a round that
  brings no pace of its own (a new call) or only one measured here.

Peer paces are forgotten after `PEER_STALE_SECONDS`; the newest few count. The own rate is not (a
slow instance that hands every round on measures nothing); once it is older than `PROBE_EVERY`, one
round at a time runs here as a probe, whose slice confirms the standing or lifts a recovered instance
out of it. One that steps aside probes an unconfirmed verdict after `PROBE_SOON` instead, as a pause
(a long garbage collection) reads as slowness to the slices it stalled. Figures: `docs/lab/studies.md`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from statistics import median
from typing import Any, NamedTuple

from mrtr_worker.sealing.layout import Pace

OWN_WEIGHT = 0.5
"""Weight of the newest slice in the own rate: a couple of slices decide, one noisy slice does not."""
OWN_MIN_SAMPLES = 2
"""Slices of a tool run here before its own rate is compared."""
PEER_MIN_SAMPLES = 3
"""Paces of a tool brought in from peers before their median is a reference."""
PEER_KEEP = 9
"""The newest paces kept per tool: the median follows the peers' recent speed."""
PEER_STALE_SECONDS = 30.0
"""A peer pace older than this is forgotten. Paces come in with rounds that ran elsewhere and were handed back,
which grow rare once this instance hands rounds on (its calls finish on the peers): measured, 10 s gaps
between two paces were common, and a 10 s memory dropped the standing it had just learned."""
PROBE_EVERY = 10.0
"""A slow instance whose own rate is older than this runs one round as a probe: how soon a recovered one learns."""
PROBE_SOON = 1.0
"""How long after its newest slice an instance that steps aside probes a verdict no probe has confirmed yet."""
PROBE_PATIENCE = 5.0
"""A probe that has not reported a slice after this long (its call was cancelled) lets another round probe."""


class Judgement(Enum):
    """What an instance does with a round at admission, from its standing."""

    RUN = "run"
    """Not known to be slow: serve the round."""
    SLOW = "slow"
    """Known to be slow lately: hand the round on (`SheddingPolicy.hands_on`)."""
    PROBE = "probe"
    """Known to be slow, but not measured lately: serve this one round, so its slice measures again."""


def last_instance(visited: Sequence[Sequence[Any]]) -> str | None:
    """The instance that ended a round's previous round (None: a first round)."""
    if not visited or not visited[-1] or not isinstance(visited[-1][0], str):
        return None
    return visited[-1][0]


def from_peer(visited: Sequence[Sequence[Any]], instance_id: str) -> bool:
    """Whether a round's pace was last measured elsewhere: the round was handed back by another instance."""
    last = last_instance(visited)
    return last is not None and last != instance_id


def slow_against(own: float | None, peers: Sequence[float], ratio: float) -> bool:
    """Whether `own` (None: too few slices) is under `ratio` of the median of `peers` (0: the rule is off)."""
    if ratio <= 0 or own is None or len(peers) < PEER_MIN_SAMPLES:
        return False
    return own < ratio * median(peers)


class OwnRate(NamedTuple):
    """This instance's step rate for one tool, weighted over its slices."""

    rate: float
    """Steps per second."""
    slices: int
    """Slices folded in."""
    at: float
    """Clock time of the newest slice."""


@dataclass
class Standing:
    """What this instance has seen lately, per tool: its own step rate and the paces its peers gave calls.

    It tells (`own_rate`, `reference`, `slow`, `judge`, `aside`) and records (`observe`, `bring`,
    `start_probe`); a method of one kind never does the other.
    """

    own: dict[str, OwnRate] = field(default_factory=dict)
    """tool -> its own rate here."""
    peers: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    """tool -> (pace rate, clock time it arrived), newest last."""
    probing: dict[str, float] = field(default_factory=dict)
    """tool -> clock time a probe round was let through, until a slice of the tool reports."""
    forget_peers: bool = True
    """Peer paces older than `PEER_STALE_SECONDS` are forgotten; False (an instance that steps aside, see
    `aside`): only newer paces push them out. Out of rotation, rounds come in only while it probes, so a
    clock forgot the verdict it had stepped aside for, and it ran rounds at its slow speed (in the fleet
    simulator, a fifth of the calls in a minute ran there, whole slices at a quarter speed)."""

    first_probe_after: float = PROBE_EVERY
    """How long after its newest slice a verdict waits for its probe while no probe has confirmed it (the
    newest slice that reported while a probe was out was not slow); once one has, `PROBE_EVERY`."""
    probed: dict[str, float] = field(default_factory=dict)
    """tool -> rate of the newest slice that reported while a probe was out: the probe's verdict."""

    @classmethod
    def for_step_aside(cls, step_aside: bool) -> Standing:
        """The standing of an instance that steps aside (`MRTR_WORKER_STEP_ASIDE`) or does not.

        Stepping aside, peer paces are kept until newer ones push them out (`forget_peers`) and a verdict is
        probed `PROBE_SOON` after the slices it rests on, until a probe confirms it (`first_probe_after`).
        """
        if not step_aside:
            return cls()
        return cls(forget_peers=False, first_probe_after=PROBE_SOON)

    def observe(self, tool: str, steps: int, elapsed_ms: float, now: float) -> None:
        """Fold in one slice of `tool` that ran `steps` here in `elapsed_ms`."""
        if steps <= 0 or elapsed_ms <= 0:
            return
        rate = steps * 1000 / elapsed_ms
        before = self.own.get(tool)
        if self.probing.pop(tool, None) is not None:
            self.probed[tool] = rate
        if before is None:
            self.own[tool] = OwnRate(rate, 1, now)
        else:
            self.own[tool] = OwnRate(OWN_WEIGHT * rate + (1 - OWN_WEIGHT) * before.rate, before.slices + 1, now)

    def bring(self, tool: str, pace: Pace | None, *, peer: bool, now: float) -> None:
        """Note the pace a round of `tool` brought in; `peer`: it was measured elsewhere (`from_peer`)."""
        if not peer or pace is None or pace.samples == 0 or pace.rate <= 0:
            return
        self.peers.setdefault(tool, deque(maxlen=PEER_KEEP)).append((pace.rate, now))

    def own_rate(self, tool: str) -> float | None:
        """This instance's rate for `tool` over its newest slices, or None if too few slices."""
        mine = self.own.get(tool)
        if mine is None or mine.slices < OWN_MIN_SAMPLES:
            return None
        return mine.rate

    def peer_rates(self, tool: str, now: float) -> list[float]:
        """The paces brought in lately for `tool`."""
        kept = self.peers.get(tool, ())
        return [rate for rate, at in kept if not self.forget_peers or now - at <= PEER_STALE_SECONDS]

    def reference(self, tool: str, now: float) -> float | None:
        """The median of the paces brought in lately for `tool` (None: none): what a slice here is compared with."""
        rates = self.peer_rates(tool, now)
        return median(rates) if rates else None

    def slow(self, tool: str, ratio: float, now: float) -> bool:
        """Whether this instance's own rate for `tool` is clearly under its peers' (see `slow_against`)."""
        return slow_against(self.own_rate(tool), self.peer_rates(tool, now), ratio)

    def judge(self, tool: str, ratio: float, now: float) -> Judgement:
        """What to do with a round of `tool` arriving now: `PROBE` while a probe is due and none is out (the
        caller that runs it says so with `start_probe`, so the next round is not one too)."""
        if not self.slow(tool, ratio, now):
            return Judgement.RUN
        if not self._probe_due(tool, ratio, now):
            return Judgement.SLOW
        return Judgement.PROBE

    def start_probe(self, tool: str, now: float) -> None:
        """Record that a round of `tool` runs here as a probe from `now`, until a slice of the tool reports."""
        self.probing[tool] = now

    def _probe_due(self, tool: str, ratio: float, now: float) -> bool:
        """Whether a round of `tool` may run here as a probe: no probe is out, and the own rate is older than
        `first_probe_after`, or `PROBE_EVERY` once a probe's own slice was slow too (`probed`)."""
        confirmed = slow_against(self.probed.get(tool), self.peer_rates(tool, now), ratio)
        if now - self.own[tool].at <= (PROBE_EVERY if confirmed else self.first_probe_after):
            return False
        started = self.probing.get(tool)
        return started is None or now - started > PROBE_PATIENCE

    def aside(self, ratio: float, now: float) -> bool:
        """Whether some tool's rounds arriving now would all be handed on (`SLOW`): judged slow, and no probe
        due, or one still running.

        Why: a slow instance hands every round on at once, and the retry reaches a round-robin proxy before
        any other request moves its cursor, so it lands on the next instance in the pool nearly every time:
        that one serves two instances' share (the fleet simulator's study, 10 instances at 0.9 load: p99.9
        200 s). Out of rotation, the proxy skips it fairly and its share spreads. It comes back as soon as a
        probe is due, so the next round that reaches it is that probe.
        """
        return any(self.slow(tool, ratio, now) and not self._probe_due(tool, ratio, now) for tool in self.own)
