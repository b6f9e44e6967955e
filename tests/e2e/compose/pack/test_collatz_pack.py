"""A tool pack of one's own on the compose fleet: the example pack's image, FROM the worker image, served by name.

Run by `scripts/compose-e2e` on the fleet `scripts/up --with-pack examples/collatz-pack` starts
(short time slices, tokens required), through the proxy's published port.
"""

from __future__ import annotations

from mrtr_client import Client, ScriptedInputs, TaskPolicy
from mrtr_example_pack.collatz import KNOWN_LONGEST
from mrtr_protocol.rounds import HAND_BACK_REASONS
from tests.e2e.compose.conftest import ServiceContainers

LIMIT, CHUNK = 300_000, 15_000
"""20 steps, some 1.7 s here: several of the fleet's 300 ms slices even on a machine three times as fast."""


def test_every_worker_runs_the_pack_image_of_its_version(containers: ServiceContainers) -> None:
    """Version 1 and 2 each have their pack image (after `scripts/compose-e2e`'s upgrade, the fleet is version 2)."""
    images = {service: {c.attrs["Config"]["Image"] for c in containers(service)} for service in ("worker", "worker-v2")}
    assert images["worker"] <= {"mrtr-worker-collatz:v1"}
    assert images["worker-v2"] <= {"mrtr-worker-collatz:v2"}
    assert sum(len(containers(service)) for service in ("worker", "worker-v2")) >= 2


def test_the_search_hops_across_containers_and_is_exact(lb_url: str, token: str) -> None:
    with Client(f"{lb_url}/mcp", token=token) as client:
        done = client.call_tool("longest_collatz", {"limit": LIMIT, "chunk": CHUNK})
    start, steps = KNOWN_LONGEST[LIMIT]
    assert done.structured == {"start": start, "steps": steps}
    assert done.result["_meta"]["mrtr-cluster.dev/compute"]["steps"] == LIMIT // CHUNK
    assert any(hop.reason in HAND_BACK_REASONS for hop in done.trace.hops)
    assert len(done.trace.instances) >= 2


def test_the_walk_asks_and_carries_its_answers(lb_url: str, token: str) -> None:
    answers = ScriptedInputs(forms={"start": {"start": 27}, "show_path": {"show": False}})
    with Client(f"{lb_url}/mcp", answers, token=token) as client:
        done = client.call_tool("collatz_walk")
    assert [q.key for q in done.trace.questions] == ["start", "show_path"]
    assert done.structured == {"start": 27, "steps": 111, "peak": 9232}
    assert len(done.trace.instances) >= 2


def test_the_search_runs_as_a_task_on_the_fleets_redis(lb_url: str, token: str) -> None:
    policy = TaskPolicy(max_wait=120, push=False)
    with Client(f"{lb_url}/mcp", ScriptedInputs(), token=token, task_policy=policy) as client:
        done = client.call_tool("longest_collatz", {"limit": LIMIT, "chunk": CHUNK}, task=True)
    start, steps = KNOWN_LONGEST[LIMIT]
    assert done.structured == {"start": start, "steps": steps}
    assert [hop.reason for hop in done.trace.hops] == ["task"]
