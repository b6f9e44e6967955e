"""`mrtr-fleet-check` (and `scripts/fleet-check`): the check in one command; docs/fleet-check.md.

The server is given as commands (`--v1`, `--v2`: local processes) or as images (`--v1-image`,
`--v2-image`: containers on Docker, the proxy as its image too).

Exit status: 0 when the verdict is `pass` (or the one `--expect` names), 1 for another verdict,
2 when the check could not run (a bad scenario or command, a server that never listened).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from mrtr_fleet_check.check import Options, run_check
from mrtr_fleet_check.containers import PORT, PROXY_IMAGE, Images
from mrtr_fleet_check.envfile import read_env_file
from mrtr_fleet_check.instance import ServerFailed
from mrtr_fleet_check.scenario import ScenarioError, load_scenario
from mrtr_fleet_check.servers import Commands, split_command
from mrtr_fleet_check.verdict import (
    ANSWER_DIFFERS,
    FOREIGN_PRINCIPAL_ACCEPTED,
    LOST,
    PASS,
    REFUSED_ACROSS_INSTANCES,
    REFUSED_AFTER_UPGRADE,
    SESSIONS_IN_MEMORY,
    TAMPERED_ACCEPTED,
)

VERDICTS = (
    PASS,
    SESSIONS_IN_MEMORY,
    REFUSED_ACROSS_INSTANCES,
    REFUSED_AFTER_UPGRADE,
    TAMPERED_ACCEPTED,
    FOREIGN_PRINCIPAL_ACCEPTED,
    ANSWER_DIFFERS,
    LOST,
)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mrtr-fleet-check",
        description="Start N instances of your MCP server behind a round-robin proxy, drive a scenario as load, "
        "replace every instance by version 2 mid-load, probe its requestState, and name what breaks.",
    )
    servers = p.add_mutually_exclusive_group(required=True)
    servers.add_argument("--v1", help='command that starts version 1, with {port}: "python -m app --port {port}"')
    servers.add_argument("--v1-image", help="image of version 1, run as containers on Docker instead of commands")
    p.add_argument("--v2", help="command that starts version 2 (default: the --v1 command again)")
    p.add_argument("--v2-image", help="image of version 2 (default: the --v1-image again)")
    p.add_argument(
        "--container-port", type=_positive(int), help=f"the port the image listens on, also PORT (default {PORT})"
    )
    p.add_argument("--env-file", type=Path, help="NAME=value lines given to every container of the image")
    p.add_argument("--proxy-image", help=f"the proxy's image with --v1-image (default {PROXY_IMAGE})")
    p.add_argument("--instances", type=_positive(int), default=3, help="instances of each version (at least 2)")
    p.add_argument("--scenario", type=Path, required=True, help="the scenario file (TOML)")
    p.add_argument("--duration", type=_positive(float), default=20.0, help="seconds of load (default 20)")
    p.add_argument("--users", type=_positive(int), default=6, help="concurrent callers (default 6)")
    p.add_argument("--mcp-path", default="/mcp", help="the server's MCP endpoint path (default /mcp)")
    p.add_argument("--grace", type=_positive(float), default=15.0, help="seconds from SIGTERM to SIGKILL (default 15)")
    p.add_argument("--report", type=Path, help="write the summary as JSON here")
    p.add_argument("--work-dir", type=Path, help="where the instances' and the proxy's logs go (default: a temp dir)")
    p.add_argument("--expect", choices=VERDICTS, default=PASS, help="the verdict that exits 0 (default pass)")
    return p


def _servers(args: argparse.Namespace) -> Commands | Images:
    """The commands or the images, each option checked against the way it belongs to."""
    if args.v1 is not None:
        for option in ("v2_image", "container_port", "env_file", "proxy_image"):
            if getattr(args, option) is not None:
                raise ValueError(f"--{option.replace('_', '-')} goes with --v1-image, not with --v1")
        commands = Commands(args.v1, args.v2 or args.v1)
        for command in (commands.v1, commands.v2):
            split_command(command)
        return commands
    if args.v2 is not None:
        raise ValueError("--v2 goes with --v1, not with --v1-image: give --v2-image")
    environment = read_env_file(args.env_file) if args.env_file is not None else {}
    return Images(
        args.v1_image,
        args.v2_image or args.v1_image,
        container_port=args.container_port or PORT,
        proxy_image=args.proxy_image or PROXY_IMAGE,
        environment=environment,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        scenario = load_scenario(args.scenario)
        servers = _servers(args)
    except (ScenarioError, ValueError) as exc:
        print(f"fleet-check: {exc}", file=sys.stderr)
        return 2
    if args.instances < 2:
        print("fleet-check: --instances must be at least 2", file=sys.stderr)
        return 2
    if not args.mcp_path.startswith("/"):
        print(f"fleet-check: --mcp-path must start with /, not {args.mcp_path!r}", file=sys.stderr)
        return 2
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="fleet-check-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    options = Options(
        servers=servers,
        instances=args.instances,
        scenario=scenario,
        work_dir=work_dir,
        duration=args.duration,
        users=args.users,
        mcp_path=args.mcp_path,
        grace=args.grace,
    )
    try:
        summary = run_check(options)
    except (ServerFailed, ScenarioError) as exc:
        print(f"fleet-check: {exc}", file=sys.stderr)
        return 2
    print(summary.text())
    print(f"  logs: {work_dir}")
    if args.report is not None:
        args.report.write_text(json.dumps(summary.as_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if summary.verdict.verdict == args.expect else 1


if __name__ == "__main__":
    raise SystemExit(main())
