"""One run of the check: version 1 behind the proxy, the probes, the load, the rolling update to version 2.

The order matters: the probes that need two instances of one version run before the update; a state
sealed by version 1 is kept and shown to version 2 after it; the load starts before the update and
runs through it, so calls begun on version 1 finish on version 2.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from mrtr_fleet_check import probes
from mrtr_fleet_check.load import Load
from mrtr_fleet_check.proxy import Proxy, start_proxy
from mrtr_fleet_check.scenario import Call, Scenario, ScenarioError
from mrtr_fleet_check.servers import Instance, ServerFailed, start_instance
from mrtr_fleet_check.summary import Summary, call_key, compare
from mrtr_fleet_check.verdict import Observations, name_verdict


@dataclass(frozen=True)
class Options:
    v1: str
    v2: str
    instances: int
    scenario: Scenario
    work_dir: Path
    duration: float = 20.0
    users: int = 6
    mcp_path: str = "/mcp"
    grace: float = 15.0
    """Seconds a stopped instance has between SIGTERM and SIGKILL, as a pod's termination grace period."""
    ready_timeout: float = 60.0


class Fleet:
    """The running instances and the proxy; `roll` replaces every instance by version 2, one by one."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.instances: list[Instance] = []
        self.retired: list[Instance] = []
        self.proxy: Proxy | None = None

    def start(self) -> None:
        for n in range(self.options.instances):
            self.instances.append(start_instance(self.options.v1, 1, n, self.options.work_dir))
        for instance in self.instances:
            instance.wait_ready(self.options.ready_timeout)
        self.proxy = start_proxy([i.url for i in self.instances], self.options.work_dir, self.options.ready_timeout)

    def mcp(self, instance: Instance) -> str:
        return instance.url + self.options.mcp_path

    def roll(self) -> None:
        """As a rolling update: start v2, put it in rotation, take a v1 out of rotation, SIGTERM it with grace."""
        assert self.proxy is not None
        for n, old in enumerate(list(self.instances)):
            new = start_instance(self.options.v2, 2, n, self.options.work_dir)
            self.instances.append(new)
            new.wait_ready(self.options.ready_timeout)
            self.proxy.set_backends([i.url for i in self.instances])
            self.instances.remove(old)
            self.proxy.set_backends([i.url for i in self.instances])
            self.retired.append(old)
            old.stop(self.options.grace)

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for instance in self.instances + self.retired:
            instance.stop(self.options.grace)


@contextmanager
def running(options: Options) -> Iterator[Fleet]:
    fleet = Fleet(options)
    with ExitStack() as stack:
        stack.callback(fleet.stop)
        fleet.start()
        yield fleet


def _wait_for_calls(load: Load, count: int, timeout: float) -> None:
    """Until the load has finished `count` calls: the update starts with calls in flight, not before any ran."""
    deadline = time.monotonic() + timeout
    while load.count() < count:
        if time.monotonic() >= deadline:
            raise ServerFailed(f"the load finished no {count} calls within {timeout:g} s; see the instances' logs")
        time.sleep(0.05)


def _take_references(
    references: dict[str, dict[str, probes.Answer]], version: str, url: str, calls: Sequence[Call], token: str | None
) -> None:
    """One instance's answer to each call, every round on that instance: what the load's answers are held to."""
    for call in calls:
        references.setdefault(call_key(call.tool, call.arguments), {})[version] = probes.reference_answer(
            url, call, token
        )


def run_check(options: Options) -> Summary:
    if options.instances < 2:
        raise ValueError("--instances must be at least 2: a state must be able to move between instances")
    scenario = options.scenario
    token = scenario.tokens[0] if scenario.tokens else None
    calls = scenario.calls
    references: dict[str, dict[str, probes.Answer]] = {}
    with running(options) as fleet, httpx.Client(timeout=60.0) as http:
        first, second = (fleet.mcp(i) for i in fleet.instances[:2])
        protocol = probes.protocol_probe(http, first, token)
        if protocol.speaks_current and (unusable := probes.missing_tools(first, calls, token)):
            raise ScenarioError(unusable)
        across = probes.across_instances(http, first, second, calls, token)
        tampered = probes.tamper(http, first, calls, token)
        foreign = probes.foreign_principal(http, first, calls, scenario.tokens)
        before_upgrade = probes.seal_on(http, first, calls, token)
        _take_references(references, "1", first, calls, token)
        assert fleet.proxy is not None
        started = time.monotonic()
        load = Load(fleet.proxy.url + options.mcp_path, scenario, users=options.users).start()
        try:
            _wait_for_calls(load, options.users, timeout=max(options.duration, 60.0))
            fleet.roll()
            newest = fleet.mcp(fleet.instances[0])
            after = (
                probes.NO_STATE if before_upgrade is None else probes.present(http, newest, before_upgrade, token=token)
            )
            _take_references(references, "2", newest, calls, token)
            load.stop(after=options.duration - (time.monotonic() - started))
        finally:
            load.stop()
            records = load.join()
    mismatches, lost = compare(records, calls, references)
    observations = Observations(protocol, across, after, tampered, foreign, tuple(mismatches), tuple(lost))
    return Summary(scenario.name, records, observations, name_verdict(observations))
