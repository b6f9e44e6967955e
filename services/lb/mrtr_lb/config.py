"""Load-balancer settings, read from ``MRTR_LB_*`` environment variables.

Everything an operator may tune lives here so that the rest of the package
receives one validated object and never reads the environment itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from yarl import URL

from mrtr_lb.balancing import Balance
from mrtr_lb.health import HealthCheck

KIB = 1024
MIB = 1024 * KIB


def normalize_backend_url(raw: str) -> str:
    """Return ``scheme://host:port`` for a backend, so that URLs compare equal.

    A bare ``host:port`` means ``http://host:port``; a path is refused because
    the proxy forwards the client's path unchanged.
    """
    text = raw.strip()
    if "://" not in text:
        text = f"http://{text}"
    url = URL(text)
    if url.scheme not in ("http", "https"):
        raise ValueError(f"{raw!r}: scheme must be http or https")
    if not url.host:
        raise ValueError(f"{raw!r}: no host")
    if url.raw_path not in ("", "/") or url.query_string or url.fragment:
        raise ValueError(f"{raw!r}: give only scheme://host:port, without a path")
    if url.user or url.password:
        raise ValueError(f"{raw!r}: credentials are not supported")
    return str(URL.build(scheme=url.scheme, host=url.host, port=url.port))


def parse_host_port(raw: str) -> tuple[str, int]:
    """Split ``name:port`` (or ``[v6]:port``) for DNS discovery; the port is required."""
    host, sep, port_text = raw.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"{raw!r}: expected name:port, e.g. worker:8000")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"{raw!r}: port out of range")
    return host.strip("[]"), port


class Settings(BaseSettings):
    """All tunables of the proxy; env prefix ``MRTR_LB_``."""

    model_config = SettingsConfigDict(env_prefix="MRTR_LB_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    admin_host: str = "127.0.0.1"
    """The admin listener (`/lb/*`, the operator token required): never the public one."""
    admin_port: int = Field(default=8090, ge=0, le=65535)
    backends: Annotated[list[str], NoDecode] = Field(default_factory=list)
    backends_file: Path | None = None
    """A file of backend URLs, one a line, re-read every `backends_file_interval`: the launcher's discovery."""
    backends_file_interval: float = Field(default=1.0, gt=0)
    backend_dns: str | None = None
    backend_scheme: Literal["http", "https"] = "http"
    dns_interval: float = Field(default=2.0, gt=0)
    dns_family: Literal["ipv4", "ipv6", "any"] = "ipv4"
    health_interval: float = Field(default=0.5, gt=0)
    health_timeout: float = Field(default=1.0, gt=0)
    health_path: str = "/readyz"
    health_check: HealthCheck = HealthCheck.READYZ
    """readyz: the MRTR worker's contract (`mrtr_protocol.fleet`); http: any answer under 500 on `health_path`,
    its status line alone (any HTTP server); tcp: a connection accepted (any server at all)."""
    unresponsive_after: int = Field(default=2, ge=0)
    """Probes in a row with no answer at all, after which the requests running there are answered 504 (0: never)."""
    connect_timeout: float = Field(default=2.0, gt=0)
    read_timeout: float = Field(default=60.0, gt=0)
    upstream_keepalive: float = Field(default=2.0, ge=0)
    max_upstream_connections: int = Field(default=0, ge=0)
    max_body_size: int = Field(default=8 * MIB, ge=0)
    max_head_size: int = Field(default=32 * KIB, ge=1 * KIB)
    """Request line plus headers, in bytes (nginx: `large_client_header_buffers 4 8k`); more gets 431."""
    max_headers: int = Field(default=100, ge=1)
    """Header lines in one request (HAProxy: `tune.http.maxhdr` 101); more gets 431."""
    head_timeout: float = Field(default=10.0, gt=0)
    """Seconds for a request's head to arrive whole, from its first byte (from the accept for a new
    connection; HAProxy: `timeout http-request`); then 408 and close."""
    body_timeout: float = Field(default=20.0, gt=0)
    """Seconds the body may take after its head, extended by one per `body_min_rate` bytes received
    (Apache `mod_reqtimeout`: body=20,MinRate=500); then 408 and close."""
    body_min_rate: int = Field(default=500, ge=0)
    """Bytes per second a body must keep up after its first `body_timeout` (0: the deadline is fixed)."""
    send_timeout: float = Field(default=60.0, gt=0)
    """Seconds a client may keep the proxy from writing to it (it reads nothing) before the connection is cut
    (nginx: `send_timeout`)."""
    keepalive_timeout: float = Field(default=75.0, gt=0)
    """Seconds an idle keep-alive client connection stays open between requests."""
    max_connections: int = Field(default=4096, ge=1)
    """Open client connections on the public listener; one more is answered 503 and closed."""
    retry_after: int = Field(default=1, ge=0)
    shutdown_timeout: float = Field(default=5.0, ge=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_flush_interval: float = Field(default=0.2, gt=0)
    """Seconds the CLI lets log lines gather before writing them (also at exit, and at once for a warning)."""
    balance: Balance = Balance.ROUND_ROBIN
    """How the next backend is chosen (`balancing`): round_robin, two_choices or least_request."""
    engine: Literal["lean"] = "lean"
    """The one engine (asyncio protocols, httptools, uvloop); kept so an old ``MRTR_LB_ENGINE=aiohttp`` is refused."""
    proxy_paths: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["/mcp"])
    """Paths forwarded to the workers; anything else (a worker's /admin, /metrics) is not reachable through here."""
    rebalance_on_join: bool = True
    """When a backend joins the rotation after start-up, POST /admin/rebalance to the others (capacity appeared)."""
    rebalance_debounce: float = Field(default=0.1, ge=0)
    """Joins within this many seconds of the first one make one round of rebalance calls."""
    rebalance_timeout: float = Field(default=2.0, gt=0)
    admin_token: SecretStr | None = None
    """The workers' admin token (their MRTR_WORKER_ADMIN_TOKEN), sent with rebalance calls; or `admin_token_file`."""
    admin_token_file: Path | None = None

    @field_validator("backends", "proxy_paths", mode="before")
    @classmethod
    def _split_backends(cls, value: object) -> object:
        """Accept the comma-separated form used in env vars and on the command line."""
        if isinstance(value, str):
            return [part for part in (p.strip() for p in value.split(",")) if part]
        return value

    @field_validator("backends")
    @classmethod
    def _normalize_backends(cls, value: list[str]) -> list[str]:
        urls = [normalize_backend_url(v) for v in value]
        return list(dict.fromkeys(urls))

    @field_validator("backend_dns")
    @classmethod
    def _check_dns(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parse_host_port(value)
        return value.strip()

    @field_validator("engine", mode="before")
    @classmethod
    def _one_engine(cls, value: object) -> object:
        if value == "aiohttp":
            raise ValueError("the aiohttp engine was retired; unset MRTR_LB_ENGINE (the lean engine is the only one)")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _need_a_source(self) -> Settings:
        if not self.backends and self.backend_dns is None and self.backends_file is None:
            raise ValueError("no backends: set MRTR_LB_BACKENDS, MRTR_LB_BACKENDS_FILE or MRTR_LB_BACKEND_DNS")
        return self

    @model_validator(mode="after")
    def _two_listeners(self) -> Settings:
        if self.port != 0 and self.port == self.admin_port:
            raise ValueError(f"MRTR_LB_ADMIN_PORT must differ from MRTR_LB_PORT ({self.port}): admin is not public")
        return self

    @model_validator(mode="after")
    def _one_token_source(self) -> Settings:
        if self.admin_token is not None and self.admin_token_file is not None:
            raise ValueError("set MRTR_LB_ADMIN_TOKEN or MRTR_LB_ADMIN_TOKEN_FILE, not both")
        return self

    def admin_token_text(self) -> str | None:
        """The workers' admin token, read from the file each time it is asked (a rotated secret is picked up)."""
        if self.admin_token is not None:
            return self.admin_token.get_secret_value().strip() or None
        if self.admin_token_file is not None:
            return self.admin_token_file.read_text().strip() or None
        return None

    @property
    def dns_target(self) -> tuple[str, int] | None:
        """The DNS name and port to discover, if DNS discovery is on."""
        return None if self.backend_dns is None else parse_host_port(self.backend_dns)


def describe_error(exc: Exception) -> str:
    """Squash a pydantic ValidationError into one line naming the env vars at fault."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc).replace("\n", " ")
    parts = []
    for err in errors():
        loc = [str(x) for x in err.get("loc", ())]
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        name = f"MRTR_LB_{loc[0].upper()}" if loc else ""
        parts.append(f"{name}: {msg}" if name else msg)
    return "; ".join(parts)
