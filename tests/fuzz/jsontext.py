"""JSON text the standard encoder will not write: raw tokens and duplicate keys.

A hostile client is not bound by `json.dumps`: it sends numbers with
thousands of digits, `NaN`, nesting thousands deep, or the same key twice.
`to_json` writes a document built from ordinary values plus `Raw` tokens
(copied verbatim) and `DupObject`s (objects that repeat keys).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Raw:
    """A token written verbatim, e.g. `1e400`, `NaN`, or a 5000-digit integer."""

    text: str


@dataclass(frozen=True)
class DupObject:
    """A JSON object written with its members in order, repeats included (parsers keep the last)."""

    pairs: tuple[tuple[str, Any], ...]


RAW_TOKENS = (
    Raw("9" * 5000),  # beyond Python's default 4300-digit int parsing limit
    Raw("-" + "1" * 400),
    Raw("1e400"),
    Raw("-1e-400"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("-0"),
    Raw("0.1e1"),
    Raw("[" * 3000 + "]" * 3000),
    Raw('{"a":' * 3000 + "1" + "}" * 3000),
    Raw('"\\ud800"'),  # a lone surrogate, escaped
    Raw('"\\u0000"'),
    Raw("tru"),  # not JSON at all
)


def to_json(value: Any, *, ascii_only: bool = True) -> str:
    """Compact JSON text of `value`; `Raw` and `DupObject` are written as they say."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, DupObject):
        members = (f"{_scalar(k, ascii_only)}:{to_json(v, ascii_only=ascii_only)}" for k, v in value.pairs)
        return "{" + ",".join(members) + "}"
    if isinstance(value, dict):
        members = (f"{_scalar(str(k), ascii_only)}:{to_json(v, ascii_only=ascii_only)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(to_json(v, ascii_only=ascii_only) for v in value) + "]"
    return _scalar(value, ascii_only)


def _scalar(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)
