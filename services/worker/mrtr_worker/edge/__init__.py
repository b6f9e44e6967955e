"""The ASGI layers on `/mcp`, outside the SDK: past FastAPI, headers, auth, the modern wire, bounds, fast paths."""
