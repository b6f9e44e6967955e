"""What the drivers are asked to do and how they answer: arguments, scripted answers, and the exact results due.

The expected results are computed here from the worker's own definitions (the
questions' wording from the packs, the prime counts from published values of
pi(n), the Monte Carlo estimate by running the seeded computation), never
copied from a run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from mrtr_worker.compute.montecarlo import ESTIMATE_PI
from mrtr_worker.compute.primes import KNOWN_COUNTS
from mrtr_worker.packs.demo import LOGINS_BY_VERSION, REPORT_REQUEST, login_request
from mrtr_worker.tool_api import inputs

GITHUB_LOGIN = "octocat"
GOOGLE_LOGIN = "octo-at-google"
PREFERRED_NAME = "Ada"
REPORT_DETAIL = "full"
REPORT_FOR = "Grace"
REPORT_LIMIT = 1_000_000
HAIKU_TOPIC = "autumn"
HAIKU = "Cold slice of moonlight / one worker hands on the sieve / another counts on"
SAMPLING_MODEL = "interop-scripted"
ROOTS = ("file:///srv/interop/alpha", "file:///srv/interop/beta")
RESOURCE_URI = "mrtr://reports/42"
ECHO_TEXT = "hello from the inspector"
PI_ARGUMENTS: dict[str, Any] = {"samples": 200_000, "seed": 7, "ask_to_refine": True}
PI_REFINE = True

PRIMES_LIMIT = 200_000_000
"""`count_primes` over MRTR: long enough (about 2 s of sieving) to be handed back several times at a short slice."""
TASK_PRIMES_LIMIT = 20_000_000
PUSH_PRIMES_LIMIT = 50_000_000
"""A task that runs over a slice or two, so changes are pushed while the client listens."""
CANCEL_PRIMES_LIMIT = 2_000_000_000
"""A task far too long to finish before the cancel lands (cancelled at the next step boundary)."""
CANCEL_PRIMES_LIMIT_LEAKY = 50_000_000
"""For a client whose cancel cannot reach the server (a known gap): its task then runs to its end, so keep it short."""
INSPECTOR_PRIMES_LIMIT = 10_000_000

VAULT_SUBJECT = "interop-alice"
VAULT_API_KEY = "sk-interop-" + hashlib.sha256(b"mrtr interop").hexdigest()[:24]
"""The key the vault page is given (a made-up one: the page stores only its fingerprint)."""


def form_rules() -> list[dict[str, Any]]:
    """The scripted answers to forms: the first rule whose `match` occurs in the question's message wins."""
    return [
        {"match": "GitHub", "content": {"name": GITHUB_LOGIN}},
        {"match": "Google", "content": {"name": GOOGLE_LOGIN}},
        {"match": "What should we call you", "content": {"name": PREFERRED_NAME}},
        {"match": "How detailed", "content": {"detail": REPORT_DETAIL}},
        {"match": "Double the samples", "content": {"refine": PI_REFINE}},
        {"match": "prime report", "content": {"name": REPORT_FOR, "limit": REPORT_LIMIT}},
    ]


@dataclass(frozen=True)
class DriverConfig:
    """The JSON a driver reads: where to connect, what to run, and how to answer."""

    url: str
    features: tuple[str, ...]
    token: str | None = None
    vault_helper: str | None = None
    cancel_primes_limit: int = CANCEL_PRIMES_LIMIT
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "token": self.token,
            "vaultHelper": self.vault_helper,
            "features": list(self.features),
            "answers": {
                "forms": form_rules(),
                "sampling": {"model": SAMPLING_MODEL, "text": HAIKU},
                "roots": list(ROOTS),
            },
            "haikuTopic": HAIKU_TOPIC,
            "primesLimit": PRIMES_LIMIT,
            "resourceUri": RESOURCE_URI,
            "taskPrimesLimit": TASK_PRIMES_LIMIT,
            "pushPrimesLimit": PUSH_PRIMES_LIMIT,
            "cancelPrimesLimit": self.cancel_primes_limit,
            "piArguments": PI_ARGUMENTS,
            **self.extra,
        }


# --- the exact answers due -------------------------------------------------------------------------


def login_questions() -> list[str]:
    """What `link_accounts` asks a version-1 worker's caller, in order."""
    return [str(login_request(key)["params"]["message"]) for key in LOGINS_BY_VERSION[1]]


def linked_logins() -> dict[str, Any]:
    return {"linked": {"github_login": GITHUB_LOGIN, "google_login": GOOGLE_LOGIN}}


def haiku_request() -> dict[str, Any]:
    """The sampling request `write_haiku` sends (its params)."""
    params: dict[str, Any] = inputs.sampling(f"Write a haiku about {HAIKU_TOPIC}.", max_tokens=200)["params"]
    return params


def primes(limit: int) -> int:
    return KNOWN_COUNTS[limit]


def greeting() -> str:
    return f"Greet {PREFERRED_NAME} and explain MRTR briefly."


def report_text() -> str:
    return f"Report {RESOURCE_URI.rsplit('/', 1)[1]} ({REPORT_DETAIL})"


def report_question() -> str:
    return str(REPORT_REQUEST["params"]["message"])


def prime_report() -> tuple[str, dict[str, Any]]:
    """`prime_report`'s text and structured result for the scripted answer."""
    count = primes(REPORT_LIMIT)
    return (
        f"{REPORT_FOR}, there are {count} primes up to {REPORT_LIMIT}.",
        {"name": REPORT_FOR, "limit": REPORT_LIMIT, "count": count},
    )


def estimate_pi() -> tuple[str, dict[str, Any]]:
    """The question `estimate_pi` asks midway and its final result, by running the seeded computation here."""
    computation = ESTIMATE_PI
    state = computation.initial(PI_ARGUMENTS)
    message = ""
    while not computation.done(state):
        question = computation.question(state)
        if question is not None:
            message = str(question.request["params"]["message"])
            state = question.apply(state, {"refine": PI_REFINE})
            continue
        state = computation.step(state)
    return message, computation.result(state)


def vault_key_ref() -> str:
    """The fingerprint the vault records for the key the page was given."""
    return "sha256:" + hashlib.sha256(VAULT_API_KEY.encode()).hexdigest()[:16]
