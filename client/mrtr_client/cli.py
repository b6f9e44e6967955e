"""`mrtr-call`: call a tool (or prompt or resource) and answer its questions in the terminal, hop by hop.

mrtr-call link_accounts
mrtr-call count_primes limit=2000000
mrtr-call --answer github_login.name=octocat --answer google_login.name=octo link_accounts
mrtr-call --prompt onboarding      mrtr-call --resource mrtr://reports/42
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mrtr_client import Client, MrtrError, RetryPolicy
from mrtr_client.inputs import Answer, default_form_content, sampling_answer
from mrtr_client.trace import CallResult

DEFAULT_URL = os.environ.get("MRTR_URL", "http://127.0.0.1:8080/mcp")


class TerminalInputs:
    """Asks the person at the terminal; `--answer` values are used without asking."""

    def __init__(self, preset: dict[str, dict[str, str]], roots: list[str], interactive: bool) -> None:
        self._preset = preset
        self._roots = roots
        self._interactive = interactive

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
            return sampling_answer(self._ask("  model reply> ", "(no model attached)"), model="terminal")
        if params.get("mode") == "url":
            print(f"  [{key}] {params.get('message')}\n      open: {params.get('url')}")
            done = self._ask("  completed in the browser? [y/N] ", "y").lower().startswith("y")
            return {"action": "accept" if done else "decline"}
        return self._form(key, params)

    def _form(self, key: str, params: Mapping[str, Any]) -> Answer:
        schema = params.get("requestedSchema") or {}
        print(f"  [{key}] {params.get('message')}")
        defaults = default_form_content(schema)
        content: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            if name in self._preset.get(key, {}):
                content[name] = _coerce(self._preset[key][name], prop)
                continue
            label = prop.get("title", name)
            typed = self._ask(f"    {label} (empty declines)> ", str(defaults[name]))
            if typed == "":
                return {"action": "decline"}
            content[name] = _coerce(typed, prop)
        return {"action": "accept", "content": content}

    def _ask(self, prompt: str, fallback: str) -> str:
        if not self._interactive:
            return fallback
        try:
            return input(prompt).strip()
        except EOFError:
            return fallback


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mrtr-call", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="tool name (or prompt name / resource URI with --prompt / --resource)")
    parser.add_argument("arguments", nargs="*", help="name=value pairs (values parsed as JSON when they can be)")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"MCP endpoint (default {DEFAULT_URL}; env MRTR_URL)")
    parser.add_argument(
        "--token", default=os.environ.get("MRTR_TOKEN"), help="bearer token (env MRTR_TOKEN; scripts/mint-token)"
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--prompt", action="store_true", help="get a prompt instead of calling a tool")
    kind.add_argument("--resource", action="store_true", help="read a resource instead of calling a tool")
    parser.add_argument("--json-args", help="arguments as one JSON object")
    parser.add_argument("--answer", action="append", default=[], help="pre-answer a form: KEY.FIELD=VALUE")
    parser.add_argument("--root", action="append", default=[], help="root URI to offer (default: this directory)")
    parser.add_argument("--max-rounds", type=int, default=RetryPolicy.max_rounds)
    parser.add_argument("--yes", action="store_true", help="never prompt: accept defaults")
    parser.add_argument("--json", action="store_true", help="print the complete result as JSON")
    args = parser.parse_args(argv)

    roots = args.root or [Path.cwd().as_uri()]
    inputs = TerminalInputs(_parse_answers(args.answer), roots, interactive=not args.yes and sys.stdin.isatty())
    try:
        with Client(args.url, inputs, policy=RetryPolicy(max_rounds=args.max_rounds), token=args.token) as client:
            if args.prompt:
                done = client.get_prompt(args.target, _parse_arguments(args.arguments, args.json_args))
            elif args.resource:
                done = client.read_resource(args.target)
            else:
                done = client.call_tool(args.target, _parse_arguments(args.arguments, args.json_args))
    except MrtrError as exc:
        print(f"mrtr-call: {exc}", file=sys.stderr)
        return 1
    _print_trace(done)
    if args.json:
        print(json.dumps(done.result, indent=2))
    elif done.structured is not None:
        print(json.dumps(done.structured, indent=2))
    else:
        print(done.text or json.dumps(done.result, indent=2))
    return 1 if done.is_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
