"""The built-in jobs a task can run, by name: the same on every worker, whatever packs it serves.

A task created on one instance may be resumed on any other, so the runner
resolves jobs from this fixed table rather than from the packs configured on
the instance that happens to take the slice. Packs installed as packages add
their jobs beside it (`ToolPack.jobs`, `mrtr_worker.packs.registry.job_named` looks in both): every
worker they are installed on knows them, served or not, and an instance without
the package leaves such a task's slices to one that has it. The test packs'
jobs (the conformance fixtures, the chaos run's toxic ones) come that way, from
`mrtr-test-packs`: a product worker has none of them.
"""

from __future__ import annotations

from collections.abc import Callable

from mrtr_worker.compute.hashchain import HASH_CHAIN
from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import COUNT_PRIMES
from mrtr_worker.tasks.demo_jobs import PRIME_REPORT
from mrtr_worker.tasks.jobs import Job, compute_job

JOBS: dict[str, Job] = {
    job.name: job
    for job in (
        compute_job(COUNT_PRIMES),
        compute_job(HASH_CHAIN),
        compute_job(ESTIMATE_PI),
        PRIME_REPORT,
    )
}


JobLookup = Callable[[str], Job | None]
"""How the task service and runner find a job by name: `mrtr_worker.packs.registry.job_named` in a worker
(these jobs, then installed packs' ones); the packs sit above the tasks, so they hand the lookup down."""
