"""`McpUser` in Locust's library mode, as a checking tool drives it: `python -m tests.loadtest.mcp_user_library URL`.

Builds the user with `McpUser.for_calls` from plain data, runs it on a local runner and stops once the
records show every kind of call the test reads (a hand-back, a task followed to its end, a question
answered); `BOUND_S` only ends a run that never gets there. Prints one JSON object: Locust's stats
entries and each call's record.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import gevent  # type: ignore[import-untyped]  # gevent ships no type information
from locust.env import Environment

from mrtr_locust import McpCall, McpCallRecord, McpUser
from mrtr_locust.expected import PRIME_COUNTS

BOUND_S = 240
LIMIT = 20_000_000
SCENARIO: list[dict[str, Any]] = [
    {"tool": "count_primes", "arguments": {"limit": LIMIT, "segment": 1_000_000}, "expect": {"structured": {}}},
    {"tool": "count_primes", "arguments": {"limit": LIMIT, "segment": 1_000_000}, "task": True, "name": "task primes"},
    {"tool": "estimate_pi", "arguments": {"samples": 20_000, "seed": 3, "chunk": 5_000, "ask_to_refine": True}},
    {"tool": "count_primes", "arguments": {"limit": 1_000_000}, "expect": {"text": "no such text"}, "name": "wrong"},
    {"tool": "estimate_pi", "arguments": {"samples": 20_000, "seed": 3, "chunk": 5_000, "ask_to_refine": True}},
    {"tool": "no_such_tool", "name": "unknown"},
    {"tool": "count_primes", "arguments": {"limit": "many"}, "name": "bad arguments"},
]
SCENARIO[4].update(task=True, name="task pi")
SCENARIO[0]["expect"]["structured"] = {"count": PRIME_COUNTS[LIMIT]}
SCENARIO[1]["expect"] = {"structured": {"count": PRIME_COUNTS[LIMIT]}}
SCENARIO[2]["answers"] = {"refine": {"refine": False}}


CALLS = [McpCall.from_mapping(call) for call in SCENARIO]


def enough(records: list[McpCallRecord]) -> bool:
    rounds = {kind for record in records for kind in record.rounds}
    names = {record.name for record in records}
    seen = {"round:hand_back", "round:input_required", "task:create"} <= rounds
    return seen and "task:update" in rounds and names == {call.label for call in CALLS}


def main(host: str) -> None:
    records: list[McpCallRecord] = []
    user = McpUser.for_calls(CALLS, host=host, on_record=records.append)
    environment = Environment(user_classes=[user], host=host)
    runner = environment.create_local_runner()
    runner.start(3, spawn_rate=3)
    with gevent.Timeout(BOUND_S, False):
        while not enough(records):
            gevent.sleep(0.1)
    runner.quit()
    stats = [
        {"type": e.method, "name": e.name, "requests": e.num_requests, "failures": e.num_failures}
        for e in environment.stats.entries.values()
    ]
    errors = [
        {"name": e.name, "error": str(e.error), "count": e.occurrences} for e in environment.stats.errors.values()
    ]
    calls = [
        {
            "name": r.name,
            "rounds": r.rounds,
            "questions": r.questions,
            "instances": r.instances,
            "answer": r.answer,
            "error": r.error,
            "code": r.error_code,
            "task_id": None if r.result is None else r.result.task_id,
        }
        for r in records
    ]
    print(json.dumps({"enough": enough(records), "stats": stats, "errors": errors, "calls": calls}))


if __name__ == "__main__":
    main(sys.argv[1])
