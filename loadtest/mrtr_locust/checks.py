"""What makes an answer right, and the two kinds of Locust failure: a wrong answer and a failed request.

Every check raises `WrongAnswer` (or its kind `ReaskedQuestion`); anything
the client raises on the way to a complete result becomes `FailedRequest`.
Locust groups failures by their exception, so the failures table says which
kind each one is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mrtr_client import CallResult
from mrtr_locust.expected import LOGINS_BY_VERSION
from mrtr_locust.recorder import job_key

COMPUTE_META_KEY = "mrtr-cluster.dev/compute"


class WrongAnswer(AssertionError):
    """The call completed, but its result (or the questions asked on the way) is not the right one."""


class ReaskedQuestion(WrongAnswer):
    """The server asked again a question the client had already answered in the same call."""


class FailedRequest(Exception):
    """The call got no complete result: the client raised (RPC error, retry budget, round cap, protocol...)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = type(cause).__name__


def no_question_reasked(done: CallResult) -> None:
    reasked = done.trace.reasked
    if reasked:
        raise ReaskedQuestion(f"asked again: {', '.join(sorted(reasked))}")


def questions(done: CallResult, expected: Sequence[str]) -> None:
    asked = [q.key for q in done.trace.questions]
    if asked != list(expected):
        raise WrongAnswer(f"asked {asked}, expected {list(expected)}")


def task_questions(done: CallResult, expected: Sequence[str]) -> None:
    """A task's questions: the job's keys in order, each asked under a fresh task key (never reused)."""
    keys = [q.key for q in done.trace.questions]
    if len(set(keys)) != len(keys):
        raise WrongAnswer(f"task question keys reused: {keys}")
    asked = [job_key(key) for key in keys]
    if asked != list(expected):
        raise WrongAnswer(f"asked {keys}, expected {list(expected)} (under fresh task keys)")


def structured(done: CallResult, expected: Mapping[str, Any]) -> None:
    if done.is_error:
        raise WrongAnswer(f"tool error: {done.text[:120]}")
    if done.structured != expected:
        raise WrongAnswer(f"result {_short(done.structured)}, expected {_short(expected)}")


def compute_steps(done: CallResult, expected: int) -> None:
    """The steps the sealed state counted: every step ran exactly once across all the instances visited."""
    meta = done.result.get("_meta") or {}
    steps = (meta.get(COMPUTE_META_KEY) or {}).get("steps")
    if steps != expected:
        raise WrongAnswer(f"{steps} steps, expected {expected}")


def linked_accounts(done: CallResult, scripted: Mapping[str, str]) -> None:
    """The SEP's login scenario on a fleet of mixed versions.

    Right means: `linked` holds every login the version that completed the
    call (the last hop's) needs, each value is the scripted answer, and every
    linked login was asked. A question asked by version 2 (Microsoft) whose
    answer reached a version 1 instance that then completed is not linked:
    version 1 does not link that account, and that is its correct answer. No
    question may be asked twice (checked separately, as a re-asked question).
    """
    if done.is_error:
        raise WrongAnswer(f"tool error: {done.text[:120]}")
    result = done.structured if isinstance(done.structured, dict) else {}
    linked = result.get("linked")
    if not isinstance(linked, dict):
        raise WrongAnswer(f"no linked accounts in {_short(done.structured)}")
    version = done.trace.hops[-1].version if done.trace.hops else None
    needed = LOGINS_BY_VERSION.get(version or "")
    if needed is None:
        raise WrongAnswer(f"completed on unknown version {version!r}")
    missing = sorted(set(needed) - set(linked))
    if missing:
        raise WrongAnswer(f"v{version} completed without {', '.join(missing)}")
    wrong_values = sorted(key for key, value in linked.items() if scripted.get(key) != value)
    if wrong_values:
        raise WrongAnswer(f"linked values differ from the answers given: {', '.join(wrong_values)}")
    asked = {q.key for q in done.trace.questions}
    never_asked = sorted(set(linked) - asked)
    if never_asked:
        raise WrongAnswer(f"v{version} linked {never_asked} without asking")
    unused = sorted(asked - set(linked))
    if any(key in needed for key in unused):
        raise WrongAnswer(f"v{version} completed: asked {sorted(asked)}, linked {sorted(linked)}")


def prompt_messages(done: CallResult, expected: list[dict[str, Any]]) -> None:
    if done.result.get("messages") != expected:
        raise WrongAnswer(f"messages {_short(done.result.get('messages'))}, expected {_short(expected)}")


def resource_text(done: CallResult, uri: str, text: str) -> None:
    contents = done.result.get("contents") or []
    got = [(c.get("uri"), c.get("text")) for c in contents if isinstance(c, dict)]
    if got != [(uri, text)]:
        raise WrongAnswer(f"contents {_short(got)}, expected {_short([(uri, text)])}")


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
