"""The MRTR worker: a stateless MCP server that sheds load through sealed `requestState`.

The package is laid out in rooms named after their layer, outermost first; a room
imports only rooms below it (the `import-linter` contracts in the root `pyproject.toml`
say so, and `lint-imports` checks them in CI):

* `__main__`: `python -m mrtr_worker` (imports nothing until it runs: the step pool re-imports it).
* `listener`: the uvicorn plumbing: `serve` (start-up from the environment), `draining_server`
  (a drained worker leaves at once), `bounded_http` (bounded heads, bodies, connections),
  `one_write` (a response's head and body in one write), `uvicorn_internals` (the one module
  that touches uvicorn's private names; `tests/worker/listener/test_uvicorn_internals.py` tests each).
* `app`: the HTTP host: FastAPI for `/healthz`, `/readyz`, `/metrics`, `/admin`, the vault
  pages, and the `/mcp` stack in front of it.
* `edge`: the ASGI layers on `/mcp`, outermost first: `front_door` (`/mcp` past FastAPI),
  `headers` (the instance's id on every answer), `auth` (bearer tokens), `modern_only`
  (2026-07-28 only), `body_limit` (413 as JSON-RPC), `quiet_calls` (JSON without the SDK's
  deferral), `fast_resume` (a computation's retry without the SDK's generic dispatch),
  `state_probe` (the SDK's own requestState check, asked without a trace, for `fast_resume`).
* `admin`: the operator's `/admin/...` routes (`routes`) behind the operator's token (`guard`).
* `worker`: `Worker`, one instance built whole from its settings (no HTTP).
* `server`: the SDK's `MCPServer` with the worker's middleware and packs; `plugin`: the
  public surface for tool packs of their own package.
* `config`: the settings, read once from the environment.
* `packs`: the built-in tool packs and the pack registry (installed packs, their jobs).
* `mcp_middleware`: the worker's SDK middleware: `observe` (metrics), `answer_limits`,
  `prompt_guard`, `rejections` (the SDK's requestState rejections as a metric).
* `vault`: the vault page (its routes and pages are edge) and the `connect_vault` tool's flows.
* `tasks`: the tasks extension on Redis (its own map in `tasks/__init__.py`).
* `compute`: resumable computations, the engine that sheds them, the step pool that runs them.
* `tool_api`: the API tools are written against: `rounds` (`Round`), `inputs` (input requests
  and their answers), `capabilities` (per-request checks), `quiet` (tools declared quiet or silent).
* `sealing`: the state that travels: `keyring` (the fleet's keys, a CLI), `codec` (the fleet's
  `requestState` codec), `layout` (the plaintext layout across versions), `replay_guard` (single use).
* `lifecycle`, `metrics`, `redis_link`: readiness and drain, the Prometheus registry, the way to Redis.
* `sdk`: `sdk.internals`, the one module that touches the MCP SDK's private names (an SDK
  upgrade is that file to review and `tests/worker/sdk/test_internals.py` to run).
"""
