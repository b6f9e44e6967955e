"""Worker configuration, read once from the environment at start-up.

Every instance of the fleet is configured the same way except for its
identity; the key ring and audience must match across the fleet or a state
sealed on one instance cannot be opened on another.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from mrtr_worker.compute.policy import SheddingSettings
from mrtr_worker.packs.registry import check_names
from mrtr_worker.redis_link import RedisTarget, WaitPolicy, parse_sentinels
from mrtr_worker.sealing.layout import READABLE_FORMATS

SUPPORTED_VERSIONS = (1, 2)
"""Worker behaviour versions (see the rolling-upgrade notes in the README)."""


def _default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class WorkerSettings(BaseSettings):
    """Settings of one worker instance (env prefix `MRTR_WORKER_`)."""

    model_config = SettingsConfigDict(env_prefix="MRTR_WORKER_", extra="forbid")

    instance_id: str = Field(default_factory=_default_instance_id, min_length=1, max_length=128)
    version: int = 1
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)

    keyring: SecretStr | None = None
    """The key ring as JSON text (see `mrtr_worker.sealing.keyring`); or use `keyring_file`."""
    keyring_file: Path | None = None
    audience: str = Field(default="mrtr-fleet", min_length=1)
    """Service identity bound into every sealed state; the whole fleet shares it."""

    allow_anonymous: bool = False
    """Serve calls without a bearer token (their states are bound to nobody); the local dev cluster turns it on."""
    jwt_public_key_file: Path | None = None
    """PEM public key of the token issuer (the development issuer, or any issuer with one static key)."""
    jwt_jwks_url: str | None = None
    """JWKS URL of a real identity provider (keys fetched and cached); instead of `jwt_public_key_file`."""
    jwt_issuer: str = "mrtr-dev-issuer"
    jwt_audience: str = "mrtr-fleet"
    jwt_algorithms: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["EdDSA", "ES256", "RS256"])
    required_scopes: Annotated[list[str], NoDecode] = Field(default_factory=list)
    admin_token: SecretStr | None = None
    """Bearer token the `/admin/*` endpoints require; or use `admin_token_file`. Unset: they are open."""
    admin_token_file: Path | None = None

    state_ttl_seconds: float = Field(default=600.0, gt=0)
    state_max_bytes: int = Field(default=64 * 1024, ge=256)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Request body on `/mcp`; past it HTTP 413 with a JSON-RPC error naming the limit."""
    max_head_bytes: int = Field(default=32 * 1024, ge=1024)
    """Request line and headers together (nginx's `large_client_header_buffers 4 8k`); past it HTTP 431, unread."""
    max_headers: int = Field(default=100, ge=8)
    """Header fields in one request (Apache's `LimitRequestFields`, HAProxy's `tune.http.maxhdr`); past it 431."""
    head_timeout_seconds: float = Field(default=10.0, gt=0)
    """Time to send a whole request head, from the connection's opening or the head's first byte (HAProxy's
    `timeout http-request`); past it HTTP 408 and the connection closes (a connection that sent nothing just closes)."""
    body_timeout_seconds: float = Field(default=60.0, gt=0)
    """Longest pause between two reads of a request body (nginx's `client_body_timeout`); past it 408 and close."""
    max_connections: int = Field(default=1024, ge=1)
    """Open connections to this worker; a connection past it gets HTTP 503 for its first request, then closes."""
    keep_alive_seconds: int = Field(default=5, ge=1)
    """An idle keep-alive connection closes after this long (uvicorn's `timeout_keep_alive`)."""
    max_input_responses: int = Field(default=16, ge=1)
    """Answers one retry may carry; the tools ask a few questions per round."""
    max_answer_bytes: int = Field(default=16 * 1024, ge=256)
    """Size of one answer (JSON); a form or a sampled text is far smaller."""

    fast_resume: bool = True
    """Serve a computation's resumed round (`tools/call` with only its `requestState`) on the resume fast path
    (`mrtr_worker.edge.fast_resume`): the same checks and answer without the SDK's generic dispatch, about a fifth of
    a hop's worker CPU. Anything unusual still takes the SDK's path; off (`MRTR_WORKER_FAST_RESUME=false`)
    sends every request there, for comparison."""

    tool_packs: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["demo", "compute"])
    """The packs this instance serves: built-in (`mrtr_worker.packs.registry.BUILTIN_PACKS`) or installed through
    the entry-point group `mrtr_worker.tool_packs` (docs/plugins.md). Every instance of a fleet serves the same."""
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    )
    """`Host` header values accepted on /mcp (DNS-rebinding protection); `*` matches any port."""
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    )
    log_level: str = "INFO"
    write_state_format: int = Field(default=1, ge=1)
    """State layout this instance writes (version 2 can write 2 once the whole fleet reads it)."""

    shedding: bool = True
    """Hand long computations back under load, on drain and after a time slice (see `compute.policy`)."""
    max_concurrent_computations: int = Field(default=2, ge=1, le=64)
    min_slice_ms: int = Field(default=200, ge=0)
    max_slice_ms: int = Field(default=2000, ge=0)
    """A computation yields after this long even on an idle worker; 0 turns the time slice off."""
    priority_after_hops: int = Field(default=4, ge=1)
    queue_wait_ms: int = Field(default=0, ge=0)
    """A prioritized call queued this long for a slot moves on (within its budget of moves); 0: it waits."""
    straggler_ratio: float = Field(default=0.5, ge=0, lt=1)
    """Hand a computation on when this instance steps it under this fraction of the rate it saw elsewhere; 0: off."""
    straggler_at_admission: bool = True
    """An instance that learned it is slow against its peers hands rounds on before running a step (see
    `compute.standing`); false leaves only the per-slice rule (a measured slice here before a call moves)."""
    step_aside: bool = False
    """A worker that knows it is slow and hands every round on answers 429 on /readyz until a probe is due, so
    the proxy's health check takes it out of rotation and its share spreads over the others (see
    `Standing.aside`); false keeps it in rotation, bouncing each round to the next instance in the pool."""
    drain_timeout_seconds: int = Field(default=30, ge=1)
    """Upper bound on a graceful stop; a drain normally takes one step."""

    public_url: str = Field(default="http://127.0.0.1:8080", pattern=r"^https?://[^/?#]+/?$")
    """The fleet's public base URL (the proxy, as users reach it): the vault page's links are built on it, so
    any worker serves any flow through the same address as /mcp. Default: what the local cluster and compose publish."""

    redis_url: SecretStr | None = None
    """The task store (`redis://host:port/db`); unset, the worker serves everything but tasks and does not
    advertise the tasks extension. A secret because the URL may carry a password."""
    redis_sentinels: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Sentinels (`host:port,...`) to ask for the primary of `redis_sentinel_service`, instead of `redis_url`:
    the store then follows a failover (see `mrtr_worker.redis_link`)."""
    redis_sentinel_service: str = Field(default="mrtr", min_length=1, max_length=64)
    """The name the sentinels know the fleet's Redis by (`sentinel monitor NAME ...`)."""
    redis_wait_replicas: int = Field(default=0, ge=0, le=16)
    """Replicas every task write waits for (Redis `WAIT`) before it is acknowledged; 0 (the default): none.
    With Sentinel, 1 keeps an acknowledged write through a failover that promotes a replica which has it."""
    redis_wait_timeout_ms: int = Field(default=500, ge=1, le=10_000)
    """How long a write waits for those replicas; past it the write is not acknowledged (it may still persist)."""
    redis_prefix: str = Field(default="mrtr:", max_length=64)
    """Prefix of every key the task store writes (one Redis can host several fleets, or tests)."""
    task_ttl_ms: int = Field(default=3_600_000, ge=1_000)
    """How long a task stays readable after its last activity (Redis expires it then, never earlier)."""
    task_poll_interval_ms: int = Field(default=500, ge=50)
    """The `pollIntervalMs` suggested to clients."""
    task_lease_ms: int = Field(default=5_000, ge=500)
    """A slice left unacknowledged this long by a dead worker is taken over by another (XAUTOCLAIM)."""
    task_slice_ms: int = Field(default=1_000, ge=50)
    """A task checkpoints and goes back to the queue after this long (kept well under the lease)."""
    task_concurrency: int = Field(default=4, ge=1, le=64)
    """Task slices one worker runs at once (compute steps still share the engine's process pool)."""
    max_live_tasks: int = Field(default=32, ge=1)
    """Unfinished tasks one principal may hold; creations past it get a clear error."""
    task_heartbeat_ms: int = Field(default=200, ge=20)
    """How often a worker says in Redis that it is alive, and looks for dead workers' slices to take over."""
    task_dead_ms: int = Field(default=1_000, ge=100)
    """A worker whose heartbeat is this old counts as dead (frozen or cut off): its slices are taken over at once,
    and its commits fenced. A killed worker is seen sooner (its Redis connections close). Raise it on a starved
    machine to take fewer live-but-stalled workers for dead (harmless, fenced, but their slice runs again)."""
    task_max_run_ms: int = Field(default=3_600_000, ge=0)
    """A task whose slices ran this long in all without finishing fails with a clear error; 0: no limit."""
    task_history_max: int = Field(default=0, ge=0)
    """Keep a history of slice begins and commits (a Redis stream, about this many entries) for the chaos run's
    checker; 0 (the default) writes none."""

    _split = field_validator(
        "tool_packs",
        "allowed_hosts",
        "allowed_origins",
        "jwt_algorithms",
        "required_scopes",
        "redis_sentinels",
        mode="before",
    )(_split_csv)

    @field_validator("redis_url", mode="before")
    @classmethod
    def _empty_url_is_unset(cls, value: object) -> object:
        """An empty `MRTR_WORKER_REDIS_URL` is no URL: how a compose file that sets one by default unsets it."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_addresses(cls, value: list[str]) -> list[str]:
        parse_sentinels(value)  # raises with the bad entry named
        return value

    @model_validator(mode="after")
    def _one_redis(self) -> WorkerSettings:
        if self.redis_url is not None and self.redis_sentinels:
            raise ValueError(
                "set at most one of MRTR_WORKER_REDIS_URL (one Redis) or MRTR_WORKER_REDIS_SENTINELS (Sentinel)"
            )
        return self

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value not in SUPPORTED_VERSIONS:
            raise ValueError(f"must be one of {SUPPORTED_VERSIONS}")
        return value

    @model_validator(mode="after")
    def _writable_format(self) -> WorkerSettings:
        readable = READABLE_FORMATS[self.version]
        if self.write_state_format not in readable:
            raise ValueError(
                f"MRTR_WORKER_WRITE_STATE_FORMAT={self.write_state_format}: version {self.version} "
                f"reads only {sorted(readable)}"
            )
        return self

    @field_validator("tool_packs")
    @classmethod
    def _known_packs(cls, value: list[str]) -> list[str]:
        return check_names(value)

    @model_validator(mode="after")
    def _slice_under_lease(self) -> WorkerSettings:
        if self.task_slice_ms * 2 > self.task_lease_ms:
            raise ValueError(
                f"MRTR_WORKER_TASK_SLICE_MS={self.task_slice_ms} must be at most half of "
                f"MRTR_WORKER_TASK_LEASE_MS={self.task_lease_ms}, or live slices would be taken over"
            )
        return self

    @model_validator(mode="after")
    def _heartbeat_under_dead(self) -> WorkerSettings:
        if self.task_heartbeat_ms * 2 > self.task_dead_ms:
            raise ValueError(
                f"MRTR_WORKER_TASK_HEARTBEAT_MS={self.task_heartbeat_ms} must be at most half of "
                f"MRTR_WORKER_TASK_DEAD_MS={self.task_dead_ms}, or live workers would be taken for dead"
            )
        return self

    @model_validator(mode="after")
    def _one_keyring_source(self) -> WorkerSettings:
        if (self.keyring is None) == (self.keyring_file is None):
            raise ValueError(
                "set exactly one of MRTR_WORKER_KEYRING (JSON) or MRTR_WORKER_KEYRING_FILE; "
                "generate one with: python -m mrtr_worker.sealing.keyring new"
            )
        return self

    @model_validator(mode="after")
    def _authentication_possible(self) -> WorkerSettings:
        if self.jwt_public_key_file is not None and self.jwt_jwks_url is not None:
            raise ValueError("set at most one of MRTR_WORKER_JWT_PUBLIC_KEY_FILE or MRTR_WORKER_JWT_JWKS_URL")
        if not self.allow_anonymous and self.jwt_public_key_file is None and self.jwt_jwks_url is None:
            raise ValueError(
                "bearer tokens are required but no issuer is configured: set MRTR_WORKER_JWT_PUBLIC_KEY_FILE "
                "or MRTR_WORKER_JWT_JWKS_URL, or MRTR_WORKER_ALLOW_ANONYMOUS=true for development"
            )
        if self.admin_token is not None and self.admin_token_file is not None:
            raise ValueError("set at most one of MRTR_WORKER_ADMIN_TOKEN or MRTR_WORKER_ADMIN_TOKEN_FILE")
        return self

    def admin_token_text(self) -> str | None:
        """The admin token from the environment or its file (surrounding whitespace ignored), or None."""
        if self.admin_token is not None:
            return self.admin_token.get_secret_value().strip()
        if self.admin_token_file is not None:
            return self.admin_token_file.read_text().strip()
        return None

    def shedding_settings(self) -> SheddingSettings:
        return SheddingSettings(
            enabled=self.shedding,
            max_concurrent=self.max_concurrent_computations,
            min_slice_ms=self.min_slice_ms,
            max_slice_ms=self.max_slice_ms,
            priority_after_hops=self.priority_after_hops,
            queue_wait_ms=self.queue_wait_ms,
            straggler_ratio=self.straggler_ratio,
            straggler_at_admission=self.straggler_at_admission,
            step_aside=self.step_aside,
        )

    def public_base(self) -> str:
        """`public_url` without a trailing slash, ready for a path."""
        return self.public_url.rstrip("/")

    def redis_url_text(self) -> str | None:
        """The task store's URL, or None (Sentinel mode, or tasks off)."""
        return None if self.redis_url is None else self.redis_url.get_secret_value()

    def redis_target(self) -> RedisTarget | None:
        """Where the fleet's Redis is (a URL or sentinels), or None when tasks are off."""
        if self.redis_sentinels:
            return RedisTarget(sentinels=parse_sentinels(self.redis_sentinels), service=self.redis_sentinel_service)
        url = self.redis_url_text()
        return None if url is None else RedisTarget(url=url)

    def redis_wait(self) -> WaitPolicy:
        return WaitPolicy(self.redis_wait_replicas, self.redis_wait_timeout_ms)

    def keyring_text(self) -> str:
        """The key ring's JSON text, from the environment or the file."""
        if self.keyring is not None:
            return self.keyring.get_secret_value()
        assert self.keyring_file is not None
        return self.keyring_file.read_text()
