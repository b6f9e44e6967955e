"""The response headers that say which worker served a round, stamped by every worker on every response."""

WORKER_ID_HEADER = "X-Worker-Id"
WORKER_VERSION_HEADER = "X-Worker-Version"
