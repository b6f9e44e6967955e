"""The worker's middleware inside the MCP SDK's server: metrics, bounds on answers, prompt errors, rejections."""
