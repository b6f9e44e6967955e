"""What a resumable computation is: an initial state, a step, a done test and a result.

The state is a small JSON object: it is what travels (sealed) in
`requestState` between instances, so everything a computation needs to
continue, random generator state included, lives in it. `step` must be a
module-level pure function (it runs in a worker process of the pool) and
should take tens of milliseconds, since shedding happens only between steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the step pool's processes import this module: they need no wire types
    from mrtr_worker.tool_api.inputs import InputRequestWire

State = dict[str, Any]


@dataclass(frozen=True)
class Question:
    """Something a computation asks the user midway, and how the answer changes its state."""

    key: str
    request: InputRequestWire
    apply: Callable[[State, dict[str, Any] | None], State]
    """Given the accepted form content (None when declined), the state to continue from."""


@dataclass(frozen=True)
class Computation:
    name: str
    initial: Callable[[dict[str, Any]], State]
    step: Callable[[State], State]
    done: Callable[[State], bool]
    result: Callable[[State], dict[str, Any]]
    total_steps: Callable[[State], int]
    """Steps one uninterrupted run takes from the initial state (for progress and for checks)."""
    question: Callable[[State], Question | None] = lambda state: None
    """A question to ask at this step boundary, if any (asked once; the answer is folded into the state)."""


def run_uninterrupted(computation: Computation, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The reference: every step in one process, no checkpoints. Returns the result and the steps taken."""
    state = computation.initial(arguments)
    steps = 0
    while not computation.done(state):
        state = computation.step(state)
        steps += 1
    return computation.result(state), steps
