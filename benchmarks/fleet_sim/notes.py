"""The section's prose that depends on the run: what the model of the real cluster includes, what the study covers,
and what it leaves out (the task runner's slices)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.fleet_sim.calibrate import Calibration
from benchmarks.fleet_sim.study import SCENARIOS, Result

TRANSIENT = ("upgrade", "scale-out")


def model_of_the_cluster(cal: Calibration) -> list[str]:
    """How the replay of a real cell is built, each part named after what it models."""
    quiet = cal.step_quiet
    lines = [
        "How the replay models the real three-worker runs, beyond the policy objects it drives:",
        "",
        "* **The kernel's shares.** Everything shares the machine's two cores, and not equally: the worker's step "
        "processes run at nice 10 (`STEP_NICENESS`), whose CFS weight is 110 against 1024 for the worker's own "
        "event loop, the proxy, the client and a starting worker. The replay fills the cores by weight, at most "
        "one core per process, so a starting worker or a hop's CPU takes a core from the steps at once (shared "
        "equally, the new workers of the kill-and-start-over upgrade started three times slower, and the calls "
        "they killed ran 19 % longer than the real ones).",
    ]
    if quiet is not None:
        lines.append(
            "* **A quiet machine's step.** The reference figures come from a quiet machine; the step times in "
            f"`calibration.json` were measured under a load average of about 20 ({cal.step_short.mean * 1000:.1f} "
            f"ms for the short call's step), which makes a sieve's step about a fifth dearer. `quiet.py` carries a "
            f"quiet measurement over instead of a factor: the bare pool of the cluster-efficiency section ("
            f"{quiet.source}: {quiet.bare_mix * 1000:.1f} ms per step of its mix) times each call's step over that "
            f"mix, measured side by side ({quiet.ratio:.2f} for the short call, {quiet.long_ratio:.2f} for the "
            f"long one): {quiet.mean * 1000:.1f} and {quiet.long_mean * 1000:.1f} ms. Measured under load at "
            "different moments, the six-at-once and two-at-once times differed by the moment more than by "
            "crowding, so the quiet ones serve for both."
        )
    if cal.scrape is not None:
        lines.append(
            "* **The benchmark's own instruments.** why-shed reads every worker's step counter every 0.25 s "
            "(and a leaving worker's every 50 ms) from the process its callers run in; the straggler benchmark "
            f"reads none. A scrape costs the worker {cal.scrape.worker * 1000:.1f} ms and the benchmark "
            f"{cal.scrape.scraper * 1000:.1f} ms of CPU (`scrape_cost.py`); the replays of why-shed cells pay it."
        )
    if any(ref.warmed_by for ref in cal.reference):
        lines.append(
            "* **The row before.** The straggler benchmark runs its slow row with shedding on right after its "
            "healthy row, on the same cluster: every worker's standing already knows the healthy pace when the "
            "throttle starts, and the slow one's first slices are judged at once. The replay runs that healthy "
            "load first, uncounted (from fresh workers, the calls that met the slow one before it knew ran two "
            "whole slices there, and the p99 came out 21 % above the real one)."
        )
    lines.append(
        "* **Not modelled:** the start-up CPU (3.7 s, from a measurement under load; the real quiet upgrades "
        "started each worker in 2.4 to 2.9 s of wall time against about 4 s in the replay), cache effects of "
        "SIGSTOP/SIGCONT on the throttled worker, why-shed's stopped share (its table does not print it: the "
        "replay takes the nominal 75 %, while its throttle thread shares the interpreter with the callers and the "
        "scrapes, so its SIGCONTs may come late), and the two real sources' disagreement itself: the same "
        "scenario (a) with hand-back gave 1.96 calls/s and a p50 of 3.0 s in the straggler run and about 1.7 "
        "calls/s and 3.4 s in the why-shed run half an hour later, more than the scrapes explain."
    )
    lines.append(
        "* **Where a restarted call lands.** In (b) with staying where you land, three calls of about 36 s run "
        "in step, and an old worker can leave only once its calls are done: how long the upgrade takes turns on "
        "whether the calls restarted just before the next worker leaves land on it. In the replay (the real "
        "pool's round robin over the workers in rotation) two of the three calls restarted at about 71 s land on "
        "the next to leave, which then waits a whole call: its old workers took about 95 s to leave, the real "
        "ones 68.7 s, and the longer run completes more calls. The real order depends on when the proxy's "
        "discovery drops a departed worker and adds a new one, which the replay does at once; one real run "
        "cannot tell which it was."
    )
    return lines


def coverage(results: Sequence[Result]) -> list[str]:
    """Which loads each scenario ran at the largest size, and why the transient ones may have fewer."""
    if not results:
        return []
    largest = max(r.cell.size for r in results)
    loads = sorted({r.cell.load for r in results})
    present = [s for s in SCENARIOS if any(r.cell.scenario == s for r in results)]
    ran = {
        s: sorted({r.cell.load for r in results if r.cell.scenario == s and r.cell.size == largest}) for s in present
    }
    if all(found == loads for found in ran.values()):
        return []
    said = "; ".join(
        f"{s} at {', '.join(f'{x:.2f}' for x in found)}" if found else f"{s} not run" for s, found in ran.items()
    )
    calls = [r.figures.calls for r in results if r.cell.size == largest and r.cell.scenario in TRANSIENT]
    counted = f" (here {min(calls):,} to {max(calls):,})" if calls else ""
    return [
        f"**Coverage at {largest:,} instances**: {said}. The transient scenarios count every call from the "
        f"event on, so one run of them at {largest:,} instances counts tens of thousands of calls{counted}: a cell "
        "took about 4 minutes of a core on the busy machine this ran on (an upgrade at 0.70 with hand-back: 243 s, "
        "51,467 calls), and the twelve cells per load did not fit the session. Cells not run are left out (a dash "
        "in the tables), not estimated."
    ]


def slices() -> list[str]:
    """Why the task runner's slices are not in the model (issue 25 asks for them)."""
    return [
        "**Not in the model: the task runner's slices.** Tasks do not go through the proxy: each worker pulls "
        "slices from a Redis stream (an idle worker's blocked read is first in line), holds a lease it renews, "
        "commits its checkpoint to Redis at the end of a slice and puts the slice back for any puller. Its rules "
        "are pure and could be driven as `SheddingPolicy` is (`tasks.straggling.Standing`, `pull_wait_ms`, "
        "`judge_slice`, `SheddingPolicy.task_slice_end` with the runner's slice length), but what decides the "
        "figures around them is the queue: which blocked reader gets a slice, the heartbeats that carry each "
        "worker's standing to its peers, the lease and commit round trips to Redis. None of that is in this "
        "model, and `calibration.json` holds no Redis costs and no task cells (the straggler-tasks section of "
        "this report would be the reference). A slice model would be a pull queue beside the proxy's push, "
        "with those costs measured; it is left for its own issue rather than approximated here."
    ]
