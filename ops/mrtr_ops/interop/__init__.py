"""`scripts/interop`: the cluster driven by MCP clients nobody here wrote, every answer checked exactly.

The official TypeScript client (alone and with the tasks extension package), the
MCP Python SDK's client, FastMCP's client (and its tasks client) and the MCP
Inspector's CLI, each pinned and installed by the script, run the demo and
compute tools against the local cluster (3 workers, Redis, the proxy), once
anonymously and the TypeScript rows again with a bearer token on an `--auth`
cluster. Each driver prints a JSON record per feature; `checks` judges each one
(pass, fail on the server's side, the client's own gap with its source line, or a
refusal by design), `timing` sets the clients' hand-back costs beside ours, and
`report` writes `docs/interop.md` and the README's "Tested clients" table.
"""
