"""The load's own process: Locust's `McpUser` in library mode, one JSON line per finished call.

`python -m mrtr_fleet_check.load_process PLAN.json` (written by `load.Load`): starts the plan's users
at once and runs until SIGTERM; then every call in flight finishes (Locust's graceful stop, at most
`STOP_TIMEOUT`) and the process exits 0. Importing Locust patches this process with gevent, which is
why the check runs it apart.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

import gevent  # type: ignore[import-untyped]  # gevent ships no type information
from gevent.event import Event  # type: ignore[import-untyped]
from locust.env import Environment

from mrtr_client import RetryPolicy
from mrtr_fleet_check.load import STOP_TIMEOUT, as_json, record_of
from mrtr_locust import McpCall, McpCallRecord, McpUser


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    with Path(plan["records"]).open("a", encoding="utf-8") as records:
        run(plan, records)
    return 0


def run(plan: dict[str, Any], records: TextIO) -> None:
    """The plan's users until SIGTERM, each finished call's record written to `records` at once."""

    def write(record: McpCallRecord) -> None:
        records.write(as_json(record_of(record)) + "\n")
        records.flush()

    user = McpUser.for_calls(
        [McpCall.from_mapping(call) for call in plan["calls"]],
        host=plan["host"],
        mcp_path=plan["mcp_path"],
        bearer_token=plan["token"],
        retry_policy=RetryPolicy(restart_unreadable_state=False),
        on_record=write,
        name="FleetCheckUser",
    )
    environment = Environment(user_classes=[user], stop_timeout=STOP_TIMEOUT)
    runner = environment.create_local_runner()
    stopping = Event()
    gevent.signal_handler(signal.SIGTERM, stopping.set)
    runner.start(plan["users"], spawn_rate=plan["users"])
    stopping.wait()
    runner.stop()  # graceful: each user ends its call first
    runner.quit()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
