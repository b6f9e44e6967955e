"""The reference engine (``MRTR_LB_ENGINE=aiohttp``): aiohttp's server and client, the proxy's first engine.

Kept as the yardstick the lean engine (:mod:`mrtr_lb.lean`, the default) is
tested against: the tests in ``tests/lb`` run on both engines, so where the
lean engine's own HTTP handling differs from a well-kept library's, a case
fails. It is slower (see ``services/lb/README.md``) but complete: same pool,
health checks, discovery, admin API, metrics, access log and bounds.

* ``proxy``: one request forwarded and streamed back (aiohttp client; at most one send).
* ``app``: the aiohttp application (:func:`~mrtr_lb.reference.app.create_reference_app`).
* ``guard``: the listener's bounds in front of aiohttp's parser (head, body, deadlines, connection cap).
* ``server``: the listener started and stopped (:class:`~mrtr_lb.reference.server.ReferenceServer`).
"""
