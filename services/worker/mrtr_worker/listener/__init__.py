"""The uvicorn plumbing: start-up from the environment, the bounded listener, one write per answer, a quick exit."""
