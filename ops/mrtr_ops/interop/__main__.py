"""`python -m mrtr_ops.interop` (`scripts/interop` installs the clients first and passes where they are).

Exit 0 when nothing failed on the server's side (client gaps are recorded, not
failed); 1 otherwise. Writes `docs/interop.md` and the README's "Tested
clients" table unless `--no-report`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mrtr_ops.interop.catalog import ROWS
from mrtr_ops.interop.report import document, readme_table, update_readme
from mrtr_ops.interop.run import DEFAULT_MAX_SLICE_MS, Options, run_matrix
from mrtr_ops.interop.runner import Toolbox


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/interop", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--node", type=Path, required=True, help="the Node binary (22) the npm clients run on")
    parser.add_argument("--npm-dir", type=Path, required=True, help="where the pinned npm clients are installed")
    parser.add_argument("--tasks-python", type=Path, required=True, help="the FastMCP-tasks environment's python")
    parser.add_argument("--work-dir", type=Path, default=Path(".cache/interop/run"), help="clusters, configs, logs")
    parser.add_argument("--max-slice-ms", type=int, default=DEFAULT_MAX_SLICE_MS, help="the workers' time slice")
    rows = ",".join(row.id for row in ROWS)
    parser.add_argument("--only", default="", help=f"comma-separated rows to run (of {rows}); implies --no-report")
    parser.add_argument("--no-report", action="store_true", help="do not write docs/interop.md or the README table")
    parser.add_argument("--no-timings", action="store_true", help="skip timing our own client beside the others")
    parser.add_argument("--doc", type=Path, default=Path("docs/interop.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    args = parser.parse_args(argv)

    only = frozenset(r for r in args.only.split(",") if r)
    unknown = only - {row.id for row in ROWS}
    if unknown:
        parser.error(f"unknown rows: {', '.join(sorted(unknown))} (known: {rows})")
    tools = Toolbox(node=args.node, npm_dir=args.npm_dir, tasks_python=args.tasks_python, work_dir=args.work_dir)
    outcome = run_matrix(Options(tools, args.max_slice_ms, only, timings=not args.no_timings))

    if not (args.no_report or only):
        args.doc.write_text(document(outcome))
        if not update_readme(args.readme, readme_table(outcome)):
            print(f"interop: {args.readme} has no Tested clients markers; table not written", file=sys.stderr)
        print(f"interop: wrote {args.doc} and the table in {args.readme}")
    for (run_id, feature), cell in sorted(outcome.cells.items()):
        if cell.failed:
            print(f"interop: FAIL {run_id} {feature.value}: {cell.detail}", file=sys.stderr)
    print(f"interop: {'FAILED on the server side' if outcome.failed else 'no failure on the server side'}")
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
