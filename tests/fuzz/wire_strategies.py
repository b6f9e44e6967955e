"""Hypothesis strategies that break valid requests: values, structure, bytes and headers.

Structure-aware: a case starts from one of the valid requests in
`tests.fuzz.calls` and applies one to three mutations at random places in
the document (wrong types, missing and extra members, duplicate keys, huge
strings and numbers, deep nesting, unicode including lone surrogates, batch
arrays, other methods and tool names), then may corrupt the bytes. The
headers are those a correct client would send for the broken document, so
cases get past the header checks and into the worker; the header property
breaks those instead.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mrtr_protocol.wire import PROTOCOL_VERSION
from tests.fuzz.calls import VALID_CALLS, Call, headers_for
from tests.fuzz.jsontext import RAW_TOKENS, DupObject, Raw, to_json
from tests.fuzz.oracle import Sent

Path = tuple[str | int, ...]

_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
json_values = st.recursive(
    _leaves,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)
"""Any ordinary JSON value."""

ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "\ud800",
    "\udfff\ud800",
    "\u00e9",
    "\u2603",
    "\U0001d54f",
    "\u202e",
    "../../etc/passwd",
    "%s%n",
    "${jndi:ldap://x}",
    "<script>",
    "tools/call",
    "link_accounts",
    "v1.",
    "=?base64?AAAA?=",
    "null",
)
SPECIAL_CHARACTERS = ("\ud800", "\udfff", "\x00", "\u202e", "\ufeff", "\u00e9", "\U0001d54f", '"', "\\")
any_text = st.lists(st.characters(exclude_categories=()) | st.sampled_from(SPECIAL_CHARACTERS), max_size=30).map(
    "".join
)
"""Unicode text, lone surrogates included (JSON can carry them escaped), rare characters made common.

Built from a list of characters: `st.text` would drop the surrogates again.
"""
long_text = st.sampled_from([1_000, 30_000, 300_000, 1_100_000]).map(lambda n: "y" * n)
"""Long strings, the last one over the worker's 1 MiB body limit."""
edge_numbers = st.sampled_from([2**31, 2**53 + 1, 2**63, 2**64, -(2**63) - 1, 10**100, 1e308, -1e308, 5e-324, -0.0])

plain_hostile_values = st.one_of(json_values, st.sampled_from(ODD_STRINGS), any_text, edge_numbers)
"""Hostile values `json.dumps` can write and that fit in a request: no raw tokens, no megabyte strings."""

hostile_values = st.one_of(
    json_values,
    st.sampled_from(ODD_STRINGS),
    any_text,
    long_text,
    edge_numbers,
    st.sampled_from(RAW_TOKENS),
)
"""What a mutation puts where a value was."""

MEMBER_NAMES = (
    "id",
    "jsonrpc",
    "method",
    "params",
    "result",
    "error",
    "_meta",
    "name",
    "arguments",
    "uri",
    "cursor",
    "requestState",
    "inputResponses",
    PROTOCOL_VERSION_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    "elicitation",
    "sampling",
    "roots",
)
member_names = st.sampled_from(MEMBER_NAMES) | st.text(max_size=10)

METHODS = (
    "tools/call",
    "tools/list",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "server/discover",
    "subscriptions/listen",
    "completion/complete",
    "initialize",
    "ping",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "tasks/get",
    "elicitation/create",
    "sampling/createMessage",
    "roots/list",
)
TOOL_NAMES = (
    "echo",
    "link_accounts",
    "write_haiku",
    "scan_roots",
    "connect_vault",
    "count_primes",
    "hash_chain",
    "estimate_pi",
    "onboarding",
    "no_such_tool",
    "mrtr://reports/1",
)


def _children(node: Any) -> list[str | int]:
    if isinstance(node, dict):
        return list(node)
    if isinstance(node, list):
        return list(range(len(node)))
    return []


def _paths(doc: Any, prefix: Path = ()) -> list[Path]:
    """Every place in the document a mutation can touch (not inside raw tokens)."""
    found: list[Path] = []
    for key in _children(doc):
        path = (*prefix, key)
        found.append(path)
        found.extend(_paths(doc[key], path))
    return found


def _parent(doc: Any, path: Path) -> Any:
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def _set(doc: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    _parent(doc, path)[path[-1]] = value
    return doc


def _get(doc: Any, path: Path) -> Any:
    node = doc
    for key in path:
        node = node[key]
    return node


@st.composite
def _mutation(draw: st.DrawFn, doc: Any) -> Any:
    """One mutation of `doc` (which it may change in place); returns the new document."""
    paths = _paths(doc)
    op = draw(
        st.sampled_from(("replace", "delete", "insert", "duplicate", "wrap", "batch", "method", "name"))
        if paths
        else st.sampled_from(("replace", "batch"))
    )
    if op == "batch":
        return [doc] * draw(st.integers(0, 3))
    if op == "method" and isinstance(doc, dict):
        doc["method"] = draw(st.sampled_from(METHODS) | any_text)
        return doc
    if op == "name" and isinstance(doc, dict) and isinstance(doc.get("params"), dict):
        key = "uri" if doc.get("method") == "resources/read" else "name"
        doc["params"][key] = draw(st.sampled_from(TOOL_NAMES) | any_text)
        return doc
    inside = [p for p in paths if p[0] == "params"]  # most cases should get past the envelope checks
    prefer_inside = bool(inside) and draw(st.integers(0, 3)) > 0
    path: Path = draw(st.sampled_from(inside if prefer_inside else paths)) if paths else ()
    if op == "delete" and path:
        parent = _parent(doc, path)
        del parent[path[-1]]
        return doc
    if op == "insert":
        containers = [p for p in [(), *paths] if isinstance(_get(doc, p), dict)]
        target = _get(doc, draw(st.sampled_from(containers))) if containers else None
        if isinstance(target, dict):
            target[draw(member_names)] = draw(hostile_values)
            return doc
    if op == "duplicate":
        containers = [p for p in [(), *paths] if isinstance(_get(doc, p), dict) and _get(doc, p)]
        if containers:
            where = draw(st.sampled_from(containers))
            node = _get(doc, where)
            key = draw(st.sampled_from(list(node)))
            extra = (key, draw(hostile_values))
            pairs = [*node.items(), extra] if draw(st.booleans()) else [extra, *node.items()]
            return _set(doc, where, DupObject(tuple(pairs)))
    if op == "wrap":
        node = _get(doc, path)
        return _set(doc, path, [node] if draw(st.booleans()) else {draw(member_names): node})
    return _set(doc, path, draw(hostile_values))


@st.composite
def broken_documents(draw: st.DrawFn) -> tuple[Call, Any]:
    """A valid request (which one, returned too) with one to three mutations."""
    call = draw(st.sampled_from(VALID_CALLS))
    doc: Any = copy.deepcopy(call.document(draw(st.integers(-(2**63), 2**63) | st.text(max_size=8))))
    for _ in range(draw(st.integers(1, 3))):
        if isinstance(doc, Raw | DupObject):
            break
        doc = draw(_mutation(doc))
    return call, doc


BYTE_CORRUPTIONS = ("none", "truncate", "insert", "overwrite", "bom", "utf16", "suffix", "invalid-utf8")


@st.composite
def corrupted(draw: st.DrawFn, text: str) -> bytes:
    """The document's bytes, sometimes corrupted (three times in four untouched)."""
    body = text.encode("utf-8", "surrogatepass")
    op = draw(st.sampled_from(BYTE_CORRUPTIONS[:1] * 21 + BYTE_CORRUPTIONS[1:]))
    at = draw(st.integers(0, max(len(body) - 1, 0)))
    if op == "truncate":
        return body[:at]
    if op == "insert":
        return body[:at] + draw(st.binary(min_size=1, max_size=8)) + body[at:]
    if op == "overwrite" and body:
        return body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1 :]
    if op == "bom":
        return b"\xef\xbb\xbf" + body
    if op == "utf16":
        return text.encode("utf-16", "surrogatepass")
    if op == "suffix":
        return body + draw(st.sampled_from([b"}", b" garbage", b"\x00", b"\n{}", b",[]"]))
    if op == "invalid-utf8":
        return body[:at] + b"\xc3\x28\xff" + body[at:]
    return body


def sent_with_correct_headers(body: bytes) -> Sent:
    """The headers a client would send for the body as the worker will parse it."""
    return Sent(body, headers_for(_parsed(body)))


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


@st.composite
def broken_requests(draw: st.DrawFn) -> tuple[Call, Sent]:
    """A broken document, written as hostile JSON text, maybe corrupted, with matching headers."""
    call, doc = draw(broken_documents())
    text = to_json(doc, ascii_only=draw(st.booleans()))
    return call, sent_with_correct_headers(draw(corrupted(text)))


# --- headers ---------------------------------------------------------------------------------------------

header_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), min_size=1, max_size=40
).map(lambda s: (s.strip() or "x").encode("latin-1"))
"""Header values HTTP can carry (latin-1, no control characters, no edge whitespace)."""

PROTOCOL_VERSIONS = (
    *HANDSHAKE_PROTOCOL_VERSIONS,
    PROTOCOL_VERSION,
    "2099-01-01",
    "2026-07-27",
    "DRAFT-2026-v1",
    "0",
    "",
)
CONTENT_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "APPLICATION/JSON",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "*/*",
    "",
)
ACCEPTS = (
    "application/json, text/event-stream",
    "text/event-stream, application/json",
    "application/json",
    "text/event-stream",
    "*/*",
    "application/*, text/*",
    "text/html",
    "",
)
AUTHORIZATIONS = tuple(
    value.encode()
    for value in ("Bearer not.a.jwt", "Bearer", "Bearer x y", "bearer a.b.c", "Basic YWxpY2U6c2VjcmV0", "Token x")
)
"""Credentials that are no valid token: each must be a 401, never an anonymous call."""
HEADER_NAMES = ("Content-Type", "Accept", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")
EXTRA_HEADERS = (
    "Mcp-Session-Id",
    "Last-Event-ID",
    "Mcp-Param-Limit",
    "Authorization",
    "Origin",
    "Content-Encoding",
    "X-Forwarded-For",
    "Expect",
    "Cookie",
)


@st.composite
def header_mutation(draw: st.DrawFn, headers: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """One change to a request's headers: drop, replace, duplicate or add one."""
    op = draw(st.sampled_from(("drop", "version", "method", "name", "content-type", "accept", "duplicate", "extra")))
    out = list(headers)
    if op == "drop":
        name = draw(st.sampled_from(HEADER_NAMES))
        return [(k, v) for k, v in out if k.lower() != name.lower()]
    if op == "duplicate":
        k, _ = draw(st.sampled_from(out))
        value = draw(header_values | st.sampled_from(PROTOCOL_VERSIONS).map(str.encode))
        return [*out, (k, value)] if draw(st.booleans()) else [(k, value), *out]
    if op == "extra":
        extra = draw(st.sampled_from(EXTRA_HEADERS))
        values = st.sampled_from(AUTHORIZATIONS) | header_values if extra == "Authorization" else header_values
        return [*out, (extra, draw(values))]
    name, choices = {
        "version": ("MCP-Protocol-Version", st.sampled_from(PROTOCOL_VERSIONS).map(str.encode) | header_values),
        "method": ("Mcp-Method", st.sampled_from(METHODS).map(str.encode) | header_values),
        "name": ("Mcp-Name", st.sampled_from(TOOL_NAMES).map(str.encode) | header_values),
        "content-type": ("Content-Type", st.sampled_from(CONTENT_TYPES).map(str.encode) | header_values),
        "accept": ("Accept", st.sampled_from(ACCEPTS).map(str.encode) | header_values),
    }[op]
    value = draw(choices)
    return [(k, v) for k, v in out if k.lower() != name.lower()] + [(name, value)]
