"""`mrtr-call`: call a tool (or prompt or resource) and answer its questions in the terminal, hop by hop.

mrtr-call link_accounts
mrtr-call count_primes limit=2000000
mrtr-call --answer github_login.name=octocat --answer google_login.name=octo link_accounts
mrtr-call --prompt onboarding      mrtr-call --resource mrtr://reports/42
mrtr-call --task count_primes limit=20000000     (a task: one status line as it changes; Ctrl-C cancels it)
mrtr-call task get ID      mrtr-call task cancel ID      mrtr-call task wait ID
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx

from mrtr_client import Client, MrtrError, RetryPolicy, RpcError, TaskPolicy, TaskWaitExceeded
from mrtr_client.inputs import Answer, sampling_answer
from mrtr_client.trace import CallResult, TaskExchange, TaskSnapshot
from mrtr_protocol.tasks import (
    COMPUTE_META_KEY,
    SUBSCRIPTIONS_LISTEN,
    TASKS_CANCEL,
    TASKS_UPDATE,
    TaskStatus,
    requires_tasks,
    slice_workers,
)

TASK_COMMANDS = ("get", "cancel", "wait")
INTERRUPTED = 130

DEFAULT_URL = os.environ.get("MRTR_URL", "http://127.0.0.1:8080/mcp")


class AnswerNeeded(MrtrError):
    """A question nobody can answer: no terminal to ask, no `--answer` for it and no schema default."""


class TerminalInputs:
    """Asks the person at the terminal; `--answer` values are used without asking.

    A form is filled from the person's answers, `--answer` values or the schema's defaults, never from
    made-up values: without a terminal a field that has none of them stops the call with the `--answer`
    it needs (`--yes` declines the form instead). A model's reply is typed at the terminal or not at all.
    """

    def __init__(
        self, preset: dict[str, dict[str, str]], roots: list[str], interactive: bool, *, assume_yes: bool = False
    ) -> None:
        self._preset = preset
        self._roots = roots
        self._interactive = interactive
        self._assume_yes = assume_yes

    def capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}

    def answer(self, key: str, request: Mapping[str, Any]) -> Answer:
        method = request.get("method")
        params: Mapping[str, Any] = request.get("params") or {}
        if method == "roots/list":
            print(f"  [{key}] roots requested: answering {self._roots}")
            return {"roots": [{"uri": uri} for uri in self._roots]}
        if method == "sampling/createMessage":
            prompt = " ".join(m.get("content", {}).get("text", "") for m in params.get("messages", []))
            print(f"  [{key}] the server asks your model: {prompt}")
            reply = self._ask("  model reply> ")
            if reply is None:
                raise AnswerNeeded(f"[{key}] asks your model for a reply, and there is no terminal to type it in")
            return sampling_answer(reply, model="terminal")
        if params.get("mode") == "url":
            return self._url(key, params)
        return self._form(key, params)

    def _url(self, key: str, params: Mapping[str, Any]) -> Answer:
        """Show the whole URL and its site, then wait for the person: only they can open it and finish there.

        `accept` only says "I am done in the browser"; the server checks that. `--yes` never accepts (nobody
        went to the page), and neither does the end of input.
        """
        url = str(params.get("url", ""))
        print(f"  [{key}] {params.get('message')}\n      open: {url}\n      site: {urlsplit(url).netloc}", flush=True)
        if self._assume_yes:
            print("      --yes: a URL needs a person in a browser, so this request is declined", flush=True)
            return {"action": "decline"}
        try:
            typed = input("  press Enter once you are done in the browser (n declines)> ").strip().lower()
        except EOFError:
            print("\n      no more input: declined", flush=True)
            return {"action": "decline"}
        return {"action": "decline" if typed in ("n", "no") else "accept"}

    def _form(self, key: str, params: Mapping[str, Any]) -> Answer:
        schema = params.get("requestedSchema") or {}
        print(f"  [{key}] {params.get('message')}")
        required = set(schema.get("required") or [])
        preset = self._preset.get(key, {})
        content: dict[str, Any] = {}
        unanswered: list[str] = []
        for name, prop in (schema.get("properties") or {}).items():
            if name in preset:
                content[name] = _coerce(preset[name], prop)
                continue
            typed = self._ask(f"    {prop.get('title', name)} (empty declines)> ")
            if typed == "":
                return {"action": "decline"}
            if typed is not None:
                content[name] = _coerce(typed, prop)
            elif "default" in prop:
                content[name] = prop["default"]
            elif name in required:
                unanswered.append(name)
        if not unanswered:
            return {"action": "accept", "content": content}
        if self._assume_yes:
            print(f"      --yes: no answer for {', '.join(unanswered)}, so this form is declined", flush=True)
            return {"action": "decline"}
        needed = " ".join(f"--answer {key}.{name}=VALUE" for name in unanswered)
        raise AnswerNeeded(
            f"[{key}] asks {params.get('message')!r} and there is no terminal to ask it: answer it with {needed} "
            "(or give --yes to decline what is not answered)"
        )

    def _ask(self, prompt: str) -> str | None:
        """What the person typed (stripped), or None when nobody can be asked (no terminal, `--yes`, end of input)."""
        if not self._interactive:
            return None
        try:
            return input(prompt).strip()
        except EOFError:
            return None


def _coerce(text: str, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "boolean":
        return text.lower() in ("1", "true", "yes", "y")
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    return text


def _parse_arguments(pairs: list[str], json_args: str | None) -> dict[str, Any]:
    arguments: dict[str, Any] = json.loads(json_args) if json_args else {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        try:
            arguments[name] = json.loads(raw)
        except ValueError:
            arguments[name] = raw
    return arguments


def _parse_answers(values: list[str]) -> dict[str, dict[str, str]]:
    preset: dict[str, dict[str, str]] = {}
    for value in values:
        target, _, text = value.partition("=")
        key, _, field = target.partition(".")
        preset.setdefault(key, {})[field] = text
    return preset


def _print_trace(done: CallResult) -> None:
    for n, hop in enumerate(done.trace.hops, 1):
        where = f"{hop.instance or '-'} v{hop.version or '?'}"
        state = f"  state {hop.state_bytes} B" if hop.state_bytes else ""
        detail = f"  ({hop.detail})" if hop.detail else ""
        print(f"hop {n:>2}  {where:<28} {hop.reason:<10} {hop.elapsed_ms:8.1f} ms{state}{detail}")
    polls = done.trace.polls
    if done.task_id is not None:
        workers = ", ".join(dict.fromkeys(p.instance for p in polls if p.instance)) or "-"
        print(f"task {done.task_id}: {len(polls)} poll{'s' if len(polls) != 1 else ''} answered by {workers}")
        pushes = done.trace.pushes
        if pushes:
            streams = ", ".join(dict.fromkeys(p.instance for p in pushes if p.instance)) or "-"
            print(f"task {done.task_id}: {len(pushes)} change{'s' if len(pushes) != 1 else ''} pushed by {streams}")
        ran = slice_workers(done.result)
        if ran:
            compute = (done.result.get("_meta") or {}).get(COMPUTE_META_KEY) or {}
            where = ", ".join(f"{instance} v{version}" for instance, version in ran)
            count = f"{compute.get('steps')} steps in {compute.get('slices', len(ran))} slices"
            print(f"task {done.task_id}: {count}, run on {where}")


class StatusLine:
    """A task's progress on one line: status, the worker that answered the poll, the server's message, elapsed.

    On a terminal the line is rewritten in place at every poll; otherwise a line is printed each time
    the status, the answering worker or the message changes. The line is closed before a question,
    so prompts start on their own line. It also remembers the task and what became of a cancel.
    """

    def __init__(self, out: TextIO, live: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._out = out
        self._live = live
        self._clock = clock
        self._started = clock()
        self._last: tuple[str | None, str | None, str | None] | None = None
        self._open = False
        self.task_id: str | None = None
        self.cancel: TaskExchange | None = None

    def __call__(self, exchange: TaskExchange) -> None:
        self.task_id = exchange.task_id
        snapshot = exchange.snapshot
        if exchange.method == TASKS_CANCEL:
            self.cancel = exchange
            self.close()
        elif exchange.method in (TASKS_UPDATE, SUBSCRIPTIONS_LISTEN):
            self._print(f"  {exchange.detail} (on {exchange.instance or '-'})")
        elif snapshot is not None and exchange.detail == "created":
            every = f"poll every {snapshot.poll_interval_ms} ms" if snapshot.poll_interval_ms else "polling"
            self._print(f"task {snapshot.task_id} created on {exchange.instance or '-'} ({every}); Ctrl-C cancels it")
            self._show(snapshot, exchange.instance)
        elif snapshot is not None:
            self._show(snapshot, exchange.instance)
        elif exchange.detail:
            self._print(f"  poll not answered: {exchange.detail}; trying again")

    def _show(self, snapshot: TaskSnapshot, instance: str | None) -> None:
        message = snapshot.status_message
        elapsed = self._clock() - self._started
        text = f"  {snapshot.status:<15} {instance or '-':<12} {elapsed:7.1f} s" + (f"  {message}" if message else "")
        key = (snapshot.status, instance, message)
        if self._live:
            width = shutil.get_terminal_size().columns - 1  # a wrapped line could not be rewritten in place
            self._out.write("\r\x1b[K" + text[:width])
            self._out.flush()
            self._open = True
            if snapshot.status == TaskStatus.INPUT_REQUIRED or snapshot.terminal:
                self.close()
        elif key != self._last:
            self._print(text)
        self._last = key

    def _print(self, text: str) -> None:
        self.close()
        print(text, file=self._out, flush=True)

    def close(self) -> None:
        if self._open:
            self._out.write("\n")
            self._out.flush()
            self._open = False


def _print_snapshot(snapshot: TaskSnapshot, as_json: bool) -> None:
    if as_json:
        print(json.dumps(snapshot.raw, indent=2))
        return
    print(f"task {snapshot.task_id}")
    rows = [
        ("status", snapshot.status),
        ("message", snapshot.status_message),
        ("created", snapshot.created_at),
        ("last updated", snapshot.last_updated_at),
        ("ttl", f"{snapshot.ttl_ms} ms" if snapshot.ttl_ms is not None else "none"),
        ("poll interval", f"{snapshot.poll_interval_ms} ms" if snapshot.poll_interval_ms is not None else None),
        ("answered by", snapshot.instance),
    ]
    for label, value in rows:
        if value is not None:
            print(f"  {label:<14} {value}")
    for key, request in snapshot.input_requests.items():
        message = (request.get("params") or {}).get("message", "")
        print(f"  question       [{key}] {request.get('method')}: {message}")
    if snapshot.result is not None:
        print(json.dumps(snapshot.result, indent=2))
    if snapshot.error is not None:
        print(json.dumps(snapshot.error, indent=2))


def _print_result(done: CallResult, as_json: bool) -> None:
    _print_trace(done)
    if as_json:
        print(json.dumps(done.result, indent=2))
    elif done.structured is not None:
        print(json.dumps(done.structured, indent=2))
    else:
        print(done.text or json.dumps(done.result, indent=2))


def _interrupted(status: StatusLine) -> int:
    status.close()
    if status.task_id is None:
        print("mrtr-call: interrupted", file=sys.stderr)
    elif status.cancel is not None and status.cancel.detail == "acknowledged":
        where = status.cancel.instance or "-"
        print(f"mrtr-call: interrupted: task {status.task_id} cancelled (acknowledged by {where})", file=sys.stderr)
    else:
        problem = status.cancel.detail if status.cancel is not None else "no cancel sent"
        print(
            f"mrtr-call: interrupted: task {status.task_id} may still run ({problem}); "
            f"cancel it with `mrtr-call task cancel {status.task_id}`",
            file=sys.stderr,
        )
    return INTERRUPTED


def _failure(exc: MrtrError, status: StatusLine | None, is_task: bool) -> int:
    if status is not None:
        status.close()
    hint = ""
    if isinstance(exc, TaskWaitExceeded):
        hint = f"; follow it with `mrtr-call task wait {exc.task_id}` or `mrtr-call task cancel {exc.task_id}`"
    elif isinstance(exc, RpcError) and exc.code == -32021 and requires_tasks(exc.data) and not is_task:
        hint = "; this tool runs only as a task: add --task"
    print(f"mrtr-call: {exc}{hint}", file=sys.stderr)
    return 1


def _take_task_id(argv: list[str]) -> tuple[list[str], str | None]:
    """Take the ID out of `task get|cancel|wait ID` before argparse reads the line.

    Task ids are base64url, so one in 64 starts with `-`, which argparse would read as an option
    (`-hX…` even as `-h`). The ID is the word after the command, whatever it looks like.
    """
    for at in range(len(argv) - 2):
        if argv[at] == "task" and argv[at + 1] in TASK_COMMANDS:
            return [*argv[: at + 2], *argv[at + 3 :]], argv[at + 2]
    return argv, None


def main(argv: list[str] | None = None, *, http: httpx.Client | None = None) -> int:
    argv, given_task_id = _take_task_id(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="mrtr-call",
        description=__doc__.split("\n\n")[0],
        epilog="tasks: `mrtr-call task get|cancel|wait ID` reads, cancels or follows a task by its id",
    )
    parser.add_argument("target", help="tool name (or prompt name / resource URI with --prompt / --resource), or task")
    parser.add_argument("arguments", nargs="*", help="name=value pairs (values parsed as JSON when they can be)")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"MCP endpoint (default {DEFAULT_URL}; env MRTR_URL)")
    parser.add_argument(
        "--token", default=os.environ.get("MRTR_TOKEN"), help="bearer token (env MRTR_TOKEN; scripts/mint-token)"
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--prompt", action="store_true", help="get a prompt instead of calling a tool")
    kind.add_argument("--resource", action="store_true", help="read a resource instead of calling a tool")
    kind.add_argument(
        "--task", action="store_true", help="call the tool as a task (the server decides); Ctrl-C cancels it"
    )
    parser.add_argument("--json-args", help="arguments as one JSON object")
    parser.add_argument("--answer", action="append", default=[], help="pre-answer a form: KEY.FIELD=VALUE")
    parser.add_argument("--root", action="append", default=[], help="root URI to offer (default: this directory)")
    parser.add_argument("--max-rounds", type=int, default=RetryPolicy.max_rounds)
    parser.add_argument(
        "--max-wait", type=float, default=TaskPolicy.max_wait, help="seconds to wait for a task (it goes on after)"
    )
    parser.add_argument(
        "--no-push", action="store_true", help="poll a task with tasks/get instead of listening for its changes"
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="never prompt: forms from --answer and schema defaults, else declined; URL requests declined",
    )
    parser.add_argument("--json", action="store_true", help="print the complete result (or the task) as JSON")
    args = parser.parse_args(argv)

    task_command = args.target == "task" and args.arguments[:1] and args.arguments[0] in TASK_COMMANDS
    if task_command and (given_task_id is None or len(args.arguments) != 1):
        parser.error(f"usage: mrtr-call task {'|'.join(TASK_COMMANDS)} ID")
    roots = args.root or [Path.cwd().as_uri()]
    inputs = TerminalInputs(
        _parse_answers(args.answer), roots, interactive=not args.yes and sys.stdin.isatty(), assume_yes=args.yes
    )
    policy = RetryPolicy(max_rounds=args.max_rounds)
    task_policy = TaskPolicy(max_wait=args.max_wait, push=not args.no_push)
    following = args.task or (task_command and args.arguments[0] == "wait")
    status = StatusLine(sys.stdout, live=sys.stdout.isatty()) if following else None
    try:
        with Client(args.url, inputs, policy=policy, token=args.token, http=http, task_policy=task_policy) as client:
            if task_command:
                command, task_id = args.arguments[0], str(given_task_id)
                if command == "get":
                    _print_snapshot(client.get_task(task_id), args.json)
                    return 0
                if command == "cancel":
                    client.cancel_task(task_id)
                    print(f"task {task_id}: cancel acknowledged (it settles at its next step boundary)")
                    return 0
                done = client.wait_task(task_id, on_task=status)
            elif args.prompt:
                done = client.get_prompt(args.target, _parse_arguments(args.arguments, args.json_args))
            elif args.resource:
                done = client.read_resource(args.target)
            else:
                arguments = _parse_arguments(args.arguments, args.json_args)
                done = client.call_tool(args.target, arguments, task=args.task, on_task=status)
    except KeyboardInterrupt:
        return _interrupted(status or StatusLine(sys.stdout, live=False))
    except MrtrError as exc:
        return _failure(exc, status, following)
    if status is not None:
        status.close()
    _print_result(done, args.json)
    return 1 if done.is_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
