"""Prometheus metrics of one worker, in a registry of its own.

A registry per app (not the process-global one) keeps test apps independent
and lets the host expose exactly these series on `/metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_STATE_SIZE_BUCKETS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
_CHECKPOINT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


@dataclass
class WorkerMetrics:
    """Every series the worker exports."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "mrtr_worker_requests", "MCP requests by method and outcome", ["method", "outcome"], registry=r
        )
        self.input_required = Counter(
            "mrtr_worker_input_required",
            "input_required answers by why the round ended (input, admission, pressure, slice, drain)",
            ["reason"],
            registry=r,
        )
        self.state_bytes = Histogram(
            "mrtr_worker_request_state_bytes",
            "Size of sealed requestState tokens, received and sent",
            ["direction"],
            buckets=_STATE_SIZE_BUCKETS,
            registry=r,
        )
        self.state_rejections = Counter(
            "mrtr_worker_state_rejections", "Rejected requestState tokens by reason", ["reason"], registry=r
        )
        self.state_keys = Counter(
            "mrtr_worker_state_keys",
            "requestState tokens sealed or opened, by key name (watch an old key fall to zero before retiring it)",
            ["operation", "key"],
            registry=r,
        )
        self.computations = Gauge("mrtr_worker_computations", "Computations holding a slot", registry=r)
        self.queued = Gauge(
            "mrtr_worker_queued_computations", "Calls waiting for a compute slot (a rebalance moves them)", registry=r
        )
        self.fleet_full = Gauge(
            "mrtr_worker_fleet_full",
            "1 while the fleet looks full from here: a full worker queues new calls instead of handing them back",
            registry=r,
        )
        self.busy_refusals = Counter(
            "mrtr_worker_busy_refusals",
            "New calls refused as busy (-32000 with a retry hint): the fleet looked full and the queue here was"
            " longer than the callers wait (refuse_new_after_ms)",
            registry=r,
        )
        self.compute_steps = Counter(
            "mrtr_worker_compute_steps", "Computation steps executed on this instance", ["tool"], registry=r
        )
        self.task_slices = Counter(
            "mrtr_worker_task_slices",
            "Task slices taken here, by outcome (requeued, straggler, pressure, busy, input_required, completed,"
            " failed, stale, left, reclaimed, turn: taken in the line for a slot among the calls)",
            ["outcome"],
            registry=r,
        )
        self.rebalances = Counter(
            "mrtr_worker_rebalances", "POST /admin/rebalance received (capacity joined elsewhere)", registry=r
        )
        self.fast_resumes = Counter(
            "mrtr_worker_fast_resumes",
            "Silent tools' calls offered to the resume fast path, by outcome: served there, or passed to the SDK's "
            "path (first rounds, and anything unusual)",
            ["outcome"],
            registry=r,
        )
        self.info = Gauge(
            "mrtr_worker_info",
            "1, labelled with the worker's behaviour version: joined to the other series, traffic by version",
            ["version"],
            registry=r,
        )
        self.in_flight = Gauge("mrtr_worker_in_flight_requests", "MCP requests being handled", registry=r)
        self.ready = Gauge("mrtr_worker_ready", "1 while the worker accepts traffic, 0 while draining", registry=r)
        self.stepping_aside = Gauge(
            "mrtr_worker_stepping_aside",
            "1 while the worker asks to be out of rotation as slow against its peers (MRTR_WORKER_STEP_ASIDE)",
            registry=r,
        )
        # Tasks (`tasks.runner`): exported at 0 by a worker without Redis, so every worker has the same series.
        self.task_checkpoint_seconds = Histogram(
            "mrtr_worker_task_checkpoint_seconds",
            "Time to write the end of a slice (seal the record, one Redis transaction): what a checkpoint costs",
            buckets=_CHECKPOINT_BUCKETS,
            registry=r,
        )
        self.task_slots = Gauge(
            "mrtr_worker_task_slots",
            "Task slices holding a compute slot (with mrtr_worker_computations: the load admission sees)",
            registry=r,
        )
        self.task_straggling = Gauge(
            "mrtr_worker_task_straggling",
            "1 while this worker steps tasks under the straggler ratio of its peers' rates: it leaves fresh slices "
            "to them",
            registry=r,
        )
        self.task_pull_waits = Counter(
            "mrtr_worker_task_pull_waits",
            "Looks at the queue after which a worker that measured itself slow left the waiting slices to its peers",
            registry=r,
        )
        self.task_steps_discarded = Counter(
            "mrtr_worker_task_steps_discarded",
            "Task steps run here that were never committed (fenced: another worker took the slice; stale: the task "
            "was cancelled or moved on); only committed steps count in mrtr_worker_compute_steps_total",
            ["reason"],
            registry=r,
        )
        self.task_takeovers = Counter(
            "mrtr_worker_task_takeovers",
            "Slices this worker claimed from a worker seen dead (its connections gone or its heartbeat silent)",
            registry=r,
        )
