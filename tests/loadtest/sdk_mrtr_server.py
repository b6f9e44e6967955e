"""An MCP server on the official Python SDK (2.3.0, public API only) that `McpUser` drives: it is not ours.

`python -m uvicorn tests.loadtest.sdk_mrtr_server:app --port N`. `greet` asks one elicitation question
through MRTR (`input_required` with a sealed `requestState`, answered on the retry); `add_up` answers at once.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel

server = MCPServer("sdk-mrtr")


class Name(BaseModel):
    name: str = "Ada"


def ask_name(ctx: Context) -> Elicit[Name]:
    return Elicit("Who is asking?", Name)


class Sum(BaseModel):
    total: int


@server.tool(description="Add up the numbers it is given.")
async def add_up(numbers: list[int]) -> Sum:
    return Sum(total=sum(numbers))


class Greeting(BaseModel):
    greeting: str


@server.tool(description="Greet whoever the user says is asking.")
async def greet(who: Annotated[Name, Resolve(ask_name)]) -> Greeting:
    return Greeting(greeting=f"hello {who.name}")


app = server.streamable_http_app(stateless_http=True)
