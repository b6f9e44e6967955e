"""The MCP SDK's private names, behind one door (`internals`): the only module of the worker that reads them."""
