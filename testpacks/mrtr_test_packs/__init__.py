"""The test packs: `conformance` (the official suite's fixtures) and `chaos` (toxic tools), out of the product.

Neither belongs in a fleet people run: the conformance fixtures answer fixed
names for a test harness, and the chaos jobs raise, spin or call
`sys.exit(42)` on purpose. So they live in this package of their own, found
by the worker through the entry-point group `mrtr_worker.tool_packs` like any
pack of one's own (`examples/collatz-pack`), and installed only where the
tests, the conformance suite and the chaos runs need them: the workspace's
`.venv`, and the worker image `testpacks/Dockerfile` builds. They import the
worker only through `mrtr_worker.plugin`, its public surface for packs.
"""
