"""Reading what a server answers the way the 2026-07-28 wire says it MUST be, before the client acts on it.

Official clients parse results against the schema and refuse what does not fit; guessing instead hides
a broken server (the tasks extension's own client settled every completed task `failed` when the result
a task inlined lacked its `resultType`). So this client checks, and says exactly what was wrong:

* `resultType`: every result of a 2026-07-28 server MUST carry one, and a client MUST read an absent one
  as `complete` when the result may come from a server of an earlier protocol version. So an absent one
  is read as `complete` only for the methods such a server also answers (`EARLIER_METHODS`: tool calls,
  prompts, resources, the lists; the official conformance suite checks this, scenario
  `sep-2322-client-request-state`), and is a protocol error for every result only a 2026-07-28 server
  sends: `server/discover`, a listen's completion, the tasks extension's answers and a task's inlined
  tool result (the extension exists only on 2026-07-28);
* a complete result has the parts its method's result requires (a tool result's `content`, a prompt's
  `messages`, a resource's `contents`, a cacheable result's `ttlMs` and `cacheScope`, ...);
* `input_required` comes only from `tools/call`, `prompts/get` and `resources/read`, asks only the three
  kinds of input request, and only the kinds this request declared in its `clientCapabilities`;
* a JSON-RPC error has an integer `code` and a string `message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_client.errors import ProtocolViolation
from mrtr_protocol.tasks import SUBSCRIPTION_ID_META_KEY

COMPLETE = "complete"
INPUT_REQUIRED = "input_required"

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only methods whose result may be `input_required`."""

EARLIER_METHODS = frozenset(
    {
        "tools/call",
        "tools/list",
        "prompts/get",
        "prompts/list",
        "resources/read",
        "resources/list",
        "resources/templates/list",
        "completion/complete",
    }
)
"""Methods a server of an earlier protocol version answers too: its results carry no `resultType`, which a
client MUST then read as `complete`. Any other result comes from a 2026-07-28 server, which MUST include it."""

_CACHEABLE: tuple[tuple[str, type], ...] = (("ttlMs", int), ("cacheScope", str))
"""What a cacheable result (a resource's contents, a list, discovery) carries besides its own parts."""

REQUIRED_PARTS: dict[str, tuple[tuple[str, type], ...]] = {
    "tools/call": (("content", list),),
    "prompts/get": (("messages", list),),
    "resources/read": (("contents", list), *_CACHEABLE),
    "server/discover": (("supportedVersions", list), ("capabilities", dict), *_CACHEABLE),
    "tools/list": (("tools", list), *_CACHEABLE),
    "prompts/list": (("prompts", list), *_CACHEABLE),
    "resources/list": (("resources", list), *_CACHEABLE),
    "resources/templates/list": (("resourceTemplates", list), *_CACHEABLE),
    "completion/complete": (("completion", dict),),
    "subscriptions/listen": (("_meta", dict),),
}
"""What each method's complete result must hold (the schema's required members), by method."""

_KIND_NAMES = {list: "an array", dict: "an object", str: "a string", int: "an integer"}


def result_type(result: Mapping[str, Any], method: str) -> str:
    """The `resultType` of a result of `method`; an absent one reads as `complete` only where an earlier-version
    server may have sent it (`EARLIER_METHODS`), and is a protocol error anywhere else."""
    return _result_type(result, method, earlier_server_possible=method in EARLIER_METHODS)


def _result_type(result: Mapping[str, Any], what: str, *, earlier_server_possible: bool) -> str:
    value = result.get("resultType")
    if value is None:
        if earlier_server_possible:
            return COMPLETE  # MUST: a server of an earlier protocol version sends none
        raise ProtocolViolation(
            f"{what} result without resultType: only a 2026-07-28 server sends it, and such a server MUST include "
            "one (an absent resultType means 'complete' only from servers of earlier protocol versions)"
        )
    if not isinstance(value, str):
        raise ProtocolViolation(f"{what} result has resultType {value!r}, not a string")
    return value


def check_complete(method: str, result: Mapping[str, Any]) -> None:
    """A complete result of `method` has every part its schema requires."""
    for name, kind in REQUIRED_PARTS.get(method, ()):
        value = result.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            found = "missing" if name not in result else repr(value)[:40]
            raise ProtocolViolation(f"{method} result: {name} must be {_KIND_NAMES[kind]} ({found})")
    if method == "tools/call" and not isinstance(result.get("isError", False), bool):
        raise ProtocolViolation(f"tools/call result: isError must be a boolean, not {result['isError']!r}")
    if method == "subscriptions/listen" and SUBSCRIPTION_ID_META_KEY not in result["_meta"]:
        raise ProtocolViolation(f"subscriptions/listen result: _meta has no {SUBSCRIPTION_ID_META_KEY}")


def expect_complete(method: str, result: Mapping[str, Any]) -> None:
    """A result that can only be complete (a task's read, an acknowledgement): resultType `complete`."""
    found = result_type(result, method)
    if found != COMPLETE:
        raise ProtocolViolation(f"{method} result has resultType {found!r}; it can only be 'complete'")
    check_complete(method, result)


def check_tool_result(result: Any, where: str) -> None:
    """A tool's result carried inside a task (a completed task's `result`): a complete `CallToolResult`, with its
    `resultType`, since only a 2026-07-28 server runs tasks."""
    if not isinstance(result, dict):
        raise ProtocolViolation(f"{where}: result is not an object")
    try:
        found = _result_type(result, "tools/call", earlier_server_possible=False)
        if found != COMPLETE:
            raise ProtocolViolation(f"tools/call result has resultType {found!r}; it can only be 'complete'")
        check_complete("tools/call", result)
    except ProtocolViolation as exc:
        raise ProtocolViolation(f"{where}: {exc}") from None


_INPUT_KINDS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def check_input_requests(requests: Any, capabilities: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """`inputRequests` as the wire allows them: an object of the three request kinds, each one declared."""
    if not isinstance(requests, dict):
        raise ProtocolViolation(f"{where}: inputRequests is not an object")
    for key, request in requests.items():
        if not isinstance(request, dict):
            raise ProtocolViolation(f"{where}: input request {key!r} is not an object")
        method = request.get("method")
        kind = _INPUT_KINDS.get(method) if isinstance(method, str) else None
        if kind is None:
            raise ProtocolViolation(
                f"{where}: input request {key!r} has method {method!r}; only {', '.join(_INPUT_KINDS)} may be asked"
            )
        params = request.get("params", {} if kind == "roots" else None)
        if not isinstance(params, dict):
            raise ProtocolViolation(f"{where}: input request {key!r} ({method}) has no params object")
        needed = _needed_capability(kind, params)
        if not _declared(capabilities, needed):
            raise ProtocolViolation(
                f"{where}: input request {key!r} needs {'.'.join(needed)}, which this request did not declare "
                "in its clientCapabilities (a server MUST NOT ask for it)"
            )
        if kind == "elicitation":
            _check_elicitation(key, params, where)
    return requests


def _needed_capability(kind: str, params: Mapping[str, Any]) -> tuple[str, ...]:
    if kind != "elicitation":
        return (kind,)
    mode = params.get("mode", "form")  # a missing mode MUST be read as form
    return ("elicitation", mode if isinstance(mode, str) else "?")


def _declared(capabilities: Mapping[str, Any], needed: tuple[str, ...]) -> bool:
    declared = capabilities.get(needed[0])
    if not isinstance(declared, Mapping):
        return False
    if len(needed) == 1:
        return True
    mode = needed[1]
    if mode == "form" and not declared:
        return True  # `elicitation: {}` declares form mode
    return isinstance(declared.get(mode), Mapping)


def _check_elicitation(key: str, params: Mapping[str, Any], where: str) -> None:
    if not isinstance(params.get("message"), str):
        raise ProtocolViolation(f"{where}: elicitation {key!r} has no message")
    if params.get("mode", "form") == "url":
        if not isinstance(params.get("url"), str):
            raise ProtocolViolation(f"{where}: URL-mode elicitation {key!r} has no url")
    elif not isinstance(params.get("requestedSchema"), dict):
        raise ProtocolViolation(f"{where}: form elicitation {key!r} has no requestedSchema object")


def check_error(error: Any) -> tuple[int, str]:
    """A JSON-RPC error object's code and message; anything else is a protocol error."""
    if not isinstance(error, dict):
        raise ProtocolViolation(f"error is not an object: {error!r:.80}")
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool):
        raise ProtocolViolation(f"error without an integer code: {error!r:.120}")
    if not isinstance(message, str):
        raise ProtocolViolation(f"error without a message: {error!r:.120}")
    return code, message
