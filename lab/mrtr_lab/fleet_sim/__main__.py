"""Past two cores: the shedding policy at a thousand instances, by a simulator calibrated on the real fleet.

    scripts/bench fleet-sim [--sizes 10,100,1000] [--loads 0.7,0.9,0.95] [--calls N] [--jobs 2] [--no-report]

Writes the calibration table (the model against the real three-worker
figures of `calibration.json`), the supermarket anchors, the study's tables
and verdicts to docs/lab/studies.md (figures in docs/lab/data/), and the plot to docs/lab/fleet-sim.png.
The figures are the model's; the simulator lives in `lab/mrtr_lab/fleet_sim/`
(see its modules' docstrings), the measuring script in `calibrate.py`.
"""

from __future__ import annotations

import argparse
import pickle
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.report import REPORT, has_section, parser, publish
from mrtr_lab.fleet_sim.calibrate import CALIBRATION, Calibration, load
from mrtr_lab.fleet_sim.calibration import compare
from mrtr_lab.fleet_sim.model import Model
from mrtr_lab.fleet_sim.run import CALIBRATION_SECTION, calibration_part, run_study, section
from mrtr_lab.fleet_sim.strategies import STRATEGIES
from mrtr_lab.fleet_sim.study import SCENARIOS, Result
from mrtr_lab.pages import STUDIES

NAME = "fleet-sim"
PICTURE = STUDIES.parent / "fleet-sim.png"
RESULTS = REPORT.parent.parent / ".cache" / "fleet-sim" / "study.pickle"
"""The last study's cells, kept so that `--reuse-study` writes the section again with a new calibration."""


def options() -> argparse.ArgumentParser:
    p = parser(__doc__, duration=0.0, duration_help="unused: the study sizes its runs by --calls")
    p.add_argument("--sizes", default="10,100,1000", help="fleet sizes (default 10,100,1000)")
    p.add_argument("--loads", default="0.7,0.9,0.95", help="loads (default 0.7,0.9,0.95)")
    p.add_argument(
        "--largest-loads",
        default="",
        help="loads at the largest size only (default: --loads); its cells cost the most, a busy machine may skip some",
    )
    p.add_argument(
        "--task-sizes",
        default="10,100",
        help="sizes the task scenarios run at (default 10,100: the model's one Redis saturates past about 100)",
    )
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"subset of {','.join(SCENARIOS)}")
    p.add_argument("--strategies", default=",".join(STRATEGIES), help=f"subset of {','.join(STRATEGIES)}")
    p.add_argument("--calls", type=int, default=10_000, help="counted calls per cell (default 10,000)")
    p.add_argument("--seed", type=int, default=1, help="base seed: the same seed gives the same figures")
    p.add_argument("--jobs", type=int, default=2, help="cells simulated at once, one process each (default 2)")
    p.add_argument("--seeds", type=int, default=3, help="model runs per real calibration cell (default 3)")
    p.add_argument("--calibration", type=Path, default=CALIBRATION, help="the measured parameters and figures")
    p.add_argument("--no-anchors", action="store_true", help="skip the supermarket anchors (a minute)")
    p.add_argument(
        "--reuse-study",
        action="store_true",
        help=f"the study's cells of the last run ({RESULTS}) instead of simulating them: the calibration again only",
    )
    p.add_argument(
        "--calibration-only",
        action="store_true",
        help="only the calibration table and its notes, written into their block of the section (new "
        "measurements in calibration.json); the study's tables stay as they are",
    )
    p.add_argument(
        "--extend",
        action="store_true",
        help="with --reuse-study: simulate the asked cells the last run lacks (with its model) and show all",
    )
    p.add_argument(
        "--results", type=Path, default=RESULTS, help=f"where the study's cells are kept (default {RESULTS})"
    )
    p.add_argument("--report-file", type=Path, default=STUDIES, help="where the section goes (default the docs)")
    p.add_argument("--picture", type=Path, help=f"the PNG (default {PICTURE}; with --no-report only if given)")
    return p


def _previous(path: Path) -> tuple[Model, list[Result]]:
    model, found = pickle.loads(path.read_bytes())  # noqa: S301 - our own file, written by the run before
    assert isinstance(model, Model)
    assert isinstance(found, list)
    return model, found


def main() -> int:
    args = options().parse_args()
    cal = load(args.calibration)
    if args.calibration_only:
        return _calibration_only(cal, args.seeds, args.report_file, write=not args.no_report)
    model = Model.from_calibration(cal)
    began = time.monotonic()
    previous = _previous(args.results) if args.reuse_study else None
    study_model = previous[0] if previous is not None else model
    if study_model.tasks is None and model.tasks is not None:  # kept cells of a run before the task half was costed
        study_model = replace(study_model, tasks=model.tasks)
    results, compared, anchors = run_study(
        study_model,
        cal,
        sizes=[int(s) for s in args.sizes.split(",")],
        loads=[float(x) for x in args.loads.split(",")],
        largest_loads=[float(x) for x in args.largest_loads.split(",")] if args.largest_loads else None,
        task_sizes=[int(s) for s in args.task_sizes.split(",")],
        scenarios=[s.strip() for s in args.scenarios.split(",")],
        strategies=[STRATEGIES[k.strip()] for k in args.strategies.split(",")],
        calls=args.calls,
        seed=args.seed,
        jobs=args.jobs,
        seeds=args.seeds,
        anchors=not args.no_anchors,
        reuse=previous[1] if previous is not None else None,
        extend=args.extend,
        progress=None if (previous is not None and not args.extend) or args.no_report else args.results,
    )
    seconds = time.monotonic() - began
    lines = section(results, compared, anchors, cal, study_model, args.calls, args.seeds, seconds)
    publish(NAME, lines, write=not args.no_report, report=args.report_file)
    if not args.no_report or args.picture is not None:
        from mrtr_lab.fleet_sim.chart import draw

        draw(results, args.picture or PICTURE)
        print(f"picture written to {args.picture or PICTURE}")
    return 0


def _calibration_only(cal: Calibration, seeds: int, report: Path, *, write: bool) -> int:
    if write and not has_section(CALIBRATION_SECTION, report):
        print(f"{report} has no {CALIBRATION_SECTION} block: run the whole section once (without --calibration-only)")
        return 2
    lines = calibration_part(compare(cal, seeds), cal, seeds)
    publish(CALIBRATION_SECTION, lines, write=write, report=report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
