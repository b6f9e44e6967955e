"""The client under test for the official conformance suite: `python -m mrtr_ops.conformance_client URL`.

It lists the server's tools and calls each one through the MRTR loop,
answering elicitations from their schemas. Exit 0 when every call completed.
"""

from __future__ import annotations

import sys

from mrtr_client import Client, MrtrError, ScriptedInputs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m mrtr_ops.conformance_client URL", file=sys.stderr)
        return 2
    failed = 0
    with Client(args[-1], ScriptedInputs(url_action=None)) as client:
        for tool in client.list_tools():
            try:
                done = client.call_tool(tool["name"])
                print(f"{tool['name']}: {done.text!r} after {len(done.trace.hops)} hop(s)")
            except MrtrError as exc:
                failed += 1
                print(f"{tool['name']}: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
