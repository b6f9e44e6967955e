"""Framing a 2026-07-28 request: `_meta`, headers in the SDK's encoding, the body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.inbound import decode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from mrtr_protocol.wire import NAMED_METHODS, PROTOCOL_VERSION, encode_request, request_headers, request_meta

AWKWARD_NAMES = [
    "plain_tool",
    " leading space",
    "trailing space ",
    "caf\u00e9",
    "\u65e5\u672c\u8a9e",
    "emoji \U0001f600",
    "tab\there",
    "=?base64?aGk=?=",
    "=?base64?not base64?=",
    "",
]


def test_meta_carries_the_version_and_a_copy_of_the_capabilities() -> None:
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
    meta = request_meta(capabilities)
    assert meta == {PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION, CLIENT_CAPABILITIES_META_KEY: capabilities}
    assert meta[CLIENT_CAPABILITIES_META_KEY] is not capabilities
    assert list(meta) == [PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY]


def test_meta_names_the_client_when_asked() -> None:
    meta = request_meta({}, {"name": "c", "version": "1"})
    assert meta[CLIENT_INFO_META_KEY] == {"name": "c", "version": "1"}
    assert meta[CLIENT_CAPABILITIES_META_KEY] == {}


def test_headers_negotiate_both_reply_kinds_and_name_the_method() -> None:
    headers = request_headers("tools/list", {})
    assert headers == {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/list",
    }


@pytest.mark.parametrize(("method", "param"), sorted(NAMED_METHODS.items()))
def test_named_methods_carry_their_target(method: str, param: str) -> None:
    assert request_headers(method, {param: "target"})["Mcp-Name"] == "target"
    assert request_headers(method, {})["Mcp-Name"] == ""
    assert "Mcp-Name" not in request_headers(method, None)


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_a_name_round_trips_through_the_sdks_decoding(name: str) -> None:
    value = request_headers("tools/call", {"name": name})["Mcp-Name"]
    assert value.isascii()
    assert value == value.strip()
    assert all(c.isprintable() for c in value)
    assert decode_header_value(value) == name


def test_a_base64_look_alike_is_encoded_not_sent_as_is() -> None:
    look_alike = "=?base64?aGk=?="
    value = request_headers("prompts/get", {"name": look_alike})["Mcp-Name"]
    assert value != look_alike
    assert decode_header_value(value) == look_alike


def test_extra_headers_are_added_and_win() -> None:
    headers = request_headers("tools/call", {"name": "t"}, {"Authorization": "Bearer x", "Mcp-Name": "other"})
    assert headers["Authorization"] == "Bearer x"
    assert headers["Mcp-Name"] == "other"


def test_a_request_is_a_json_rpc_object() -> None:
    params = {"name": "t", "_meta": request_meta({})}
    body = encode_request(9, "tools/call", params)
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    assert json.loads(encode_request("a", "tools/list", {}))["id"] == "a"
