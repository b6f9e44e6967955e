"""The load: users calling the scenario's tools through the proxy for a while, one plain record per call.

All load generation lives here behind `Load` (start, then `join` for the records), so another load
generator (Locust's `McpUser`) can take its place without touching the rest of the check. Each user
is a thread with its own `mrtr_client.Client`, picking calls by weight; a refused state is not
restarted by the client (`restart_unreadable_state=False`), so the server's refusal shows.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr_client import Client, MrtrError, RetryPolicy, RpcError
from mrtr_client.trace import CallTrace, Hop
from mrtr_fleet_check.scenario import Call, Scenario
from mrtr_protocol import WORKER_ID_HEADER, WORKER_VERSION_HEADER

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
"""A round's answer may take as long as the client's own default allows; a connect, not."""
SEEN = "seen"
"""The reason of a hop known only from its response's headers (a failed call's)."""
NOT_ROUNDS = frozenset({"complete", "error", "task", "transport", SEEN})
"""Hop reasons that do not end an `input_required` round."""


@dataclass(frozen=True)
class CallRecord:
    tool: str
    arguments: dict[str, Any]
    rounds: int
    hand_backs: int
    """Rounds that came back `input_required` with no question: the server handed its progress back."""
    questions: dict[str, int]
    """How often each input-request key was asked in this call."""
    structured: Any = None
    text: str = ""
    is_error: bool = False
    error: str | None = None
    """A clear error the server answered (its message)."""
    lost: str | None = None
    """Why the call neither completed nor got a clear error (a timeout, undelivered rounds)."""
    instances: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    """The versions the server named (its `X-Worker-Version`), in order of first visit."""
    finished_by: str | None = None
    """The version that gave the last answer, when the server names it: the one whose answer the call must equal."""

    @property
    def completed(self) -> bool:
        return self.error is None and self.lost is None


class Visits:
    """Where each HTTP exchange of the current call landed, from the server's `X-Worker-Id`/`X-Worker-Version`.

    An httpx response hook: a call that fails raises without its trace, and this still says which
    instances and versions it met before the error.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str | None]] = []

    def __call__(self, response: httpx.Response) -> None:
        self.seen.append((response.headers.get(WORKER_ID_HEADER), response.headers.get(WORKER_VERSION_HEADER)))

    def trace(self) -> CallTrace:
        """A trace of bare hops (no reason) for a call that failed."""
        hops = [Hop(instance, version, SEEN, None, 0.0) for instance, version in self.seen]
        return CallTrace(hops=hops)


def record_of(call: Call, trace: CallTrace, **outcome: Any) -> CallRecord:
    rounds = sum(1 for hop in trace.hops if hop.reason not in NOT_ROUNDS)
    asked = len({q.round for q in trace.questions})
    return CallRecord(
        tool=call.tool,
        arguments=call.arguments,
        rounds=rounds,
        hand_backs=max(0, rounds - asked),
        questions=dict(Counter(q.key for q in trace.questions)),
        instances=trace.instances,
        versions=trace.versions,
        finished_by=trace.hops[-1].version if trace.hops else None,
        **outcome,
    )


def run_call(client: Client, call: Call, visits: Visits) -> CallRecord:
    client.inputs = call.inputs()
    visits.seen.clear()
    try:
        done = client.call_tool(call.tool, call.arguments, task=call.task)
    except RpcError as exc:
        return record_of(call, visits.trace(), error=exc.message)
    except (MrtrError, httpx.HTTPError) as exc:
        return record_of(call, visits.trace(), lost=f"{type(exc).__name__}: {exc}")
    return record_of(call, done.trace, structured=done.structured, text=done.text, is_error=done.is_error)


class Load:
    """`users` threads calling `url` until `stop`; `join` returns the records."""

    def __init__(self, url: str, scenario: Scenario, *, users: int, seed: int = 0) -> None:
        self._url, self._scenario = url, scenario
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        self._threads = [threading.Thread(target=self._user, args=(seed + n,), daemon=True) for n in range(users)]

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, after: float = 0.0) -> None:
        """End the load once `after` more seconds have passed: the calls in flight finish, no new one starts."""
        if after > 0:
            self._stop.wait(after)
        self._stop.set()

    def count(self) -> int:
        with self._lock:
            return len(self._records)

    def join(self) -> list[CallRecord]:
        for thread in self._threads:
            thread.join()
        with self._lock:
            return list(self._records)

    def _user(self, seed: int) -> None:
        rng = random.Random(seed)
        calls = self._scenario.calls
        weights = [call.weight for call in calls]
        token = self._scenario.tokens[0] if self._scenario.tokens else None
        policy = RetryPolicy(restart_unreadable_state=False)
        visits = Visits()
        http = httpx.Client(timeout=TIMEOUT, event_hooks={"response": [visits]})
        with Client(self._url, policy=policy, token=token, http=http) as client:
            while not self._stop.is_set():
                record = run_call(client, rng.choices(calls, weights)[0], visits)
                with self._lock:
                    self._records.append(record)
