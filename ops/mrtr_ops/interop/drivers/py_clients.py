"""Drive the Python MCP clients against the cluster: the MCP Python SDK's `Client`, and FastMCP's.

Run by path, not imported: `python py_clients.py {mcp-sdk|fastmcp|fastmcp-tasks} CONFIG.json`.
It uses only the client libraries and the standard library (the `fastmcp-tasks` run happens in its
own virtual environment, where nothing of this project is installed), answers the questions the
orchestrator scripted, and prints one JSON line per feature: the client's result in wire shape (or
its error), the questions it was asked, and every HTTP exchange with the worker that answered it.
The orchestrator (`mrtr_ops.interop`) checks every answer.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import BaseModel

PROTOCOL_VERSION = "2026-07-28"

Feature = Callable[[], Awaitable[Any]]


class Exchanges:
    """Every HTTP exchange, from httpx2's event hooks: method, Mcp-Name, worker, status, times (ms)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []
        self._origin = time.perf_counter()

    def _now_ms(self) -> float:
        return round((time.perf_counter() - self._origin) * 1000, 3)

    async def on_request(self, request: httpx2.Request) -> None:
        try:
            method = json.loads(request.content).get("method", "response") if request.content else request.method
        except ValueError:
            method = "unparsed"
        entry = {"method": method, "name": request.headers.get("mcp-name"), "startedMs": self._now_ms()}
        request.extensions["interop_entry"] = entry
        self.entries.append(entry)

    async def on_response(self, response: httpx2.Response) -> None:
        entry = response.request.extensions.get("interop_entry")
        if isinstance(entry, dict):
            worker = response.headers.get("x-worker-id")
            entry.update(answeredMs=self._now_ms(), status=response.status_code, worker=worker)

    def http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
        **ignored: Any,
    ) -> httpx2.AsyncClient:
        """An httpx2 client as the SDK makes it (its timeouts), with the hooks that record exchanges.

        FastMCP also passes `follow_redirects`; the SDK's own client already follows only same-origin redirects.
        """
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = {"request": [self.on_request], "response": [self.on_response]}
        return client


def _wire(value: Any) -> Any:
    """A result as it travels (camelCase keys, no unset fields), whatever the client returned."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_wire(item) for item in value]
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items()}
    return value


def _form_answer(answers: Mapping[str, Any], message: str) -> dict[str, Any] | None:
    for rule in answers["forms"]:
        if rule["match"] in message:
            content: dict[str, Any] = rule["content"]
            return content
    return None


def _complete_vault_page(helper: str, url: str) -> None:
    """Ask the orchestrator to complete the vault page flow as the signed-in user (a person in a browser)."""
    request = urllib.request.Request(  # noqa: S310 (the orchestrator's loopback address)
        helper, data=json.dumps({"url": url}).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        response.read()


def _describe(error: BaseException) -> dict[str, Any]:
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    inner = getattr(error, "error", None)  # the SDK's MCPError keeps the JSON-RPC error here
    code = getattr(inner, "code", getattr(error, "code", None))
    if isinstance(code, int):
        described["code"] = code
        described["message"] = str(getattr(inner, "message", described["message"]))
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _describe(error.exceptions[0])
    return described


async def _run(exchanges: Exchanges, feature: str, body: Feature) -> None:
    start = len(exchanges.entries)
    exchanges.asked = []
    record: dict[str, Any] = {"feature": feature}
    began = time.perf_counter()
    try:
        record["value"] = _wire(await body())
        record["ok"] = True
    except Exception as error:  # every failure is the record's, for the orchestrator to judge
        record["ok"] = False
        record["error"] = _describe(error)
    record["elapsedMs"] = round((time.perf_counter() - began) * 1000, 3)
    record["asked"] = exchanges.asked
    record["exchanges"] = [
        {key: entry.get(key) for key in ("method", "name", "worker", "status", "startedMs", "answeredMs")}
        for entry in exchanges.entries[start:]
    ]
    print(json.dumps(record), flush=True)


def _mrtr_features(config: Mapping[str, Any], call: Callable[..., Awaitable[Any]], client: Any) -> dict[str, Feature]:
    """The MRTR paths, the same for every client: `call(name, arguments)` is the client's own tools/call."""
    return {
        "elicitation": lambda: call("link_accounts", {}),
        "sampling": lambda: call("write_haiku", {"topic": config["haikuTopic"]}),
        "roots": lambda: call("scan_roots", {}),
        "handback": lambda: call("count_primes", {"limit": config["primesLimit"]}),
        "prompt": lambda: client.get_prompt("onboarding", {}),
        "resource": lambda: client.read_resource(config["resourceUri"]),
        "url_elicitation": lambda: call("connect_vault", {}),
    }


async def _mcp_sdk(config: Mapping[str, Any]) -> None:
    """The MCP Python SDK's `Client`: its input_required driver answers through the callbacks below."""
    exchanges = Exchanges()
    answers = config["answers"]

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        exchanges.asked.append({"method": "elicitation/create", "params": _wire(params)})
        if isinstance(params, types.ElicitRequestURLParams):
            await asyncio.to_thread(_complete_vault_page, config["vaultHelper"], params.url)
            return types.ElicitResult(action="accept")
        content = _form_answer(answers, params.message)
        if content is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        exchanges.asked.append({"method": "sampling/createMessage", "params": _wire(params)})
        text = types.TextContent(type="text", text=answers["sampling"]["text"])
        return types.CreateMessageResult(role="assistant", content=text, model=answers["sampling"]["model"])

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        exchanges.asked.append({"method": "roots/list", "params": None})
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in answers["roots"]])

    headers = {"Authorization": f"Bearer {config['token']}"} if config.get("token") else None
    transport = streamable_http_client(config["url"], http_client=exchanges.http_client(headers=headers))
    client = Client(
        transport,
        mode=PROTOCOL_VERSION,
        elicitation_callback=elicit,
        sampling_callback=sample,
        list_roots_callback=roots,
    )
    await _drive(exchanges, config, client, lambda c: _mrtr_features(config, c.call_tool, c))


async def _fastmcp(config: Mapping[str, Any], *, tasks: bool) -> None:
    """FastMCP's `Client`; with `tasks`, `fastmcp_tasks` is imported first, which turns its tasks client on."""
    if tasks:
        importlib.import_module("fastmcp_tasks")  # registers the tasks extension on every FastMCP Client
    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StreamableHttpTransport

    exchanges = Exchanges()
    answers = config["answers"]

    async def elicit(message: str, response_type: Any, params: types.ElicitRequestParams, context: Any) -> Any:
        exchanges.asked.append({"method": "elicitation/create", "params": _wire(params)})
        if isinstance(params, types.ElicitRequestURLParams):
            await asyncio.to_thread(_complete_vault_page, config["vaultHelper"], params.url)
            return types.ElicitResult(action="accept")
        content = _form_answer(answers, message)
        return content if content is not None else types.ElicitResult(action="decline")

    async def sample(messages: Any, params: Any, context: Any) -> str:
        exchanges.asked.append({"method": "sampling/createMessage", "params": _wire(params)})
        text: str = answers["sampling"]["text"]
        return text

    async def roots(context: Any) -> list[str]:
        exchanges.asked.append({"method": "roots/list", "params": None})
        return list(answers["roots"])

    headers = {"Authorization": f"Bearer {config['token']}"} if config.get("token") else None
    transport = StreamableHttpTransport(config["url"], headers=headers, httpx_client_factory=exchanges.http_client)
    client = FastMCPClient(
        transport,
        mode=PROTOCOL_VERSION,
        elicitation_handler=elicit,
        sampling_handler=sample,
        roots=roots,
    )

    def features(c: Any) -> dict[str, Feature]:
        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return _fastmcp_result(await c.call_tool(name, arguments, raise_on_error=False))

        async def read_resource() -> dict[str, Any]:
            return {"contents": _wire(list(await c.read_resource(config["resourceUri"])))}  # FastMCP returns the list

        mrtr = {**_mrtr_features(config, call, c), "resource": read_resource}
        return {**mrtr, **_fastmcp_task_features(config, c, call)}

    await _drive(exchanges, config, client, features)


def _fastmcp_result(result: Any) -> dict[str, Any]:
    """FastMCP's own CallToolResult, in wire shape."""
    wire: dict[str, Any] = {"content": _wire(list(result.content)), "isError": bool(result.is_error)}
    if result.structured_content is not None:
        wire["structuredContent"] = result.structured_content
    if result.meta is not None:
        wire["_meta"] = result.meta
    return wire


def _fastmcp_task_features(
    config: Mapping[str, Any], client: Any, call: Callable[[str, dict[str, Any]], Awaitable[Any]]
) -> dict[str, Feature]:
    """The tasks paths through fastmcp_tasks: `call_tool` drives a task transparently; cancel needs its handle."""

    async def cancel() -> Any:
        tasks_client = importlib.import_module("fastmcp_tasks.client")
        task = await tasks_client.call_tool_task(client, "count_primes", {"limit": config["cancelPrimesLimit"]})
        await task.cancel()
        return {"taskId": task.task_id}

    return {
        "task_result": lambda: call("count_primes", {"limit": config["taskPrimesLimit"]}),
        "task_input": lambda: call("estimate_pi", dict(config["piArguments"])),
        "task_cancel": cancel,
        "prime_report": lambda: call("prime_report", {}),
    }


async def _drive(
    exchanges: Exchanges, config: Mapping[str, Any], client: Any, features: Callable[[Any], dict[str, Feature]]
) -> None:
    """Connect once, run the configured features in order; a failed connect is every remaining feature's error."""
    done: list[str] = []
    try:
        connection: AbstractAsyncContextManager[Any] = client
        async with connection as connected:
            table = features(connected)
            for name in config["features"]:
                await _run(exchanges, name, table[name])
                done.append(name)
    except Exception as error:
        failure = error

        async def fail() -> None:
            raise failure

        for name in config["features"]:
            if name not in done:
                await _run(exchanges, name, fail)


def main(argv: list[str]) -> int:
    kind, config_path = argv[1], argv[2]
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    if kind == "mcp-sdk":
        asyncio.run(_mcp_sdk(config))
    elif kind in ("fastmcp", "fastmcp-tasks"):
        asyncio.run(_fastmcp(config, tasks=kind == "fastmcp-tasks"))
    else:
        print(f"unknown client {kind!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
