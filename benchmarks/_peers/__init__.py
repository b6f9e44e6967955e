"""Peers for the worker-overhead benchmark: the same `echo` tool on the same 2026-07-28 wire, served by others."""
