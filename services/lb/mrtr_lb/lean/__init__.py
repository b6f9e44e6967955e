"""The proxy's engine: asyncio protocols on uvloop, httptools, no web framework.

No task or future per request: protocol callbacks carry a request from the
client's bytes to a pooled backend connection and the response back. The
modules import one another in this order only, never back:

* `upstream`: connections to the workers (pooled keep-alive, the response head parsed for its framing).
* `blocks`: the upstream header block a client connection keeps for reuse.
* `http`: the client side: one connection's requests parsed, bounded and answered in order (the admin
  listener's too).
* `request`: the bytes a request goes upstream as (end-to-end headers, X-Forwarded-*, the block reused).
* `slots`: the first-come cap on upstream connections (the worker's compute slots' vocabulary).
* `proxy`: what every request shares: pool, metrics, upstream pool, the read-timeout sweep, error answers.
* `forward`: one request's course: pick, send, relay, retry only the undelivered, record.
* `server`: the public listener (:class:`~mrtr_lb.lean.server.LeanServer`).
"""
