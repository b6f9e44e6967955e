"""The Locust users: each task is one MRTR call through `mrtr_client.Client`, its answer checked.

Every class paces itself (`tasks_per_second` per user, times `--mrtr-pace`)
and draws its arguments from class-level parameter sets whose answers are
known (`expected.py`); a subclass may swap the sets or the answer tables.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import httpx
from locust import TaskSet, User

from mrtr_client import CallResult, Client
from mrtr_dev_issuer import token_from_environment
from mrtr_locust import checks, expected, runtime
from mrtr_locust.checks import FailedRequest, WrongAnswer
from mrtr_locust.recorder import HopRecord, RecordingInputs, RecordingTransport, TaskWatch
from mrtr_locust.stats import RequestRecord, TaskRecord
from mrtr_locust.target import HostedClient, run_host
from mrtr_protocol.tasks import slice_workers

HTTP_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
HAIKU_TOPICS = ("autumn", "load balancers", "sealed state", "retries", "the sea")

_user_numbers = itertools.count(1)

Check = Callable[[CallResult], None]


def weighted(*pairs: tuple[Callable[[MrtrUser], None], int]) -> list[TaskSet | Callable[..., Any]]:
    """A `tasks` list: each task repeated by its weight."""
    return [task for task, weight in pairs for _ in range(weight)]


VAULT_CANNOT_START = (
    "connect_vault is unavailable",
    "connect_vault accepts each requestState at most once",
    "connect_vault needs a signed-in caller",
)
"""How `connect_vault` begins its answer when it cannot start a flow (no vault store; an anonymous caller)."""


class MrtrUser(User):
    """Base of the suite's users: an MRTR client per user, scripted answers, measured and checked calls."""

    abstract = True
    tasks_per_second: ClassVar[float] = 1.0
    """Task starts per second per user (before `--mrtr-pace`); a task that takes longer just runs back to back."""
    p95_option: ClassVar[str] = "mrtr_p95_mixed_ms"
    """The command-line option (dest) that bounds this class's p95 latency."""

    primes_cases: ClassVar[tuple[expected.PrimesCase, ...]] = expected.PRIMES_CASES
    prime_counts: ClassVar[Mapping[int, int]] = expected.PRIME_COUNTS
    hash_chain_cases: ClassVar[tuple[expected.HashChainCase, ...]] = expected.HASH_CHAIN_CASES
    pi_cases: ClassVar[tuple[expected.PiCase, ...]] = expected.PI_CASES
    pi_refine_cases: ClassVar[tuple[expected.PiCase, ...]] = expected.PI_REFINE_CASES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.number = next(_user_numbers)
        self.logins = {key: f"{key.split('_')[0]}-user-{self.number}" for key in expected.LOGINS_BY_VERSION["2"]}
        self.preferred_name = f"Ada {self.number}"
        self.detail = ("summary", "full")[self.number % 2]
        self.roots = [f"file:///workspace/user-{self.number}/{name}" for name in ("app", "docs")]
        self.inputs = RecordingInputs(
            forms={
                **{key: {"name": value} for key, value in self.logins.items()},
                "preferred_name": {"name": self.preferred_name},
                "detail": {"detail": self.detail},
            },
            sample=self._sample,
            roots=self.roots,
            url_action="decline",  # the vault page needs a person with a browser (see connect_vault)
        )
        self.transport: RecordingTransport | None = None
        """The current client's transport: each call's exchanges, read by `measure` (a new host, a new one;
        none before the first call: building one takes tens of milliseconds of CPU, as a new client's does)."""
        self._token = token_from_environment(f"locust-user-{self.number}")
        self._client = HostedClient(self._new_client)
        self._calls = itertools.count(1)
        self._woke = time.monotonic()

    def _new_client(self, url: str) -> Client:
        """A client for `url` on a fresh recording transport (closing the last client closed its transport)."""
        self.transport = RecordingTransport(httpx.HTTPTransport())
        http = httpx.Client(transport=self.transport, timeout=HTTP_TIMEOUT)
        return Client(url, self.inputs, token=self._token, http=http)

    @property
    def mcp(self) -> Client:
        """The client for the host of the run going now (`MissingHost` when the run was started without one)."""
        return self._client.client(run_host(self))

    def on_stop(self) -> None:
        self._client.close()

    def wait_time(self) -> float:
        """Constant throughput: tasks start 1 / (tasks_per_second * pace) seconds apart, or back to back if slower."""
        pace = float(getattr(self.environment.parsed_options, "mrtr_pace", 1.0) or 1.0)
        now = time.monotonic()
        wait = max(0.0, 1.0 / (self.tasks_per_second * pace) - (now - self._woke))
        self._woke = now + wait
        return wait

    def _sample(self, params: Mapping[str, Any]) -> str:
        prompt = params["messages"][0]["content"]["text"]
        return f"user {self.number} answers: {prompt}"

    # --- measuring ---------------------------------------------------------------------------------

    def measure(
        self, method: str, name: str, call: Callable[[], CallResult], check: Check, *, task: TaskWatch | None = None
    ) -> CallResult | None:
        """Run one logical request, check its answer, and report it to Locust and to the suite's statistics.

        `task`: the call runs as a task, followed by this watch (its id and statuses go into the record).
        """
        if self.transport is not None:
            self.transport.clear()
        self.inputs.asked.clear()
        started_at = time.time()
        started = time.perf_counter()
        done: CallResult | None = None
        error: Exception | None = None
        interrupted: BaseException | None = None
        try:
            done = call()
        except Exception as exc:  # any exception is a lost request
            error = FailedRequest(exc)
        except BaseException as exc:
            # The run stopped this user mid-call (GreenletExit after --stop-timeout). An MRTR call is simply
            # not counted; a task already created is recorded as failed (lost: never seen to end), then the
            # user stops as it was told.
            if task is None or task.task_id is None:
                raise
            error, interrupted = FailedRequest(exc), exc
        if done is not None:
            try:
                checks.no_question_reasked(done)
                check(done)
            except WrongAnswer as exc:
                error = exc
            except Exception as exc:  # a result too malformed for the check to read
                error = WrongAnswer(f"malformed result ({type(exc).__name__}: {exc})")
        elapsed_ms = (time.perf_counter() - started) * 1000
        if done is not None:
            hops = [HopRecord(h.instance, h.version, h.reason, h.elapsed_ms, h.http_status) for h in done.trace.hops]
            asked = [q.key for q in done.trace.questions]
            reasked = done.trace.reasked
        else:
            hops, asked = list(self.transport.hops if self.transport else ()), list(self.inputs.asked)
            reasked = [key for key in dict.fromkeys(asked) if asked.count(key) > 1]
        wrong = isinstance(error, WrongAnswer)
        kind = None if error is None else type(error).__name__
        if isinstance(error, FailedRequest):
            kind = f"FailedRequest({error.cause})"
        rec = RequestRecord(
            user_class=type(self).__name__,
            name=name,
            start=started_at,
            end=started_at + elapsed_ms / 1000,
            ok=error is None,
            wrong=wrong,
            error=None if error is None else f"{type(error).__name__}: {error}",
            error_kind=kind,
            questions=asked,
            reasked=list(reasked),
            hops=hops,
            bytes=self.transport.received_bytes if self.transport else 0,
            task=None if task is None else _task_record(task, done),
        )
        runtime.record(rec)
        self.environment.events.request.fire(
            request_type=method,
            name=name,
            response_time=elapsed_ms,
            response_length=rec.bytes,  # Locust's "size" column: the bytes the call's exchanges carried
            exception=error,
            context={"user_class": rec.user_class, "instances": rec.instances, "versions": rec.versions},
        )
        if interrupted is not None:
            raise interrupted
        return done if error is None else None

    def call_tool(self, name: str, arguments: Mapping[str, Any], check: Check, *, label: str | None = None) -> None:
        self.measure("tools/call", label or name, lambda: self.mcp.call_tool(name, arguments), check)

    def call_task(self, name: str, arguments: Mapping[str, Any], check: Check, *, label: str) -> None:
        """A tool call run as a task (the extension declared), followed to its end; it must become a task."""
        watch = TaskWatch()

        def checked(done: CallResult) -> None:
            if done.trace.task_id is None:
                raise WrongAnswer("answered at once: the call did not become a task")
            check(done)

        self.measure(
            "tools/call",
            label,
            lambda: self.mcp.call_tool(name, arguments, task=True, on_task=watch),
            checked,
            task=watch,
        )

    # --- tasks (referenced by each class's `tasks`) ---------------------------------------------------

    def echo(self) -> None:
        text = f"hello from user {self.number}, call {next(self._calls)}"

        def check(done: CallResult) -> None:
            checks.questions(done, [])
            checks.structured(done, {"text": text})

        self.call_tool("echo", {"text": text}, check)

    def count_primes(self) -> None:
        case = random.choice(self.primes_cases)
        answer = {"count": self.prime_counts[case.limit]}

        def check(done: CallResult) -> None:
            checks.questions(done, [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_tool("count_primes", case.arguments, check)

    def hash_chain(self) -> None:
        case = random.choice(self.hash_chain_cases)
        answer = expected.hash_chain_result(case)

        def check(done: CallResult) -> None:
            checks.questions(done, [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_tool("hash_chain", case.arguments, check)

    def estimate_pi(self) -> None:
        self._estimate_pi(random.choice(self.pi_cases), "estimate_pi")

    def estimate_pi_refine(self) -> None:
        self._estimate_pi(random.choice(self.pi_refine_cases), "estimate_pi ask_to_refine")

    def _estimate_pi(self, case: expected.PiCase, label: str) -> None:
        answer = expected.pi_result(case)
        self.inputs.forms["refine"] = {"refine": case.refine}

        def check(done: CallResult) -> None:
            checks.questions(done, ["refine"] if case.ask_to_refine else [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_tool("estimate_pi", case.arguments, check, label=label)

    def task_count_primes(self) -> None:
        case = random.choice(self.primes_cases)
        answer = {"count": self.prime_counts[case.limit]}

        def check(done: CallResult) -> None:
            checks.task_questions(done, [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_task("count_primes", case.arguments, check, label="task count_primes")

    def task_hash_chain(self) -> None:
        case = random.choice(self.hash_chain_cases)
        answer = expected.hash_chain_result(case)

        def check(done: CallResult) -> None:
            checks.task_questions(done, [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_task("hash_chain", case.arguments, check, label="task hash_chain")

    def task_estimate_pi(self) -> None:
        self._task_estimate_pi(random.choice(self.pi_cases), "task estimate_pi")

    def task_estimate_pi_refine(self) -> None:
        self._task_estimate_pi(random.choice(self.pi_refine_cases), "task estimate_pi ask_to_refine")

    def _task_estimate_pi(self, case: expected.PiCase, label: str) -> None:
        answer = expected.pi_result(case)
        self.inputs.forms["refine"] = {"refine": case.refine}

        def check(done: CallResult) -> None:
            checks.task_questions(done, ["refine"] if case.ask_to_refine else [])
            checks.structured(done, answer)
            checks.compute_steps(done, case.steps)

        self.call_task("estimate_pi", case.arguments, check, label=label)

    def link_accounts(self) -> None:
        self.call_tool("link_accounts", {}, lambda done: checks.linked_accounts(done, self.logins))

    def connect_vault(self) -> None:
        """A load generator has no browser: it declines the vault link (URL mode), and the call must end saying so.

        Where the tool cannot start (an anonymous user, or a fleet without Redis) it must say why, asking nothing.
        """

        def check(done: CallResult) -> None:
            if done.text.startswith(VAULT_CANNOT_START):
                checks.questions(done, [])
                return
            checks.questions(done, ["vault"])
            if not done.is_error or done.text != "Vault connection was declined.":
                raise WrongAnswer(f"expected the declined vault link, got {done.text[:120]!r}")

        self.call_tool("connect_vault", {}, check)

    def onboarding(self) -> None:
        text = f"Greet {self.preferred_name} and explain MRTR briefly."
        greeting = [{"role": "user", "content": {"type": "text", "text": text}}]

        def check(done: CallResult) -> None:
            checks.questions(done, ["preferred_name"])
            checks.prompt_messages(done, greeting)

        self.measure("prompts/get", "onboarding", lambda: self.mcp.get_prompt("onboarding"), check)

    def report(self) -> None:
        report_id = random.randint(1, 9999)
        uri = f"mrtr://reports/{report_id}"

        def check(done: CallResult) -> None:
            checks.questions(done, ["detail"])
            checks.resource_text(done, uri, f"Report {report_id} ({self.detail})")

        self.measure("resources/read", "mrtr://reports/{id}", lambda: self.mcp.read_resource(uri), check)

    def write_haiku(self) -> None:
        topic = random.choice(HAIKU_TOPICS)
        haiku = self._sample({"messages": [{"content": {"text": f"Write a haiku about {topic}."}}]})

        def check(done: CallResult) -> None:
            checks.questions(done, ["haiku"])
            checks.structured(done, {"topic": topic, "haiku": haiku})

        self.call_tool("write_haiku", {"topic": topic}, check)

    def scan_roots(self) -> None:
        def check(done: CallResult) -> None:
            checks.questions(done, ["roots"])
            checks.structured(done, {"roots": self.roots, "count": len(self.roots)})

        self.call_tool("scan_roots", {}, check)


def _task_record(watch: TaskWatch, done: CallResult | None) -> TaskRecord:
    task_id = watch.task_id or (done.trace.task_id if done is not None else None)
    workers = slice_workers(done.result) if done is not None else []
    return TaskRecord(task_id, list(watch.changes), workers)


class TaskUser(MrtrUser):
    """The same computations run as tasks (the tasks extension): created, polled, answered, resumed anywhere.

    Each call declares the extension and is followed to its end; the answer is checked exactly as an MRTR
    call's (result and step count), `estimate_pi ask_to_refine` answers its question through the same input
    handler while the task waits in `input_required`. The record keeps the task's id, its statuses and the
    worker of each slice, so a report can count tasks resumed on another instance. A task that fails, is
    cancelled or never ends is a failed request.
    """

    weight = 2
    tasks_per_second = 0.5
    p95_option = "mrtr_p95_compute_ms"
    tasks = weighted(
        (MrtrUser.task_count_primes, 3),
        (MrtrUser.task_hash_chain, 2),
        (MrtrUser.task_estimate_pi, 1),
        (MrtrUser.task_estimate_pi_refine, 1),
    )


class ShortCallsUser(MrtrUser):
    """`echo`: the cheapest complete call, one round; its latency is the fleet's overhead."""

    weight = 3
    tasks_per_second = 2.0
    p95_option = "mrtr_p95_short_ms"
    tasks = weighted((MrtrUser.echo, 1))


class ComputeUser(MrtrUser):
    """Long computations that get shed and resumed elsewhere: `count_primes`, `hash_chain`, `estimate_pi`."""

    weight = 2
    tasks_per_second = 0.5
    p95_option = "mrtr_p95_compute_ms"
    tasks = weighted(
        (MrtrUser.count_primes, 3),
        (MrtrUser.hash_chain, 2),
        (MrtrUser.estimate_pi, 2),
        (MrtrUser.estimate_pi_refine, 1),
    )


class LoginUser(MrtrUser):
    """The SEP's login scenario, `link_accounts`: one login per round, each asked once, on any mix of versions."""

    weight = 2
    tasks_per_second = 1.0
    p95_option = "mrtr_p95_login_ms"
    tasks = weighted((MrtrUser.link_accounts, 1))


class ElicitationUser(MrtrUser):
    """Other questions over rounds: URL-mode `connect_vault`, the `onboarding` prompt, the report resource."""

    weight = 1
    tasks_per_second = 1.0
    p95_option = "mrtr_p95_elicitation_ms"
    tasks = weighted((MrtrUser.connect_vault, 1), (MrtrUser.onboarding, 1), (MrtrUser.report, 1))


class SamplingRootsUser(MrtrUser):
    """The other client features a round can ask for: sampling (`write_haiku`) and roots (`scan_roots`)."""

    weight = 1
    tasks_per_second = 1.0
    p95_option = "mrtr_p95_sampling_roots_ms"
    tasks = weighted((MrtrUser.write_haiku, 1), (MrtrUser.scan_roots, 1))


class MixedUser(MrtrUser):
    """A bit of everything, in one user."""

    weight = 1
    tasks_per_second = 1.0
    p95_option = "mrtr_p95_mixed_ms"
    tasks = weighted(
        (MrtrUser.echo, 4),
        (MrtrUser.link_accounts, 3),
        (MrtrUser.onboarding, 1),
        (MrtrUser.report, 1),
        (MrtrUser.connect_vault, 1),
        (MrtrUser.write_haiku, 1),
        (MrtrUser.scan_roots, 1),
        (MrtrUser.count_primes, 2),
        (MrtrUser.hash_chain, 1),
        (MrtrUser.estimate_pi, 1),
        (MrtrUser.estimate_pi_refine, 1),
    )


USER_CLASSES: tuple[type[MrtrUser], ...] = (
    ShortCallsUser,
    ComputeUser,
    LoginUser,
    ElicitationUser,
    SamplingRootsUser,
    MixedUser,
    TaskUser,
)
