"""An example tool pack in its own package: `longest_collatz` (a computation that sheds) and `collatz_walk` (asks).

The worker finds it through the entry point `collatz` in this package's
`pyproject.toml`; docs/plugins.md walks through it.
"""
