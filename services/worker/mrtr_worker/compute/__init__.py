"""Resumable computations: step functions over small JSON states, and the engine that sheds them."""
