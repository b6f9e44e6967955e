"""The section's prose that depends on the run: what the model of the real cluster includes, what the study covers,
and how the task runner's slices are modelled."""

from __future__ import annotations

from collections.abc import Sequence

from mrtr_lab.fleet_sim.calibrate import Calibration
from mrtr_lab.fleet_sim.calibration import BALANCES, LABELS, STRATEGIES, Compared
from mrtr_lab.fleet_sim.model import Model, measured_quiet
from mrtr_lab.fleet_sim.reference import Reference
from mrtr_lab.fleet_sim.study import SCENARIOS, SLOW_SHARE, SLOW_SPEED, STEPS, TASK_SCENARIOS, Result
from mrtr_lab.fleet_sim.tasks import BEAT_SECONDS, PRESENCE_SECONDS

TRANSIENT = ("upgrade", "scale-out")
BALANCE_NAMES = {"round_robin": "round robin", **BALANCES}


def model_of_the_cluster(cal: Calibration, compared: Sequence[Compared]) -> list[str]:
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
    if cal.uneven is not None and cal.uneven.spread > 0:
        lines.append(_uneven(cal))
    if quiet is not None:
        lines.append(
            "* **A quiet machine's step.** The reference figures come from a quiet machine, and a sieve's step "
            "costs more CPU beside other work (it shares the caches: 55 ms under a load average of 22 against about "
            "45 ms quiet, 2026-11-30). `quiet.py` carries a quiet measurement over instead of a factor: the bare "
            f"pool of the cluster-efficiency section ({quiet.source}: {quiet.bare_mix * 1000:.1f} ms per step of its "
            f"mix) times each call's step over that mix, measured side by side ({quiet.ratio:.2f} for the short "
            f"call, {quiet.long_ratio:.2f} for the long one): {quiet.mean * 1000:.1f} and "
            f"{quiet.long_mean * 1000:.1f} ms. Timed directly with `calibrate.py` ({cal.measured_at}), two at once: "
            f"{cal.step_short.mean * 1000:.1f} and {cal.step_long.mean * 1000:.1f} ms; six (short) and three (long) "
            f"at once: {cal.step_crowded.mean * 1000:.1f} and {cal.step_long_crowded.mean * 1000:.1f} ms"
            + (
                f", other processes taking {cal.steps_others_share:.0%} of the CPU meanwhile: a quiet machine's, "
                "measured in the same hour as the reference cells, so the model takes them as they are (six and "
                "three at once for the replays); the carried-over quiet step serves only step times measured "
                "under load. A host's speed drifts by several per cent within the hour, and hosts differ more."
                if measured_quiet(cal)
                else ". The model takes the quiet ones for both: measured under load at different moments, the "
                "crowded and uncrowded times differed by the moment more than by crowding."
            )
        )
    if cal.scrape is not None:
        lines.append(
            "* **The benchmark's own instruments.** why-shed reads every worker's step counter every 0.25 s "
            "(and a leaving worker's every 50 ms) from the process its callers run in; the straggler benchmark "
            f"reads none. A scrape costs the worker {cal.scrape.worker * 1000:.1f} ms and the benchmark "
            f"{cal.scrape.scraper * 1000:.1f} ms of CPU (`scrape_cost.py`); the replays of why-shed cells pay it."
        )
    if any(ref.before for ref in cal.reference):
        lines.append(
            "* **The row before.** The straggler benchmark runs its slow row with shedding on right after its "
            "healthy row, on the same cluster: every worker's standing already knows the healthy pace when the "
            "throttle starts, and the slow one's first slices are judged at once. The replay runs that healthy "
            "load first, uncounted (from fresh workers, the calls that met the slow one before it knew ran two "
            "whole slices there, and the p99 came out 21 % above the real one)."
            + (_balance_before() if any(ref.before and ref.run for ref in cal.reference) else "")
        )
    if cal.tasks is not None and any(ref.scenario.startswith("tasks") for ref in cal.reference):
        own = cal.tasks.task
        lines.append(
            "* **The task rows.** The straggler benchmark's task rows are replayed as it runs them: the rule-on "
            "cluster's healthy row first, then its slow row on the same workers (their standing knows the healthy "
            "pace), the rule-off row on fresh workers; 6 callers follow their tasks by pushed changes, tasks done "
            "counted in the 45 s window. The shares of slices begun on the slow worker are under the table. Where "
            "the model is off, it finishes more tasks than the real slow rows, and its tasks are more alike than "
            "the real ones (a lower healthy p99 for the same p50). It knows a task's round trips only as CPU: "
            f"`task_cost.py` found a task's creation, listen and pushed result took {own.wall * 1000:.0f} ms of "
            f"wall time against {(own.client + own.proxy + own.worker + own.redis) * 1000:.0f} ms of CPU (load "
            f"average {cal.tasks.load_average:.1f}; event-loop wake-ups, the push's delivery); each modelled task "
            "is that much shorter. Not fitted: read those gaps as the size "
            "of what is left out."
        )
    lines.append(
        f"* **Not modelled:** the start-up's wall time beyond its CPU ({cal.start_up.cpu:.1f} s of CPU, "
        f"{cal.start_up.wall:.1f} s from start to rotation on an idle cluster), and cache effects of SIGSTOP/SIGCONT "
        "on the throttled worker."
    )
    lines += [*_noisy(compared), *_balance(compared), *_restarts(cal, compared)]
    return lines


def _noisy(compared: Sequence[Compared]) -> list[str]:
    """why-shed cells run more than once: how far their runs are from each other, and where the model falls."""
    found = []
    for cell in compared:
        if cell.real_calls_range is None or cell.real_p99_range is None or cell.benchmark != "why-shed":
            continue
        low, high = cell.real_calls_range
        p99_low, p99_high = cell.real_p99_range
        inside = p99_low <= cell.model_p99 <= p99_high and low <= cell.model_calls <= high
        outside = "" if inside else ", outside the runs' range"
        found.append(
            f"{LABELS[cell.scenario]}, {STRATEGIES[cell.strategy]}: {cell.repeats} runs, calls {_range([low, high])}, "
            f"p99 {p99_low:.1f} to {p99_high:.1f} s (the model {cell.model_calls:.0f} calls, "
            f"{cell.model_p99:.1f} s{outside})"
        )
    if not found:
        return []
    return [
        "* **One run is a noisy reference.** A why-shed cell's calls are few (a 30 s window holds about one call "
        "above its p99; the upgrade's three callers finish a handful) and the host's chance decides the order "
        "in which equal calls end, so each such cell ran more than once on the same machine within the "
        "calibration's measurement (why_shed.py once, `calibrate.py --add-references` again) and its row "
        "compares the model with the "
        f"mean of the runs. The runs of each: {'; '.join(found)}."
    ]


def _balance_before() -> str:
    return (
        " The balance benchmark keeps one cluster per balance for all its rounds, so each of its cells follows "
        "the earlier rounds' cells on the same workers (`_balance_order`); the replay runs them first, uncounted, "
        "the other balances' cells as idle time. It tells in the healthy cells after a slow one: the worker that "
        "was slow is still judged slow by its own standing when the healthy load begins, and hands calls on "
        "until a probe's slice lifts it (`Standing.judge`), while the worker after it in the round robin takes "
        "them. In a run of round robin's cells alone on 2026-12-03 (four rounds, `--trace`) the healthy cell's "
        "slowest call took 5.2 s in the first round and 6.4 to 7.9 s in the rounds after a slow cell, the "
        "once-slow worker still handing calls on 16 s into the cell. Replayed from fresh workers, the balance "
        "table's healthy rows came out 10 to 14 % under the real p99s (2026-12-03)."
    )


def _balance(compared: Sequence[Compared]) -> list[str]:
    """The balance benchmark's slow cells: each picker's p99, real (with its runs' range) and modelled."""
    slow = {c.balance: c for c in compared if c.benchmark == "balance" and c.scenario == "a"}
    if not slow:
        return []
    p99s = ", ".join(
        f"{BALANCE_NAMES[b]} {c.real_p99:.1f} s real{_runs_p99(c)} and {c.model_p99:.1f} s modelled"
        for b, c in slow.items()
    )
    return [
        "* **The balance benchmark, out of sample.** Its cells (`scripts/bench balance`: each proxy balance with "
        "hand-back on, healthy and one worker at a quarter speed) were not used to shape the model; the replay "
        "runs the proxy's own picker the cell names. Its table's run and those of `calibrate.py --add-balance` "
        "pool into one row per cell, each run's p99 of all its rounds' calls together, the model's of the same "
        f"rounds replayed. With a slow worker among three, p99: {p99s}. The traces "
        "(`--trace`) say why the pickers lose there: the slow worker hands every round on at once, so it has the "
        "fewest requests open and the picker sends the retried round straight back; after three straggler "
        "hand-backs in a row the round has priority and runs there, slice after slice, at a quarter of the "
        "speed. Round robin takes the workers in turn whatever they hold, so a retried round goes back to the "
        "slow one no more often than any other round does, but lands on the worker after it in the pool. With "
        "the slow worker stepping aside (`MRTR_WORKER_STEP_ASIDE`) no round reaches it but its probes. Least "
        "request with stepping aside does not help among three: in the replay the slow worker never judged "
        "itself slow, since the rounds the per-slice rule moved off it came straight back and the paces they "
        "brought were measured there, which its standing does not count as its peers'." + _apart(slow)
    ]


def _apart(slow: dict[str, Compared]) -> str:
    """The slow cells out of 15 % whose real runs are further apart than that, the model among them."""
    among = [
        BALANCE_NAMES[b]
        for b, c in slow.items()
        if not c.within and c.real_p99_range is not None and c.real_p99_range[0] <= c.model_p99 <= c.real_p99_range[1]
    ]
    if not among:
        return ""
    return (
        f" Out of 15 % of the runs' mean: {', '.join(among)}, whose runs differ by more than that from each other, "
        "the model's p99 among them (a run's slowest calls, hop by hop: `scripts/bench balance --trace 5`)."
    )


def _runs_p99(cell: Compared) -> str:
    """The p99s of a pooled cell's runs, each of all its rounds' calls; nothing for a single run."""
    if cell.real_p99_range is None:
        return ""
    low, high = cell.real_p99_range
    return f" (its runs {low:.1f} to {high:.1f} s)"


def _restarts(cal: Calibration, compared: Sequence[Compared]) -> list[str]:
    """(b) staying where you land: the old workers' leaving time, real runs against the model's."""
    refs = [ref for ref in cal.reference if ref.scenario == "b" and ref.strategy == "stay"]
    leaves = sorted(ref.leaving_seconds for ref in refs if ref.leaving_seconds is not None)
    model = [c.model_extra for c in compared if c.scenario == "b" and c.strategy == "stay" and c.model_extra]
    if not leaves or not model:
        return []
    spread = "; ".join(" / ".join(f"{s:.0f}" for s in _first_calls(ref)) for ref in refs if ref.calls)
    return [
        "* **Where a restarted call lands.** In (b) with staying where you land, an old worker can leave only "
        "once its calls are done, so how long the upgrade takes turns on whether a call restarted before the "
        "next worker leaves lands on an old worker still to leave: each such landing adds a whole call. The first "
        "call to end is the first leaving worker's, and its caller's next call goes where the proxy's round robin "
        "points. With the pool in the order the old workers leave: on the first (drained, so skipped) or the "
        "second, it lands on the second, which then waits for it before it leaves; on the third, on the third, "
        "which leaves last anyway. Three real runs on 2026-12-03 with the round robin turned on purpose before "
        "the cell (requests through the proxy until `/lb/backends` named the wanted worker `next`): turned to the "
        "first, the old workers left in 117 s; turned to the third, in 76 s, and once in 136 s, when the machine "
        "was busy with another job, the first calls ended within 4 s of each other and the second worker's own "
        "caller called again before that worker was drained, and landed there. Every run now records where the "
        "round robin stood as its cell began (`Reference.pool_order`, `next_pick`) and the replay starts its pool "
        "there; for a run that did not (before 2026-12-03) each seed draws both"
        + _turned(refs)
        + ". On 2026-12-03 the replays of the two runs that recorded it left in 84 to 90 s in 10 of 12 seeds, "
        "those of the three that did not in 5 of 18 (in 128 to 134 s in the rest: two draws in three put the "
        "round robin on the first or second worker): the model's gap in this row is in the runs it has to guess"
        + f". The real old workers left in {', '.join(f'{x:.0f}' for x in leaves)} s, the model's in "
        f"{_range(model)} s on average over its seeds; a longer upgrade runs past the 100 s window and lets "
        "callers start one more call. How far apart the first calls end decides the rest of the race"
        + (
            f": the real first calls of each run took {spread} s (in the order they ended; the first to end was "
            "the first leaving worker's in every run traced for it, ten from 2026-12-01 to -03)"
            if spread
            else ""
        )
        + ". Sampling the step processes' CPU (/proc, every 0.1 s) in one such run (2026-12-02): all three moved "
        "between both cores, none kept a core to itself, and each got 0.55 to 0.65 of a core over the first "
        "call, the leaving worker's the most: the uneven share above, and "
        + _polled(cal)
        + " The replay takes a leaving worker out of the proxy's "
        f"pool as late as the real one is, {Model.from_calibration(cal).leave_lag * 1000:.0f} ms after its last "
        "call ends (the benchmark's next look, the process's exit and the proxy's next read of its backends file, "
        "`StartUp.gone`), so the call its caller restarts at once is picked from the pool the real proxy picks "
        "from (taken out at once, the round robin's cursor skipped a place and the next restart went to the old "
        "worker after it)."
    ]


def _turned(refs: Sequence[Reference]) -> str:
    """Where the round robin stood in the runs that recorded it, and how long their old workers took to leave."""
    runs = [
        f"pool {', '.join(str(place + 1) for place in ref.pool_order)}, next {ref.next_pick + 1}: "
        f"{ref.leaving_seconds:.0f} s"
        for ref in refs
        if ref.pool_order is not None and ref.next_pick is not None and ref.leaving_seconds is not None
    ]
    if not runs:
        return ""
    return " (the runs that recorded it, the old workers numbered in the order they leave: " + "; ".join(runs) + ")"


def _first_calls(ref: Reference) -> list[float]:
    """Seconds of the calls the callers began with (together, within a second of the first), shortest first: a
    cell's own start is not at 0 when its workers were started for it."""
    began = min(start for start, _ in ref.calls)
    return sorted(seconds for start, seconds in ref.calls if start < began + 1.0)


def _uneven(cal: Calibration) -> str:
    """The kernel's uneven share: what was measured and what the model draws."""
    assert cal.uneven is not None
    found = cal.uneven
    windows = ", ".join(f"{spread:.3f} over {window} s" for window, spread in found.measured.items())
    return (
        "* **The kernel's uneven share.** Equal calls started together on three workers do not end together: CFS "
        "keeps a run queue per core and moves processes between them now and then, so for a while one step "
        "process has a core to itself while two share the other. Measured on the real cluster (`uneven_share.py`: "
        f"one long call on each of {found.processes} workers, their step processes' CPU read every 0.1 s), the "
        f"spread across them of the CPU each got: {windows}. The replay draws each step pool's CFS weight afresh "
        f"every {found.period:g} s from a lognormal of spread {found.spread:.2f}, which spreads alike over those "
        "windows. Without it the model's calls were more alike than the real ones: healthy p99s 5 to 10 % lower "
        "(2026-12-02). It spreads the upgrade's three first calls by a second or two, where the real ones end 3 "
        "to 8 s apart, the first leaving worker's first: that lead is not the kernel's chance but the polled "
        "worker's lift (see where a restarted call lands). Three such processes alone on the machine spread less "
        "and differently from run to run."
    )


def _polled(cal: Calibration) -> str:
    """The polled worker's lift: measured, and modelled (or not measured)."""
    if cal.polled is None:
        return "reading one worker's page every 50 ms, as the benchmark reads a leaving worker's, is not measured."
    trials = ", ".join(f"{lift:+.0%}" for lift in cal.polled.trials)
    return (
        "the benchmark's own reads: reading one worker's page every 50 ms, as it reads a leaving worker's (on top "
        "of every page every 0.25 s), gives that worker's step process more of the cores "
        f"(`polled_lift.py`: {cal.polled.lift:+.0%} over the other two, trials of {cal.polled.seconds:g} s "
        f"polling each worker in turn: {trials}). The replay raises a step pool's claim by as much while its "
        "worker is polled so; without it the model's first calls ended within a second or two of each other and "
        "the restarts landed otherwise."
    )


def _range(values: list[float]) -> str:
    low, high = f"{min(values):.0f}", f"{max(values):.0f}"
    return low if low == high else f"{low} to {high}"


def coverage(results: Sequence[Result]) -> list[str]:
    """Which loads each scenario ran at the largest size: a cell not run is left out, never estimated."""
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
    tasks_left = any(s in TASK_SCENARIOS and not found for s, found in ran.items())
    why_tasks = (
        " The task scenarios run at the sizes `--task-sizes` names (10 and 100 by default): the model has one "
        "Redis, saturated from 100 instances at load 0.9 (see the task notes)."
        if tasks_left
        else ""
    )
    return [
        f"**Coverage at {largest:,} instances**: {said}. The transient scenarios count every call from the event "
        f"on, so one run of them at {largest:,} instances counts tens of thousands of calls{counted}; a cell takes "
        "a minute or two of a core (an upgrade at 0.70 with hand-back: 46 s of CPU for 60,619 calls)."
        f"{why_tasks} Cells not run are left out (a dash in the tables), not estimated."
    ]


def slices(cal: Calibration) -> list[str]:
    """How the task runner's slices are modelled (issue 25), with the costs measured for them."""
    tasks = cal.tasks
    if tasks is None:
        return ["**Task slices**: not costed in this calibration (`calibrate.py --task-cost`), so no task cell ran."]
    t, s, step, poll = tasks.task, tasks.slice, tasks.step, tasks.poll
    return [
        "**The task runner's slices.** A task is created through the proxy (on the worker its round robin picks) "
        "and followed by pushed changes, as the benchmarks' client does; its slices go on a modelled Redis stream "
        "(a slice goes to the worker blocked longest in its read, or waits first in, first out), and every "
        "worker's runner takes, steps and ends them by the runner's own rules: `SliceRules` "
        "(`mrtr_worker.tasks.slicing`, which `TaskRunner` itself calls: slow, the pull wait, late, the opening "
        "pass-on, `task_slice_end` with the 1000 ms slice, the alone re-check, the checkpoint's pace and move), "
        "over the instance's `SheddingPolicy`, with each worker's standing told to its peers every 1.25 s as the "
        "runner's heartbeat does. Redis is one process (on the shared cores in a replay, on a core of its own in "
        "the study) and every round trip costs CPU at the worker's main process and at Redis, measured by "
        f"`task_cost.py` ({tasks.measured_at or 'date not kept'}, load average {tasks.load_average:.1f} on the "
        f"shared machine): a task's own (creation, listen, pushed result) {_ms(t.client)} client, {_ms(t.proxy)} "
        f"proxy, {_ms(t.worker)} worker, {_ms(t.redis)} Redis; a slice (take, begin, checkpoint transaction, "
        f"pushed change) {_ms(s.client)} client, {_ms(s.proxy)} proxy, {_ms(s.worker)} worker, {_ms(s.redis)} "
        f"Redis; a step's lease check and dispatch {_ms(step.worker)} worker, {_ms(step.redis)} Redis; a poll "
        f"{_ms(poll.client)} client, {_ms(poll.worker)} worker, {_ms(poll.redis)} Redis; a checkpoint write took "
        f"{_ms(tasks.checkpoint_wall)} of wall time. Not modelled: a worker's death and the takeover of its slices "
        "(leases, presence, fencing), questions, cancels, the run-time limit, which worker holds a client's listen "
        "(the push is charged to the worker that ran the slice), and wall time beyond CPU: the 10-step task of "
        f"the measurement took {t.wall * 1000:.0f} ms of wall time besides its steps and slices against "
        f"{(t.client + t.proxy + t.worker + t.redis) * 1000:.0f} ms of CPU (event-loop wake-ups and a busy "
        "machine's scheduling), which the model has no measure of on a quiet machine.",
        "",
        *_redis_capacity(cal),
    ]


def _redis_capacity(cal: Calibration) -> list[str]:
    """What one Redis core carries at the measured costs: where the study's larger task cells saturate it."""
    tasks = cal.tasks
    if tasks is None:
        return []
    model = Model.from_calibration(cal)
    slices = 2  # a 20-step task at about 47 ms a step: one slice of 1000 ms, and the rest
    per_task = tasks.task.redis + slices * tasks.slice.redis + STEPS * tasks.step.redis
    most = 1 / per_task
    fleet = 100
    slow = max(1, round(SLOW_SHARE * fleet))
    capacity = (fleet - slow + slow * SLOW_SPEED) * 2 / (STEPS * (model.step_mean + model.worker_step))
    beats = fleet * (1 / BEAT_SECONDS + 1 / PRESENCE_SECONDS) * tasks.step.redis
    return [
        "**One Redis for the fleet.** At the measured costs a task of 20 steps in about two slices costs Redis "
        f"{per_task * 1000:.2f} ms of CPU, {STEPS * tasks.step.redis * 1000:.2f} ms of it the lease check at "
        f"every step boundary (a script that renews the slice's lease: {tasks.step.redis * 1e6:.0f} us each, "
        f"measured on the busy machine), so one Redis core carries at most about {most:.0f} tasks/s, heartbeats "
        f"aside. A fleet of {fleet} instances of the study (two slots each, {slow} at a quarter speed) steps "
        f"{capacity:.0f} such tasks/s at full load, and its runners' heartbeats take {beats:.0%} of a core: at "
        "0.9 and above the modelled Redis is saturated, the queue "
        "and every lease check wait for it, and the slow-tasks cells at 100 instances from load 0.9 measure "
        "that, not the straggler rule. Whether a real Redis saturates there depends on its per-step cost on a "
        "core of its own, which was not measured (it was measured on the two shared cores, under load)."
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"
