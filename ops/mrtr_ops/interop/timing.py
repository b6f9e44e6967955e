"""What a hand-back costs each client: rounds and wall time of one `count_primes`, and the idle between rounds.

Every client here retries an `input_required` that carries only `requestState`
(a hand-back, no questions), but some wait first by rule: the TypeScript SDK a
fixed 250 ms, the MCP Python SDK (and FastMCP, which uses its driver) 50 ms
doubling to 250 ms. Ours retries at once (it waits only for the server's
`retryAfterMs`, which is 0 after a time slice). The idle time is measured from
the client's own HTTP exchanges: from one round's response to the next
request; ours from its trace (wall time less the rounds' own time).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mrtr_client import Client as MrtrClient
from mrtr_ops.interop import scenario
from mrtr_ops.interop.gaps import Anchor
from mrtr_ops.interop.verdict import Citation


@dataclass(frozen=True)
class PauseRule:
    """A client's documented wait before a retry that answers no question."""

    text: str
    anchor: Anchor | None

    def schedule_ms(self, hand_backs: int) -> float | None:
        """What the rule alone adds over `hand_backs` retries (None: the client does not wait by rule)."""
        return None


@dataclass(frozen=True)
class FixedPause(PauseRule):
    pause_ms: float = 0.0

    def schedule_ms(self, hand_backs: int) -> float | None:
        return self.pause_ms * hand_backs


@dataclass(frozen=True)
class DoublingPause(PauseRule):
    first_ms: float = 0.0
    cap_ms: float = 0.0

    def schedule_ms(self, hand_backs: int) -> float | None:
        return float(sum(min(self.first_ms * 2**i, self.cap_ms) for i in range(hand_backs)))


TS_RULE = FixedPause(
    "a fixed 250 ms before every retry that answers no question (`REQUEST_STATE_ONLY_LEG_PACING_MS`)",
    Anchor("npm", "@modelcontextprotocol/client/dist/src-*.mjs", "const REQUEST_STATE_ONLY_LEG_PACING_MS = 250;"),
    pause_ms=250,
)
SDK_RULE = DoublingPause(
    "50 ms, doubling to a 250 ms cap, before each retry that answers no question",
    Anchor("venv", "mcp/client/_input_required.py", "_STATE_ONLY_BACKOFF_INITIAL_SECONDS = 0.05"),
    first_ms=50,
    cap_ms=250,
)
FASTMCP_RULE = DoublingPause(
    "the MCP Python SDK's driver: 50 ms doubling to 250 ms",
    Anchor("venv", "fastmcp/client/client.py", "return await run_input_required_driver("),
    first_ms=50,
    cap_ms=250,
)
OUR_RULE = PauseRule("none: retries at once, waiting only for the server's `retryAfterMs` (0 after a slice)", None)

RULES: dict[str, PauseRule] = {"ts-client": TS_RULE, "mcp-sdk": SDK_RULE, "fastmcp": FASTMCP_RULE}


@dataclass(frozen=True)
class Timing:
    """One client's `count_primes(limit=PRIMES_LIMIT)`, measured."""

    client: str
    rounds: int
    wall_ms: float
    idle_ms: float
    """Time between rounds: from a round's answer to the client's next request, summed."""
    rule: PauseRule
    citation: Citation | None = None

    @property
    def hand_backs(self) -> int:
        return max(0, self.rounds - 1)

    @property
    def idle_per_hand_back_ms(self) -> float:
        return self.idle_ms / self.hand_backs if self.hand_backs else 0.0


def from_record(client: str, record: Mapping[str, Any] | None, rule: PauseRule) -> Timing | None:
    """A driver's `handback` record, timed from its own HTTP exchanges (None if it did not complete)."""
    if record is None or not record.get("ok"):
        return None
    rounds = [x for x in record.get("exchanges", []) if x.get("method") == "tools/call"]
    if not rounds or any(x.get("answeredMs") is None for x in rounds):
        return None
    idle = sum(max(0.0, float(b["startedMs"]) - float(a["answeredMs"])) for a, b in _pairs(rounds))
    return Timing(client, len(rounds), float(record["elapsedMs"]), idle, rule)


def _pairs(items: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    return list(itertools.pairwise(items))


def ours(mcp_url: str) -> Timing:
    """Our client (`mrtr_client`) on the same call, timed from its trace."""
    with MrtrClient(mcp_url) as client:
        started = time.perf_counter()
        done = client.call_tool("count_primes", {"limit": scenario.PRIMES_LIMIT})
        wall = (time.perf_counter() - started) * 1000
    if done.structured != {"count": scenario.primes(scenario.PRIMES_LIMIT)}:
        raise RuntimeError(f"our own client got a wrong count: {done.structured}")
    hops = done.trace.hops
    return Timing("mrtr_client (ours)", len(hops), wall, max(0.0, wall - sum(h.elapsed_ms for h in hops)), OUR_RULE)
