"""The pack on a real fleet: the round-robin proxy in front of two local workers that serve it by name.

Short time slices make the search hop between the workers; every answer is exact,
every step runs exactly once, and the tool that asks carries its answers from round to round.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mrtr_client import Client, ScriptedInputs, TaskPolicy
from mrtr_example_pack.collatz import KNOWN_LONGEST, LONGEST_COLLATZ
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_protocol.rounds import HAND_BACK_REASONS

pytestmark = pytest.mark.slow

SHORT_SLICES = {"MRTR_WORKER_MIN_SLICE_MS": "50", "MRTR_WORKER_MAX_SLICE_MS": "100", "MRTR_WORKER_TASK_SLICE_MS": "200"}
LIMIT, CHUNK = 100_000, 5_000  # 20 steps of some 35 ms: several 100 ms slices


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """What `scripts/cluster --workers 2 --packs collatz --max-slice-ms 100` runs (with Redis, for tasks)."""
    work_dir: Path = tmp_path_factory.mktemp("collatz-cluster")
    config = ClusterConfig(workers=2, port=0, tool_packs=("collatz",), work_dir=work_dir, worker_env=SHORT_SLICES)
    started = LocalCluster(config).start()
    yield started
    started.stop()


def steps_run(cluster: LocalCluster) -> float:
    return sum(
        cluster.worker_metric(i, "mrtr_worker_compute_steps_total", tool="longest_collatz") for i in cluster.workers
    )


def test_the_search_hops_between_instances_and_every_step_runs_once(cluster: LocalCluster) -> None:
    before = steps_run(cluster)
    with Client(cluster.mcp_url) as client:
        done = client.call_tool("longest_collatz", {"limit": LIMIT, "chunk": CHUNK})
    start, steps = KNOWN_LONGEST[LIMIT]
    assert done.structured == {"start": start, "steps": steps}
    planned = LONGEST_COLLATZ.total_steps(LONGEST_COLLATZ.initial({"limit": LIMIT, "chunk": CHUNK}))
    assert done.result["_meta"]["mrtr-cluster.dev/compute"]["steps"] == planned == 20
    assert steps_run(cluster) - before == planned
    assert any(hop.reason in HAND_BACK_REASONS for hop in done.trace.hops)
    assert set(done.trace.instances) == set(cluster.workers)  # handed back on one, continued on the other


def test_the_walk_asks_twice_and_carries_the_first_answer_to_the_last_round(cluster: LocalCluster) -> None:
    answers = ScriptedInputs(forms={"start": {"start": 27}, "show_path": {"show": True}})
    with Client(cluster.mcp_url, answers) as client:
        done = client.call_tool("collatz_walk")
    assert [q.key for q in done.trace.questions] == ["start", "show_path"]
    assert done.trace.reasked == []
    assert {k: done.structured[k] for k in ("start", "steps", "peak")} == {"start": 27, "steps": 111, "peak": 9232}
    path = done.structured["path"]
    assert (path[0], path[-1], len(path)) == (27, 1, 112)
    assert set(done.trace.instances) == set(cluster.workers)  # three rounds, round robin over two workers


def test_an_answer_that_breaks_the_form_is_asked_again(cluster: LocalCluster) -> None:
    class FirstZeroThen27:
        """Answers 0 (below the form's minimum) first, then 27; declines to see the path."""

        def __init__(self) -> None:
            self.starts = [0, 27]

        def capabilities(self) -> dict[str, Any]:
            return {"elicitation": {"form": {}}}

        def answer(self, key: str, request: Mapping[str, Any]) -> dict[str, Any]:
            if key == "start":
                return {"action": "accept", "content": {"start": self.starts.pop(0)}}
            return {"action": "decline"}

    with Client(cluster.mcp_url, FirstZeroThen27()) as client:
        done = client.call_tool("collatz_walk")
    assert [q.key for q in done.trace.questions] == ["start", "start", "show_path"]
    assert done.structured == {"start": 27, "steps": 111, "peak": 9232}  # declined: no path


def test_the_search_runs_as_a_task_with_the_same_answer(cluster: LocalCluster) -> None:
    with Client(cluster.mcp_url, ScriptedInputs(), task_policy=TaskPolicy(max_wait=120, push=False)) as client:
        done = client.call_tool("longest_collatz", {"limit": LIMIT, "chunk": CHUNK}, task=True)
    start, steps = KNOWN_LONGEST[LIMIT]
    assert done.structured == {"start": start, "steps": steps}
    assert done.task_id is not None
    assert [hop.reason for hop in done.trace.hops] == ["task"]
    assert done.trace.polls[-1].status == "completed"
