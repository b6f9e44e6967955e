"""A locustfile for the tests only: the suite's own user and hooks, with a task that makes no request.

Its users start, run their task and never call the server, so the run ends
with no request counted: the suite must fail it (a run that checked nothing
did not pass).
"""

from __future__ import annotations

from locust import task

from mrtr_locust import plugin
from mrtr_locust.users import MrtrUser


class IdleUser(MrtrUser):
    tasks_per_second = 10.0
    p95_option = "mrtr_p95_short_ms"

    @task
    def idle(self) -> None:
        """No call: nothing reaches `measure`, so nothing is counted."""


plugin.install()
