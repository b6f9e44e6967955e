"""The suite's bounds and their defaults (no Locust import, so tests can read them without gevent's patching)."""

from __future__ import annotations

P95_OPTIONS: dict[str, tuple[int, str]] = {
    "mrtr_p95_short_ms": (1_000, "ShortCallsUser (echo)"),
    "mrtr_p95_compute_ms": (30_000, "ComputeUser (long computations, shed and resumed)"),
    "mrtr_p95_login_ms": (2_000, "LoginUser (link_accounts, the SEP's login scenario)"),
    "mrtr_p95_elicitation_ms": (2_000, "ElicitationUser (connect_vault, the onboarding prompt, the report resource)"),
    "mrtr_p95_sampling_roots_ms": (2_000, "SamplingRootsUser (write_haiku, scan_roots)"),
    "mrtr_p95_mixed_ms": (30_000, "MixedUser (everything, computations included)"),
}
"""Option dest -> (default p95 bound in ms, the class it bounds). The flag is `--mrtr-p95-...-ms`."""

DEFAULT_MAX_USERS = 100
"""`--mrtr-max-users`: no start, however made, runs more users than this."""

DEFAULT_MAX_RUN_TIME = 300
"""`--mrtr-max-run-time` (seconds): the length of a run given no `--run-time`."""


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def env_var(dest: str) -> str:
    """`mrtr_p95_short_ms` -> `MRTR_LOCUST_P95_SHORT_MS`."""
    return "MRTR_LOCUST_" + dest.upper().removeprefix("MRTR_")
