"""Vault flows in the fleet's Redis: who started each one, who completed it, and when.

One hash per flow, `{prefix}vault:{flow id}`, with the expiry of the MCP state
that carries the flow id (the worker's state TTL), set once at the start: a
flow lives no longer than the state that started it. Fields:

* `owner`: the user who started the call (`User.label`);
* `status`: `pending`, then `completed`;
* `created_ms`, and on completion `completed_by`, `completed_ms`, `key_ref`
  (a fingerprint of the key, never the key: the demo's vault keeps only a
  reference, as a real one would keep a secret manager's id).

Completion is one Lua script, so a flow is completed once, by its owner, or not at all.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from enum import Enum
from typing import cast

import redis.asyncio as redis
from redis.exceptions import RedisError

from mrtr_worker import redis_link
from mrtr_worker.redis_link import RedisTarget
from mrtr_worker.vault.users import User

FLOW_ID = re.compile(r"^[A-Za-z0-9_-]{32,64}$")
"""What a flow id looks like (`secrets.token_urlsafe(24)`: 192 random bits, 32 characters)."""

StoreError = RedisError
"""Raised when Redis cannot be reached; callers answer with a clear error, never a crash."""

_COMPLETE = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 'foreign' end
if status ~= 'pending' then return 'already' end
redis.call('HSET', KEYS[1], 'status', 'completed', 'completed_by', ARGV[1], 'completed_ms', ARGV[2], 'key_ref', ARGV[3])
return 'completed'
"""


class Completion(Enum):
    """What an attempt to complete a flow did."""

    COMPLETED = "completed"
    ALREADY = "already"
    """Completed before, by its owner: nothing changes."""
    FOREIGN = "foreign"
    """The signed-in user is not the one who started the flow: refused."""
    MISSING = "missing"
    """Expired, or never existed."""


@dataclass(frozen=True)
class Flow:
    flow_id: str
    owner: User | None
    completed: bool
    completed_by: User | None
    completed_ms: int | None
    key_ref: str | None


def key_fingerprint(api_key: str) -> str:
    """A short reference to a key that does not reveal it (API keys are high-entropy secrets)."""
    return "sha256:" + hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def now_ms() -> int:
    return int(time.time() * 1000)


class VaultFlows:
    """The flows of one fleet, under the task store's key prefix."""

    def __init__(self, client: redis.Redis, *, prefix: str, ttl_ms: int) -> None:
        self.client = client
        self._prefix = prefix
        self.ttl_ms = ttl_ms

    @classmethod
    def connect(cls, target: RedisTarget | str, *, prefix: str, ttl_ms: int) -> VaultFlows:
        """A client that fails fast (a page or a call waits a few seconds at most for an unreachable Redis);
        with sentinels it follows the primary through a failover, like the task store."""
        where = RedisTarget(url=target) if isinstance(target, str) else target
        return cls(redis_link.connect(where, retries=3), prefix=prefix, ttl_ms=ttl_ms)

    def key(self, flow_id: str) -> str:
        return f"{self._prefix}vault:{flow_id}"

    async def close(self) -> None:
        await self.client.aclose()

    async def start(self, owner: User) -> str:
        """A new pending flow owned by `owner`; its id is unguessable and expires with the state's TTL."""
        flow_id = secrets.token_urlsafe(24)
        key = self.key(flow_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"owner": owner.label(), "status": "pending", "created_ms": now_ms()})
            pipe.pexpire(key, self.ttl_ms)
            await pipe.execute()
        return flow_id

    async def get(self, flow_id: str) -> Flow | None:
        if not FLOW_ID.match(flow_id):
            return None
        fields = cast(dict[str, str], await self.client.hgetall(self.key(flow_id)))
        if not fields.get("status"):
            return None
        completed_ms = fields.get("completed_ms")
        return Flow(
            flow_id=flow_id,
            owner=User.from_label(fields.get("owner", "")),
            completed=fields["status"] == "completed",
            completed_by=User.from_label(fields.get("completed_by", "")),
            completed_ms=int(completed_ms) if completed_ms else None,
            key_ref=fields.get("key_ref"),
        )

    async def complete(self, flow_id: str, user: User, api_key: str) -> Completion:
        """Record that `user` completed the flow with this key (its fingerprint only), if they own it."""
        if not FLOW_ID.match(flow_id):
            return Completion.MISSING
        outcome = await self.client.eval(
            _COMPLETE, 1, self.key(flow_id), user.label(), str(now_ms()), key_fingerprint(api_key)
        )
        return Completion(str(outcome))

    async def forget(self, flow_id: str) -> None:
        """Drop a flow the user declined or cancelled: its link stops working at once."""
        if FLOW_ID.match(flow_id):
            await self.client.delete(self.key(flow_id))
