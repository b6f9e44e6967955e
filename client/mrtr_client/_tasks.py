"""Following a task (the tasks extension, SEP-2663), free of I/O, in the style of `_loop`.

A call made "as a task" declares `io.modelcontextprotocol/tasks` and runs the ordinary MRTR loop, which
then also accepts a flat `CreateTaskResult`; a task is followed by polls (`tasks/get`), answers
(`tasks/update`) and, on the caller's failure, one `tasks/cancel`, with pushed changes through `_push`
when the server offers them. The rules, one by one: `docs/client.md`, "Tasks".
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mrtr_client import _results, _wire
from mrtr_client._loop import (
    AUTH_STATUSES,
    Ask,
    Failure,
    Loop,
    Observe,
    Reply,
    RetryPolicy,
    Send,
    Sleep,
    Step,
    _auth_problem,
    _parse,
    _rpc_error,
    mrtr_loop,
)
from mrtr_client._push import PushFeed
from mrtr_client.errors import (
    AuthenticationFailed,
    MrtrError,
    ProtocolViolation,
    RetryBudgetExhausted,
    RpcError,
    TaskCancelled,
    TaskFailed,
    TaskWaitExceeded,
)
from mrtr_client.trace import CallResult, CallTrace, Question, TaskExchange, TaskSnapshot
from mrtr_protocol.instance import WORKER_ID_HEADER, WORKER_VERSION_HEADER
from mrtr_protocol.rounds import RETRYABLE_STATUSES
from mrtr_protocol.tasks import (
    TASK_ID_PARAM,
    TASK_RESULT_TYPE,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_UPDATE,
    TaskStatus,
    is_task_status,
    with_tasks,
)
from mrtr_protocol.wire import encode_request, request_headers, request_meta

_WORKER_ID, _WORKER_VERSION = WORKER_ID_HEADER.lower(), WORKER_VERSION_HEADER.lower()


@dataclass(frozen=True)
class TaskPolicy:
    """How a client follows a task."""

    default_poll_interval: float = 1.0
    """Seconds between polls when the server gives no `pollIntervalMs`."""
    min_poll_interval: float = 0.05
    max_poll_interval: float = 5.0
    """Bounds on the server's `pollIntervalMs`, so a bad hint can neither flood the server nor stall the caller."""
    max_wait: float | None = 3600.0
    """Seconds of polling (and sleeping between polls) before `TaskWaitExceeded`; None waits for ever."""
    cancel_timeout: float = 5.0
    """Seconds the `tasks/cancel` sent on the way out of an interrupted call may take."""
    push: bool = True
    """Wait for changes on a `subscriptions/listen` stream (`notifications/tasks`) when the server accepts it."""
    max_relistens: int = 3
    """Push streams that may end early (a drop, a draining worker) before the task is only polled."""


Exchange = Generator[Step, Any, tuple[dict[str, Any], Reply]]
"""One `tasks/*` request: its result and the reply that carried it."""


def task_call_loop(
    method: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    ids: Iterator[int],
    policy: RetryPolicy,
    task_policy: TaskPolicy,
    extra_headers: Mapping[str, str] | None = None,
) -> Loop:
    """A call that may become a task: MRTR rounds first, then the task (if the server made one) to its end."""
    declared = with_tasks(capabilities)
    first = yield from mrtr_loop(method, params, declared, ids, policy, extra_headers, accept_task=True)
    if first.result.get("resultType") != TASK_RESULT_TYPE:
        return first
    hop = first.trace.hops[-1]
    snapshot = snapshot_from(first.result, hop.instance, detailed=False)
    first.trace.task_id = snapshot.task_id
    follower = _Follower(snapshot.task_id, declared, ids, policy, task_policy, extra_headers, first.trace)
    created = TaskExchange(
        method, snapshot.task_id, hop.instance, hop.version, hop.http_status, hop.elapsed_ms, 0.0, snapshot, "created"
    )
    return (yield from follower.follow(snapshot, created))


def follow_task_loop(
    task_id: str,
    capabilities: Mapping[str, Any],
    ids: Iterator[int],
    policy: RetryPolicy,
    task_policy: TaskPolicy,
    extra_headers: Mapping[str, str] | None = None,
) -> Loop:
    """An existing task (created earlier, perhaps by another process) followed to its end by the same rules."""
    follower = _Follower(task_id, with_tasks(capabilities), ids, policy, task_policy, extra_headers, None)
    return (yield from follower.follow(None))


def task_request_loop(
    method: str,
    task_id: str,
    capabilities: Mapping[str, Any],
    ids: Iterator[int],
    policy: RetryPolicy,
    extra_headers: Mapping[str, str] | None = None,
) -> Generator[Step, Any, TaskSnapshot | None]:
    """One `tasks/get` (the task, as read) or `tasks/cancel` (None once acknowledged)."""
    follower = _Follower(task_id, with_tasks(capabilities), ids, policy, TaskPolicy(), extra_headers, None)
    if method == TASKS_GET:
        return (yield from follower.poll())
    _, reply = yield from follower.exchange(method, {})
    yield from follower.note(follower.exchange_record(method, reply, None, "acknowledged"))
    return None


def snapshot_from(result: Mapping[str, Any], instance: str | None, *, detailed: bool = True) -> TaskSnapshot:
    """A task read strictly: a `DetailedTask` (`tasks/get`, a push), or with `detailed=False` the `Task` of a
    `CreateTaskResult`, which need not inline what its status would (what it does inline is read the same way).

    An unknown status or a missing or mistyped part is an error: every task has its id, status, both
    timestamps and `ttlMs` (a number or null); an `input_required` one its `inputRequests`, a `completed`
    one its tool's result (a complete `CallToolResult`), a `failed` one its JSON-RPC error.
    """
    task_id, status = result.get(TASK_ID_PARAM), result.get("status")
    if not isinstance(task_id, str) or not task_id:
        raise ProtocolViolation("task without a taskId")
    if not is_task_status(status):
        raise ProtocolViolation(f"task {task_id} has unknown status {status!r}")
    _check_task_fields(task_id, result)
    requests: dict[str, Any] = {}
    outcome = error = None
    if status == TaskStatus.INPUT_REQUIRED and (detailed or "inputRequests" in result):
        requests = result.get("inputRequests")  # type: ignore[assignment]  # checked just below
        if not isinstance(requests, dict):
            raise ProtocolViolation(f"task {task_id} is input_required without an inputRequests object")
    elif status == TaskStatus.COMPLETED and (detailed or "result" in result):
        outcome = result.get("result")
        _results.check_tool_result(outcome, f"task {task_id} completed")
    elif status == TaskStatus.FAILED and (detailed or "error" in result):
        error = result.get("error")
        try:
            _results.check_error(error)
        except ProtocolViolation as exc:
            raise ProtocolViolation(f"task {task_id} failed: {exc}") from None
    return TaskSnapshot(
        task_id=task_id,
        status=str(status),
        status_message=_str_or_none(result.get("statusMessage")),
        created_at=result["createdAt"],
        last_updated_at=result["lastUpdatedAt"],
        ttl_ms=result["ttlMs"],
        poll_interval_ms=_int_or_none(result.get("pollIntervalMs")),
        input_requests=requests,
        result=outcome,
        error=error,
        instance=instance,
        raw=dict(result),
    )


def _check_task_fields(task_id: str, task: Mapping[str, Any]) -> None:
    """The members every task carries, and the optional ones typed as the extension types them."""
    for name in ("createdAt", "lastUpdatedAt"):
        if not isinstance(task.get(name), str):
            raise ProtocolViolation(f"task {task_id}: {name} must be a string ({task.get(name)!r})")
    if "ttlMs" not in task or not (task["ttlMs"] is None or _is_int(task["ttlMs"])):
        raise ProtocolViolation(f"task {task_id}: ttlMs must be an integer or null ({task.get('ttlMs', 'missing')!r})")
    if "pollIntervalMs" in task and not _is_int(task["pollIntervalMs"]):
        raise ProtocolViolation(f"task {task_id}: pollIntervalMs must be an integer ({task['pollIntervalMs']!r})")
    if "statusMessage" in task and not isinstance(task["statusMessage"], str):
        raise ProtocolViolation(f"task {task_id}: statusMessage must be a string ({task['statusMessage']!r})")


def _outcome_missing(snapshot: TaskSnapshot) -> bool:
    """A terminal task read without what ends the call: a completion without its result, a failure without its error."""
    return (snapshot.status == TaskStatus.COMPLETED and snapshot.result is None) or (
        snapshot.status == TaskStatus.FAILED and snapshot.error is None
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Follower:
    """The state of following one task: its trace, the keys answered, the time waited."""

    def __init__(
        self,
        task_id: str,
        declared: Mapping[str, Any],
        ids: Iterator[int],
        policy: RetryPolicy,
        task_policy: TaskPolicy,
        extra_headers: Mapping[str, str] | None,
        trace: CallTrace | None,
    ) -> None:
        self.task_id = task_id
        self.declared = declared
        self.ids = ids
        self.policy = policy
        self.task_policy = task_policy
        self.headers = extra_headers
        self.trace = trace or CallTrace(task_id=task_id)
        self.waited = 0.0
        self.answered: set[str] = set()
        self.push = PushFeed(task_policy.max_relistens, snapshot_from) if task_policy.push else None

    def follow(self, snapshot: TaskSnapshot | None, created: TaskExchange | None = None) -> Loop:
        try:
            if created is not None:
                yield from self.note(created)
            if snapshot is None or _outcome_missing(snapshot):  # a creation need not inline its outcome
                snapshot = yield from self.poll()
            last, finished = yield from self._until_terminal(snapshot)
            if self.push is not None:
                yield from self.push.close()
        except GeneratorExit:
            raise
        except (RpcError, AuthenticationFailed, RetryBudgetExhausted):
            raise  # the server refused or cannot be reached: a cancel would meet the same fate
        except BaseException:
            yield from self._cancel_quietly()
            raise
        if not finished:
            raise TaskWaitExceeded(self.task_id, self.waited, last.status)
        return self._finish(last)

    def _until_terminal(self, snapshot: TaskSnapshot) -> Generator[Step, Any, tuple[TaskSnapshot, bool]]:
        while not snapshot.terminal:
            pending = {key: req for key, req in snapshot.input_requests.items() if key not in self.answered}
            if snapshot.status == TaskStatus.INPUT_REQUIRED and pending:
                if len(pending) > self.policy.max_input_requests:
                    raise ProtocolViolation(f"task asks {len(pending)} questions at once")
                _results.check_input_requests(pending, self.declared, f"task {self.task_id}")
                asked_at = len(self.trace.polls)
                self.trace.questions.extend(Question(key, str(r.get("method")), asked_at) for key, r in pending.items())
                responses = yield Ask(pending)
                _, reply = yield from self.exchange(TASKS_UPDATE, {"inputResponses": responses})
                self.answered.update(pending)
                yield from self.note(self.exchange_record(TASKS_UPDATE, reply, None, "answered " + ", ".join(pending)))
                snapshot = yield from self.poll()
                continue
            pushed = (yield from self.push.next_snapshot(self)) if self.push is not None else None
            if pushed is not None:
                snapshot = pushed
                if self.out_of_time() and not snapshot.terminal:
                    return snapshot, False
                continue
            delay = self._interval(snapshot)
            max_wait = self.task_policy.max_wait
            if max_wait is not None and self.waited + delay > max_wait:
                return snapshot, False
            yield Sleep(delay)
            self.waited += delay
            snapshot = yield from self.poll()
        return snapshot, True

    def out_of_time(self) -> bool:
        max_wait = self.task_policy.max_wait
        return max_wait is not None and self.waited > max_wait

    def _interval(self, snapshot: TaskSnapshot) -> float:
        tp = self.task_policy
        hinted = snapshot.poll_interval_ms
        seconds = hinted / 1000 if hinted is not None and hinted > 0 else tp.default_poll_interval
        return min(tp.max_poll_interval, max(tp.min_poll_interval, seconds))

    def _finish(self, snapshot: TaskSnapshot) -> CallResult:
        if snapshot.status == TaskStatus.COMPLETED and snapshot.result is not None:
            return CallResult(result=snapshot.result, trace=self.trace)
        if snapshot.status == TaskStatus.FAILED:
            error = snapshot.error or {}
            code = error.get("code")
            raise TaskFailed(
                self.task_id,
                code if isinstance(code, int) else -32603,
                str(error.get("message", "task failed without an error object")),
                error.get("data"),
            )
        raise TaskCancelled(self.task_id, snapshot.status_message)

    def poll(self) -> Generator[Step, Any, TaskSnapshot]:
        result, reply = yield from self.exchange(TASKS_GET, {})
        snapshot = snapshot_from(result, reply.headers.get(_WORKER_ID))
        if snapshot.task_id != self.task_id:
            raise ProtocolViolation(f"asked for task {self.task_id}, got {snapshot.task_id}")
        yield from self.note(self.exchange_record(TASKS_GET, reply, snapshot))
        return snapshot

    def _cancel_quietly(self) -> Generator[Step, Any, None]:
        """One `tasks/cancel` on the way out; whatever happens to it, the original exception goes on."""
        try:
            _, reply = yield from self.exchange(TASKS_CANCEL, {}, self.task_policy.cancel_timeout, 1)
        except MrtrError as exc:
            failed = TaskExchange(TASKS_CANCEL, self.task_id, None, None, None, 0.0, self.waited, detail=str(exc))
            yield from self.note(failed)
            return
        yield from self.note(self.exchange_record(TASKS_CANCEL, reply, None, "acknowledged"))

    def exchange(
        self,
        method: str,
        extra: Mapping[str, Any],
        timeout: float | None = None,
        max_failures: int | None = None,
    ) -> Exchange:
        budget = self.policy.max_delivery_failures if max_failures is None else max_failures
        failures = 0
        while True:
            request_id = next(self.ids)
            params = {TASK_ID_PARAM: self.task_id, **extra, "_meta": request_meta(self.declared, _wire.CLIENT_INFO)}
            body = encode_request(request_id, method, params)
            outcome = yield Send(request_id, body, request_headers(method, params, self.headers), timeout)
            self.waited += outcome.elapsed_ms / 1000
            if isinstance(outcome, Failure) or outcome.status in RETRYABLE_STATUSES:
                failures += 1
                problem = outcome.problem if isinstance(outcome, Failure) else f"HTTP {outcome.status}"
                yield from self.note(self._transport_record(method, outcome, problem))
                if failures > budget:
                    raise RetryBudgetExhausted(failures, problem)
                delay = min(self.policy.backoff_cap, self.policy.backoff_initial * 2 ** (failures - 1))
                yield Sleep(delay)
                self.waited += delay
                continue
            if outcome.status in AUTH_STATUSES:
                raise AuthenticationFailed(outcome.status, _auth_problem(outcome))
            message = _parse(outcome, request_id)
            if "error" in message:
                raise _rpc_error(message["error"], outcome.status)
            result = message.get("result")
            if not isinstance(result, dict):
                raise ProtocolViolation("response has neither result nor error")
            _results.expect_complete(method, result)  # a task's read and both acknowledgements
            return result, outcome

    def exchange_record(
        self, method: str, reply: Reply, snapshot: TaskSnapshot | None, detail: str | None = None
    ) -> TaskExchange:
        return TaskExchange(
            method,
            self.task_id,
            reply.headers.get(_WORKER_ID),
            reply.headers.get(_WORKER_VERSION),
            reply.status,
            reply.elapsed_ms,
            self.waited,
            snapshot,
            detail,
        )

    def _transport_record(self, method: str, outcome: Reply | Failure, problem: str) -> TaskExchange:
        if isinstance(outcome, Failure):
            return TaskExchange(method, self.task_id, None, None, None, outcome.elapsed_ms, self.waited, detail=problem)
        return self.exchange_record(method, outcome, None, problem)

    def note(self, exchange: TaskExchange) -> Generator[Step, Any, None]:
        """Record an exchange in the trace and show it to the caller's observer, if any."""
        self.trace.task_exchanges.append(exchange)
        yield Observe(exchange)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
