"""`python -m mrtr_ops.upgrade` (`scripts/rolling-upgrade`): upgrade (or roll back) the local or the compose cluster.

The command line only; the upgrade itself is `mrtr_ops.upgrade.rolling.RollingUpgrade`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from mrtr_ops.compose.fleet import ComposeFleet
from mrtr_ops.fleet import Fleet
from mrtr_ops.local.control import ControlledFleet
from mrtr_ops.paths import compose_lb_url, compose_project, project_root
from mrtr_ops.upgrade import rolling
from mrtr_ops.upgrade.rolling import RetireRefused, RollingUpgrade, Step, step_record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/rolling-upgrade", description=(rolling.__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--compose", action="store_true", help="the compose cluster (default: the local cluster)")
    parser.add_argument("--work-dir", type=Path, default=Path(".cache/cluster"), help="the local cluster's work dir")
    parser.add_argument("--rollback", action="store_true", help="replace v2 instances by v1 instead")
    parser.add_argument("--no-wait", action="store_true", help="rollback: do not wait one TTL for v2-layout states")
    parser.add_argument("--new-key", default="v2", help="name of the key version 2 brings (default v2)")
    parser.add_argument("--state-ttl", type=float, help="seconds (default: the longest TTL the workers report)")
    parser.add_argument("--steps-file", type=Path, help="write the steps with their times here (JSON)")
    args = parser.parse_args(argv)

    fleet: Fleet
    if args.compose:
        root = project_root()
        project = compose_project()
        fleet = ComposeFleet(root, project, compose_lb_url())
    else:
        control = args.work_dir / "control.url"
        if not control.exists():
            print(
                f"rolling-upgrade: no running local cluster ({control} missing); start scripts/cluster", file=sys.stderr
            )
            return 2
        fleet = ControlledFleet(control.read_text().strip())

    def show(step: Step) -> None:
        detail = ", ".join(f"{k}={v}" for k, v in step.detail.items())
        print(f"{time.strftime('%H:%M:%S')}  {step.name:<18} {step.ended - step.started:6.1f} s  {detail}", flush=True)

    upgrade = RollingUpgrade(fleet, state_ttl=args.state_ttl, new_key=args.new_key, on_step=show)
    try:
        steps = upgrade.rollback(wait_for_states=not args.no_wait) if args.rollback else upgrade.upgrade()
    except RetireRefused as refused:
        # Every earlier step is done; the ring still holds the old key, so nothing sealed under it is lost.
        print(f"rolling-upgrade: stopped at retire-key, the old key kept: {refused}", file=sys.stderr)
        return 1
    if args.steps_file is not None:
        args.steps_file.write_text(json.dumps([step_record(s) for s in steps], indent=2))
    versions = sorted({w.version for w in fleet.workers()})
    print(f"rolling-upgrade: done; the fleet runs version(s) {versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
