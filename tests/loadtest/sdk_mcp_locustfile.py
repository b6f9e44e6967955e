"""`McpUser` against the SDK server of `sdk_mrtr_server.py` (not ours): the locustfile a user would write.

The run ends itself once the master (or the local runner) has counted `SEEN` calls of every entry,
so the driver waits for that instead of a clock (the failures seen then are logged for the driver);
`--run-time` only bounds a run that never gets there.
"""

from __future__ import annotations

import logging
from typing import Any

import gevent  # type: ignore[import-untyped]  # gevent ships no type information
from locust import events
from locust.env import Environment
from locust.runners import WorkerRunner

from mrtr_locust import McpCall, McpUser, structured_is

SEEN = 3
CALLS = ("greet", "greet by default", "add_up", "add_up wrong check")


class SdkServerUser(McpUser):
    calls = (
        McpCall(
            "greet",
            answers={"tests.loadtest.sdk_mrtr_server:ask_name": {"name": "Grace"}},
            check=structured_is({"greeting": "hello Grace"}),
        ),
        McpCall("greet", name="greet by default", check=structured_is({"greeting": "hello Ada"})),
        McpCall("add_up", {"numbers": [1, 2, 3]}, check=structured_is({"total": 6})),
        McpCall("add_up", {"numbers": [1, 2]}, check=structured_is({"total": 4}), name="add_up wrong check"),
    )


def stop_once_seen(environment: Environment, **kwargs: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return

    def watch() -> None:
        while min(environment.stats.get(name, "call").num_requests for name in CALLS) < SEEN:
            gevent.sleep(0.2)
        logging.info("every call seen %d times: stopping", SEEN)
        for error in environment.stats.errors.values():
            logging.info("failure of %s: %s", error.name, error.error)
        assert environment.runner is not None
        environment.runner.quit()

    gevent.spawn(watch)


hooks: Any = events  # its `EventHook.add_listener` is untyped
hooks.test_start.add_listener(stop_once_seen)
