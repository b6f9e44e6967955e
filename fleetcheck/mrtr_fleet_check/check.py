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
from mrtr_fleet_check.containers import ContainerFleet, Images
from mrtr_fleet_check.fleet import Fleet, Layout, ProcessFleet
from mrtr_fleet_check.instance import ServerFailed
from mrtr_fleet_check.load import Load
from mrtr_fleet_check.scenario import Call, Scenario, ScenarioError
from mrtr_fleet_check.servers import Commands
from mrtr_fleet_check.summary import Summary, call_key, compare
from mrtr_fleet_check.verdict import Observations, name_verdict


@dataclass(frozen=True)
class Options:
    servers: Commands | Images
    """How to start each version: command lines (local processes) or images (containers on Docker)."""
    instances: int
    scenario: Scenario
    work_dir: Path
    duration: float = 20.0
    users: int = 6
    mcp_path: str = "/mcp"
    grace: float = 15.0
    """Seconds a stopped instance has between SIGTERM and SIGKILL, as a pod's termination grace period."""
    ready_timeout: float = 60.0


@contextmanager
def running(options: Options) -> Iterator[Fleet]:
    layout = Layout(options.instances, options.work_dir, options.mcp_path, options.grace, options.ready_timeout)
    servers = options.servers
    fleet: Fleet = ContainerFleet(layout, servers) if isinstance(servers, Images) else ProcessFleet(layout, servers)
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
        load = Load(
            fleet.proxy.url, options.mcp_path, scenario, users=options.users, work_dir=options.work_dir / "load"
        )
        load.start()
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
