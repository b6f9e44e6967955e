"""`estimate_pi`: a seeded Monte Carlo estimate of pi whose generator state is part of the checkpoint.

The generator is xorshift64* with its 64-bit state kept in the checkpoint, so
a run resumed on any instance draws exactly the numbers an uninterrupted run
would. With `ask_to_refine`, the computation asks the user midway (once the
requested samples are drawn) whether to double them: a question on the same
path as every other hand-back.
"""

from __future__ import annotations

import math
from typing import Any

from mrtr_worker.compute.computation import Computation, Question, State

DEFAULT_CHUNK = 50_000
_MASK = (1 << 64) - 1
_SCALE = float(1 << 53)


def _seed_state(seed: int) -> int:
    # splitmix64 of the seed: never zero, well mixed even for small seeds.
    z = (seed + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) or 1


def initial(arguments: dict[str, Any]) -> State:
    return {
        "rng": _seed_state(int(arguments.get("seed", 0))),
        "drawn": 0,
        "inside": 0,
        "target": int(arguments["samples"]),
        "chunk": int(arguments.get("chunk") or DEFAULT_CHUNK),
        "ask": bool(arguments.get("ask_to_refine", False)),
        "asked": False,
    }


def step(state: State) -> State:
    x = state["rng"]
    inside = 0
    todo = min(state["chunk"], state["target"] - state["drawn"])
    for _ in range(todo):
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        u = ((x * 0x2545F4914F6CDD1D) & _MASK) >> 11
        x ^= x >> 12
        x ^= (x << 25) & _MASK
        x ^= x >> 27
        v = ((x * 0x2545F4914F6CDD1D) & _MASK) >> 11
        a, b = u / _SCALE, v / _SCALE
        inside += a * a + b * b < 1.0
    return {**state, "rng": x, "drawn": state["drawn"] + todo, "inside": state["inside"] + inside}


def done(state: State) -> bool:
    return bool(state["drawn"] >= state["target"] and (not state["ask"] or state["asked"]))


def result(state: State) -> dict[str, Any]:
    estimate = 4 * state["inside"] / state["drawn"] if state["drawn"] else 0.0
    return {"estimate": estimate, "samples": state["drawn"], "inside": state["inside"]}


def total_steps(state: State) -> int:
    remaining: int = max(0, state["target"] - state["drawn"])
    chunk: int = state["chunk"]
    return math.ceil(remaining / chunk)


def _refined(state: State, content: dict[str, Any] | None) -> State:
    double = bool(content and content.get("refine"))
    return {**state, "asked": True, "target": state["target"] * 2 if double else state["target"]}


def question(state: State) -> Question | None:
    if not state["ask"] or state["asked"] or state["drawn"] < state["target"]:
        return None
    from mrtr_worker.tool_api import inputs  # here, not at the top: the step pool imports this module for `step`

    so_far = 4 * state["inside"] / state["drawn"]
    request = inputs.form(
        f"Estimate after {state['drawn']} samples: {so_far:.5f}. Double the samples to refine it?",
        {"refine": {"type": "boolean", "title": "Refine", "default": False}},
        ["refine"],
    )
    return Question("refine", request, _refined)


ESTIMATE_PI = Computation("estimate_pi", initial, step, done, result, total_steps, question)
