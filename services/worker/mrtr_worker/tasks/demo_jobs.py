"""The job behind the demo's composition tool `prime_report`.

It is the compute pack's prime count, carrying the name its MRTR rounds
gathered into the result: the two halves of the protocol in one call.
"""

from __future__ import annotations

from mrtr_worker.compute.computation import State
from mrtr_worker.compute.primes import COUNT_PRIMES
from mrtr_worker.tasks.jobs import Job, StepRunner, text_result


async def _prime_step(state: State, runner: StepRunner) -> State:
    return await runner.run_step(COUNT_PRIMES.step, state)


PRIME_REPORT = Job(
    "prime_report",
    lambda a: {**COUNT_PRIMES.initial({"limit": a["limit"], "segment": a.get("segment")}), "for": str(a["name"])},
    _prime_step,
    COUNT_PRIMES.done,
    lambda s: text_result(
        f"{s['for']}, there are {s['count']} primes up to {s['limit']}.",
        {"name": s["for"], "limit": s["limit"], "count": s["count"]},
    ),
    computes=True,
)
