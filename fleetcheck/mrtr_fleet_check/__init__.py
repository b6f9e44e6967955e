"""The fleet readiness check for any MCP server (`mrtr-fleet-check`, `scripts/fleet-check`).

It starts instances of a server (version 1) behind the project's proxy, drives a scenario as load,
replaces every instance by version 2 mid-load as a rolling update does, probes the server's
`requestState` directly (another instance, the next version, a tampered copy, another principal)
and names the first cause that keeps a request from surviving a round robin (`verdict.name_verdict`).
"""
