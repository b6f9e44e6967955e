"""The computation on its own: exact answers; a run resumed at every step boundary is the run straight through."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from mrtr_example_pack.collatz import KNOWN_LONGEST, LONGEST_COLLATZ, chain_steps
from mrtr_example_pack.pack import walk
from mrtr_worker.plugin import run_uninterrupted


@pytest.mark.parametrize("limit", [limit for limit in KNOWN_LONGEST if limit <= 100_000])
def test_the_search_finds_the_published_record_holders(limit: int) -> None:
    start, steps = KNOWN_LONGEST[limit]
    assert run_uninterrupted(LONGEST_COLLATZ, {"limit": limit})[0] == {"start": start, "steps": steps}


def test_a_run_resumed_from_every_checkpoint_is_the_same_run() -> None:
    """What a hand-back does: the state goes through JSON (sealed in requestState) and another process steps it."""
    arguments = {"limit": 12_345, "chunk": 1_000}
    state, steps = LONGEST_COLLATZ.initial(arguments), 0
    planned = LONGEST_COLLATZ.total_steps(state)
    while not LONGEST_COLLATZ.done(state):
        state = json.loads(json.dumps(LONGEST_COLLATZ.step(state)))
        steps += 1
    assert steps == planned == 13
    assert LONGEST_COLLATZ.result(state) == run_uninterrupted(LONGEST_COLLATZ, arguments)[0]


def test_a_walk_follows_the_map_to_one() -> None:
    path = walk(27)
    assert (len(path) - 1, max(path)) == (111, 9232)  # 27's famous excursion
    assert chain_steps(27) == 111
    assert path[0] == 27
    assert path[-1] == 1
    assert all(b == (3 * a + 1 if a % 2 else a // 2) for a, b in itertools.pairwise(path))


def test_the_computation_module_imports_no_sdk_and_no_web_stack() -> None:
    """The step pool's processes import it to run `step`: it must stay light."""
    heavy = ("mcp", "mcp_types", "fastapi", "starlette", "uvicorn", "pydantic", "redis", "mrtr_worker.packs")
    probe = f"import sys, mrtr_example_pack.collatz\nprint([m for m in sys.modules if m.startswith({heavy!r})])"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
