"""The demo pack: every kind of input a tool can ask for, each through the same MRTR path.

* `link_accounts`: the SEP's login scenario. The logins a version needs are
  asked by form elicitation, one per round; answers already given (or offered
  ahead of being asked) travel in `requestState`, so no question is asked
  twice, whichever instances and versions a request visits.
* `write_haiku`: sampling. `scan_roots`: roots. `echo`: a complete call with no input.
* `connect_vault`: needs a secret, so it uses URL-mode elicitation (form mode
  must never ask for passwords, keys or tokens); the page is the fleet's own
  (`mrtr_worker.vault`), and the tool believes the store, not the client's accept.
* `prime_report`: the seeds' composition of the two halves of MRTR: it asks
  its questions by MRTR rounds first (no task yet), then becomes a task
  (the tasks extension) that counts the primes and addresses the result to
  the name it was given.
* the `onboarding` prompt and the `mrtr://reports/{report_id}` resource
  return input_required too.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from mrtr_worker.packs import PackEnv
from mrtr_worker.tasks.offer import TaskSupport, offer
from mrtr_worker.tool_api import inputs
from mrtr_worker.tool_api.capabilities import Need, require
from mrtr_worker.tool_api.rounds import Round
from mrtr_worker.vault.tool import vault_round

LOGINS_BY_VERSION: dict[int, tuple[str, ...]] = {
    1: ("github_login", "google_login"),
    2: ("github_login", "google_login", "microsoft_login"),
}
"""The logins `link_accounts` needs on each worker version (v2 adds Microsoft)."""

PROVIDERS = {"github_login": "GitHub", "google_login": "Google", "microsoft_login": "Microsoft"}

PAST_TENSE = {"decline": "declined", "cancel": "cancelled"}
"""How a refusal reads in a tool's error text ("cancel" + "d" is not a word)."""


def login_request(key: str) -> inputs.InputRequestWire:
    provider = PROVIDERS[key]
    return inputs.form(
        f"Please provide your {provider} username",
        {"name": {"type": "string", "title": f"{provider} username", "minLength": 1, "maxLength": 100}},
        ["name"],
    )


def _text_result(text: str, structured: dict[str, Any] | None = None, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured, is_error=error)


def register(server: MCPServer, env: PackEnv) -> None:
    identity = env.identity
    needed_logins = LOGINS_BY_VERSION[identity.version]
    _register_composition(server, env)

    @server.tool(description="Link your accounts (the SEP-2322 login scenario). Asks each login once.")
    async def link_accounts(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="link_accounts asks for logins through form elicitation")
        linked: dict[str, str] = dict(rnd.data.get("linked", {}))
        for key in needed_logins:
            if key in linked:
                continue
            answer = inputs.read_form(rnd.responses, key, login_request(key))
            if answer is None or answer.problem is not None:
                continue
            if not answer.accepted:
                return _text_result(
                    f"{PROVIDERS[key]} login was {PAST_TENSE.get(answer.action, answer.action)}; nothing linked.",
                    error=True,
                )
            assert answer.content is not None
            linked[key] = str(answer.content["name"])
        missing = [key for key in needed_logins if key not in linked]
        if missing:
            # One login per round, in a fixed order: the answers so far travel in the state,
            # so whichever instance (or version) serves the next round asks only what is left.
            return rnd.ask({missing[0]: login_request(missing[0])}, {"linked": linked})
        summary = ", ".join(f"{PROVIDERS[k]}: {v}" for k, v in linked.items())
        return _text_result(f"Linked {summary}", {"linked": linked})

    @server.tool(description="Return the text it is given: the cheapest complete call, for latency checks.")
    async def echo(text: str) -> CallToolResult:
        return _text_result(text, {"text": text})

    env.quiet.declare("echo")  # never notifies, returns at once: answered as JSON without the stream deferral

    @server.tool(description="Write a haiku about a topic, using the client's model (sampling).")
    async def write_haiku(topic: str, ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.SAMPLING, why="write_haiku needs the client's model")
        text = inputs.read_sampled_text(rnd.responses, "haiku")
        if text is None:
            prompt = f"Write a haiku about {topic}."
            return rnd.ask({"haiku": inputs.sampling(prompt, max_tokens=200)}, {})
        return _text_result(text, {"topic": topic, "haiku": text})

    @server.tool(description="List the client's workspace roots (roots).")
    async def scan_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.ROOTS, why="scan_roots needs the client's roots")
        uris = inputs.read_roots(rnd.responses, "roots")
        if uris is None:
            return rnd.ask({"roots": inputs.roots()}, {})
        return _text_result(f"{len(uris)} root(s): " + ", ".join(uris), {"roots": uris, "count": len(uris)})

    env.single_use.declare("connect_vault")  # at most once: a replayed state must not connect a vault twice

    @server.tool(description="Connect a secrets vault. The API key is entered on the vault's page (URL mode).")
    async def connect_vault(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.URL, why="connect_vault needs URL-mode elicitation for a secret")
        # Completes only when the fleet's store shows the flow completed on the vault page by this caller.
        return await vault_round(rnd, env.vault)

    @server.prompt(description="A greeting prompt that first asks the user's preferred name.")
    async def onboarding(ctx: Context) -> list[dict[str, Any]] | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="onboarding asks for a name through form elicitation")
        request = inputs.form("What should we call you?", {"name": {"type": "string", "minLength": 1}}, ["name"])
        answer = inputs.read_form(rnd.responses, "preferred_name", request)
        if answer is None or answer.problem is not None:
            return rnd.ask({"preferred_name": request}, {})
        name = answer.content["name"] if answer.content is not None else "the user"  # declined: stay generic
        return [{"role": "user", "content": {"type": "text", "text": f"Greet {name} and explain MRTR briefly."}}]

    @server.resource("mrtr://reports/{report_id}", description="A report whose detail level is asked first.")
    async def report(report_id: str, ctx: Context) -> str | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="reports ask for a detail level through form elicitation")
        request = inputs.form(
            f"How detailed should report {report_id} be?",
            {"detail": {"type": "string", "enum": ["summary", "full"]}},
            ["detail"],
        )
        answer = inputs.read_form(rnd.responses, "detail", request)
        if answer is None or answer.problem is not None:
            return rnd.ask({"detail": request}, {})
        # A declined question falls back to the default detail level.
        detail = answer.content["detail"] if answer.content is not None else "summary"
        return f"Report {report_id} ({detail})"


REPORT_REQUEST = inputs.form(
    "Who is the prime report for, and up to which number should it count?",
    {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 100},
        "limit": {"type": "integer", "title": "Count primes up to", "minimum": 2, "maximum": 2_000_000_000},
    },
    ["name", "limit"],
)


def _register_composition(server: MCPServer, env: PackEnv) -> None:
    identity, tools = env.identity, env.tasks
    tools.declare("prime_report", TaskSupport.REQUIRED)
    env.single_use.declare("prime_report")  # its answered round creates a task: a replay would create another

    @server.tool(description="Asks who a prime report is for (an MRTR round), then counts as a task.")
    async def prime_report(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="prime_report asks its questions through form elicitation")
        answer = inputs.read_form(rnd.responses, "report", REPORT_REQUEST)
        if answer is None or answer.problem is not None:
            return rnd.ask({"report": REPORT_REQUEST}, {})
        if answer.content is None:
            return _text_result(f"Report {PAST_TENSE.get(answer.action, answer.action)}; nothing counted.", error=True)
        task = offer()
        if task is None:
            return tools.unavailable("prime_report")
        return task.become("prime_report", {"name": answer.content["name"], "limit": answer.content["limit"]})
