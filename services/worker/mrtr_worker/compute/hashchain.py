"""`hash_chain`: SHA-256 applied `iterations` times to a seed; the checkpoint is the digest so far.

The seed is hashed as UTF-8, lone surrogates passed through (JSON can carry
them, `"\\ud800"`): every seed a client can send has one digest, never an
encoding error.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from mrtr_worker.compute.computation import Computation, State

DEFAULT_CHUNK = 100_000


def initial(arguments: dict[str, Any]) -> State:
    seed = str(arguments["seed"])
    return {
        "digest": hashlib.sha256(_seed_bytes(seed)).hexdigest(),
        "done": 1,
        "iterations": int(arguments["iterations"]),
        "chunk": int(arguments.get("chunk") or DEFAULT_CHUNK),
    }


def _seed_bytes(seed: str) -> bytes:
    return seed.encode("utf-8", "surrogatepass")


def step(state: State) -> State:
    digest = bytes.fromhex(state["digest"])
    todo = min(state["chunk"], state["iterations"] - state["done"])
    sha256 = hashlib.sha256
    for _ in range(todo):
        digest = sha256(digest).digest()
    return {**state, "digest": digest.hex(), "done": state["done"] + todo}


def done(state: State) -> bool:
    return bool(state["done"] >= state["iterations"])


def result(state: State) -> dict[str, Any]:
    return {"digest": state["digest"], "iterations": state["iterations"]}


def total_steps(state: State) -> int:
    remaining: int = max(0, state["iterations"] - state["done"])
    chunk: int = state["chunk"]
    return math.ceil(remaining / chunk)


def reference(seed: str, iterations: int) -> str:
    """An independent straight loop, for checking answers."""
    digest = _seed_bytes(seed)
    for _ in range(iterations):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


HASH_CHAIN = Computation("hash_chain", initial, step, done, result, total_steps)
