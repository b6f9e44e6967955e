"""The conformance pack: the fixtures the official MCP conformance suite calls, and nothing else.

`@modelcontextprotocol/conformance` (0.2.0-alpha.12) drives a server under test
through fixed tool, prompt and resource names; this module provides exactly
those, so that configuration (`MRTR_WORKER_TOOL_PACKS=...,conformance`) can
switch them on beside the real packs without mixing them in. A test pack:
it lives in this package (`mrtr-test-packs`), not in the product's wheel,
and is installed only where the suite and the tests run.

* Basic scenarios: content-type tools, progress, errors, the undeclared
  capability probe, the list-change hooks, static and templated resources,
  prompts, and completion for `test_prompt_with_arguments`.
* MRTR scenarios (SEP-2322): every `test_input_required_result_*` fixture
  goes through `Round.ask`, so its state is sealed by the SDK's requestState
  boundary and verified on the way back like every other tool's. A retry that
  answers too little is asked again rather than failed, answers sent on a
  first call (no requestState yet) are accepted, and extra answers are ignored.
* Tasks scenarios (`tasks-*`, SEP-2663): `greet` (never a task), `slow_compute`
  (a task when the extension is declared, answered at once otherwise),
  `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input` (tasks
  only: -32021 without the extension) and `test_tool_with_task` (an MRTR round
  asks the name, then the call becomes a task). Their work is a job of
  `mrtr_test_packs.conformance_jobs`, the pack's `jobs`, so any worker with this
  package installed can run or resume it.

Texts and keys follow the scenario descriptions in the suite's sources.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import Mapping
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    CallToolResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

from mrtr_test_packs.conformance_jobs import JOBS, slow_compute_text
from mrtr_worker.plugin import (
    FormAnswer,
    InputRequestWire,
    Need,
    PackEnv,
    Round,
    TaskSupport,
    ToolPack,
    allows,
    form,
    offer,
    read_form,
    read_roots,
    read_sampled_text,
    require,
    roots,
    sampling,
)

PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 red pixel."""

PROGRESS_STEP_SECONDS = 0.05

PROBE_NAME = "test_list_change_probe"
"""The tool or prompt the list-change hooks add and remove at once."""


def _wav_base64() -> str:
    """A tenth of a second of 8 kHz mono silence, as a complete WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(b"\x00\x00" * 800)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


WAV_BASE64 = _wav_base64()


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(type="resource", resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text))


def _image() -> ImageContent:
    return ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")


# The input requests of the MRTR fixtures, keyed as the suite expects them.

NAME_REQUEST = form("What is your name?", {"name": {"type": "string"}}, ["name"])
CONFIRM_REQUEST = form("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
STEP1_REQUEST = form("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
STEP2_REQUEST = form("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
CONTEXT_REQUEST = form("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
CAPITAL_REQUEST = sampling("What is the capital of France?", max_tokens=100)
GREETING_REQUEST = sampling("Generate a greeting", max_tokens=50)
HELLO_REQUEST = sampling("Say hello", max_tokens=50)


def _answered_form(responses: Mapping[str, Any], key: str, request: InputRequestWire) -> FormAnswer | None:
    """A usable answer to form `key`: a valid accept, a decline or a cancel; None means ask (again)."""
    answer = read_form(responses, key, request)
    if answer is None or answer.problem is not None:
        return None
    return answer


def register(server: MCPServer, env: PackEnv) -> None:
    _register_basic(server)
    _register_mrtr(server, env)
    _register_tasks(server, env)


def _register_basic(server: MCPServer) -> None:
    # Tools (scenarios tools-call-*, server-stateless).

    @server.tool(name="test_simple_text", description="Returns a simple text response.")
    def simple_text() -> CallToolResult:
        return _text("This is a simple text response for testing.")

    @server.tool(name="test_image_content", description="Returns a PNG image.")
    def image_content() -> CallToolResult:
        return CallToolResult(content=[_image()])

    @server.tool(name="test_audio_content", description="Returns a WAV audio clip.")
    def audio_content() -> CallToolResult:
        return CallToolResult(content=[AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")])

    @server.tool(name="test_embedded_resource", description="Returns an embedded text resource.")
    def embedded_resource() -> CallToolResult:
        return CallToolResult(content=[_embedded("test://embedded-resource", "This is an embedded resource content.")])

    @server.tool(name="test_multiple_content_types", description="Returns text, an image and an embedded resource.")
    def multiple_content_types() -> CallToolResult:
        return CallToolResult(
            content=[
                TextContent(type="text", text="Multiple content types test:"),
                _image(),
                _embedded("test://mixed-content-resource", '{"test":"data","value":123}', "application/json"),
            ]
        )

    @server.tool(name="test_error_handling", description="Always fails with a tool error (isError: true).")
    def error_handling() -> CallToolResult:
        return _text("This tool intentionally returns an error for testing", error=True)

    @server.tool(name="test_tool_with_progress", description="Reports progress 0, 50 and 100 of 100.")
    async def tool_with_progress(ctx: Context) -> CallToolResult:
        for step, progress in enumerate((0, 50, 100)):
            if step:
                await anyio.sleep(PROGRESS_STEP_SECONDS)
            await ctx.report_progress(progress, 100)
        return _text("Progress tool completed: 0, 50, 100 of 100.")

    @server.tool(name="test_missing_capability", description="Needs the sampling capability; -32021 without it.")
    def missing_capability(ctx: Context) -> CallToolResult:
        if not allows(ctx.client_capabilities, Need.SAMPLING):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="Missing required client capability: sampling",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return _text("The sampling capability was declared.")

    # List-change hooks (server-stateless): a real, momentary change of the list, then the
    # announcement that `subscriptions/listen` streams of this instance receive.

    def probe() -> str:
        return "probe"

    @server.tool(name="test_trigger_tool_change", description="Adds and removes a probe tool, then announces it.")
    async def trigger_tool_change(ctx: Context) -> CallToolResult:
        server.add_tool(probe, name=PROBE_NAME, description="A momentary probe.")
        server.remove_tool(PROBE_NAME)
        await ctx.notify_tools_changed()
        return _text("The tool list changed.")

    @server.tool(name="test_trigger_prompt_change", description="Adds and removes a probe prompt, then announces it.")
    async def trigger_prompt_change(ctx: Context) -> CallToolResult:
        server.add_prompt(Prompt.from_function(probe, name=PROBE_NAME, description="A momentary probe."))
        server.remove_prompt(PROBE_NAME)
        await ctx.notify_prompts_changed()
        return _text("The prompt list changed.")

    # Resources (resources-*, caching, sep-2164-resource-not-found needs none).

    @server.resource(
        "test://static-text", name="static_text", description="A static text resource.", mime_type="text/plain"
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary", name="static_binary", description="A static binary resource.", mime_type="image/png"
    )
    def static_binary() -> bytes:
        return base64.b64decode(PNG_BASE64)

    @server.resource(
        "test://template/{id}/data",
        name="template_data",
        description="Data for an id, from a resource template.",
        mime_type="application/json",
    )
    def template_data(id: str) -> str:  # `id`: the template's variable name
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))

    # Prompts (prompts-*).

    @server.prompt(name="test_simple_prompt", description="A simple prompt without arguments.")
    def simple_prompt() -> list[Message]:
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt(name="test_prompt_with_arguments", description="A prompt with two required arguments.")
    def prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(name="test_prompt_with_embedded_resource", description="A prompt embedding a resource.")
    def prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # the suite's argument name
        return [
            UserMessage(_embedded(resourceUri, "Embedded resource content for testing.")),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt with an image.")
    def prompt_with_image() -> list[Message]:
        return [UserMessage(_image()), UserMessage("Please analyze the image above.")]

    # Completion (completion-complete).

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]  # the SDK leaves this decorator untyped
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        values: list[str] = []
        if isinstance(ref, PromptReference) and ref.name == "test_prompt_with_arguments":
            values = [v for v in ("paris", "park", "party") if v.startswith(argument.value)]
        elif isinstance(ref, ResourceTemplateReference) and ref.uri == "test://template/{id}/data":
            values = [v for v in ("123", "456", "789") if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)


def _register_mrtr(server: MCPServer, env: PackEnv) -> None:
    identity = env.identity

    @server.tool(name="test_input_required_result_elicitation", description="Asks the user's name (elicitation).")
    async def elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this fixture asks for a name through form elicitation")
        answer = _answered_form(rnd.responses, "user_name", NAME_REQUEST)
        if answer is None:
            return rnd.ask({"user_name": NAME_REQUEST}, {})
        if answer.content is None:
            return _text(f"No name given ({answer.action}).")
        return _text(f"Hello, {answer.content['name']}!")

    @server.tool(name="test_input_required_result_sampling", description="Asks the client's model a question.")
    async def sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.SAMPLING, why="this fixture asks the client's model")
        text = read_sampled_text(rnd.responses, "capital_question")
        if text is None:
            return rnd.ask({"capital_question": CAPITAL_REQUEST}, {})
        return _text(f"The model answered: {text}")

    @server.tool(name="test_input_required_result_list_roots", description="Asks the client's roots.")
    async def list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.ROOTS, why="this fixture lists the client's roots")
        uris = read_roots(rnd.responses, "client_roots")
        if uris is None:
            return rnd.ask({"client_roots": roots()}, {})
        return _text(f"{len(uris)} root(s): " + ", ".join(uris))

    @server.tool(name="test_input_required_result_request_state", description="Round-trips a sealed requestState.")
    async def request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this fixture asks for a confirmation through form elicitation")
        answer = _answered_form(rnd.responses, "confirm", CONFIRM_REQUEST)
        # Only a state this fleet sealed carries the marker: without it, ask (again) and mint one.
        if answer is None or rnd.data.get("awaiting") != "confirm":
            return rnd.ask({"confirm": CONFIRM_REQUEST}, {"awaiting": "confirm"})
        confirmed = answer.content is not None and answer.content["ok"] is True
        return _text(f"state-ok: requestState verified after {rnd.trace.hops} round(s); confirmed={confirmed}")

    @server.tool(name="test_input_required_result_multiple_inputs", description="Asks elicitation, sampling, roots.")
    async def multiple_inputs(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        for need in (Need.FORM, Need.SAMPLING, Need.ROOTS):
            require(rnd.capabilities, need, why=f"this fixture asks for {need.value} input")
        got: dict[str, Any] = dict(rnd.data.get("got", {}))
        name = _answered_form(rnd.responses, "user_name", NAME_REQUEST)
        if "user_name" not in got and name is not None:
            got["user_name"] = name.content["name"] if name.content is not None else None
        greeting = read_sampled_text(rnd.responses, "greeting")
        if "greeting" not in got and greeting is not None:
            got["greeting"] = greeting
        listed = read_roots(rnd.responses, "client_roots")
        if "client_roots" not in got and listed is not None:
            got["client_roots"] = listed
        requests = {"user_name": NAME_REQUEST, "greeting": GREETING_REQUEST, "client_roots": roots()}
        missing = {key: request for key, request in requests.items() if key not in got}
        if missing:  # answers already given travel in the state, so only the rest is asked again
            return rnd.ask(missing, {"got": got})
        return _text(
            f"All inputs received: name={got['user_name']}, greeting={got['greeting']!r}, "
            f"{len(got['client_roots'])} root(s)."
        )

    @server.tool(name="test_input_required_result_multi_round", description="Asks a name, then a color (3 rounds).")
    async def multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this fixture asks through form elicitation")
        name = rnd.data.get("name")
        if name is None:
            step1 = _answered_form(rnd.responses, "step1", STEP1_REQUEST)
            if step1 is None:
                return rnd.ask({"step1": STEP1_REQUEST}, {})
            if step1.content is None:
                return _text(f"Step 1 was {step1.action}ed; nothing to do.")
            return rnd.ask({"step2": STEP2_REQUEST}, {"name": step1.content["name"]})
        step2 = _answered_form(rnd.responses, "step2", STEP2_REQUEST)
        if step2 is None:
            return rnd.ask({"step2": STEP2_REQUEST}, {"name": name})
        if step2.content is None:
            return _text(f"Step 2 was {step2.action}ed; {name} kept their color to themselves.")
        return _text(f"{name}'s favorite color is {step2.content['color']} ({rnd.trace.hops + 1} rounds).")

    @server.tool(name="test_input_required_result_tampered_state", description="Rejects a tampered requestState.")
    async def tampered_state(ctx: Context) -> CallToolResult | InputRequiredResult:
        # A tampered state never reaches this handler: the SDK's boundary answers -32602 first.
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this fixture asks for a confirmation through form elicitation")
        answer = _answered_form(rnd.responses, "confirm", CONFIRM_REQUEST)
        if answer is None or rnd.data.get("awaiting") != "confirm":
            return rnd.ask({"confirm": CONFIRM_REQUEST}, {"awaiting": "confirm"})
        return _text("state-ok: the requestState passed its integrity check.")

    # The suite calls this fixture `test_input_required_result_capabilities` (scenario
    # input-required-result-capability-check).
    @server.tool(
        name="test_input_required_result_capabilities",
        description="Asks only for the input kinds this request's client capabilities declare.",
    )
    async def capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        wanted: dict[str, InputRequestWire] = {}
        if allows(rnd.capabilities, Need.SAMPLING):
            wanted["greeting"] = HELLO_REQUEST
        if allows(rnd.capabilities, Need.FORM):
            wanted["user_name"] = NAME_REQUEST
        if not wanted:
            require(rnd.capabilities, Need.SAMPLING, why="this fixture needs sampling or form elicitation")
        greeting = read_sampled_text(rnd.responses, "greeting")
        name = _answered_form(rnd.responses, "user_name", NAME_REQUEST)
        answered = {"greeting": greeting is not None, "user_name": name is not None}
        missing = {key: request for key, request in wanted.items() if not answered[key]}
        if missing:
            return rnd.ask(missing, {})
        return _text("Answered: " + ", ".join(sorted(wanted)))

    @server.prompt(name="test_input_required_result_prompt", description="Asks for context before rendering.")
    async def prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this prompt asks for context through form elicitation")
        answer = _answered_form(rnd.responses, "user_context", CONTEXT_REQUEST)
        if answer is None:
            return rnd.ask({"user_context": CONTEXT_REQUEST}, {})
        context = answer.content["context"] if answer.content is not None else "none given"
        return [UserMessage(f"Use the following context: {context}")]


SYNC_SLOW_COMPUTE_MAX_SECONDS = 10.0
"""Longest wait `slow_compute` does inline when the call is not a task (the suite sends 0)."""


def _register_tasks(server: MCPServer, env: PackEnv) -> None:
    """The tasks scenarios' fixtures (`tasks-*`, SEP-2663): each task-capable one hands its work to a task job
    (`mrtr_test_packs.conformance_jobs`), so it runs on whichever worker takes the slice."""
    tools, identity = env.tasks, env.identity
    for name, support in (
        ("slow_compute", TaskSupport.OPTIONAL),
        ("failing_job", TaskSupport.REQUIRED),
        ("protocol_error_job", TaskSupport.REQUIRED),
        ("confirm_delete", TaskSupport.REQUIRED),
        ("multi_input", TaskSupport.REQUIRED),
        ("test_tool_with_task", TaskSupport.REQUIRED),
    ):
        tools.declare(name, support)

    def as_task(name: str, arguments: dict[str, Any]) -> CallToolResult:
        task = offer()
        return tools.unavailable(name) if task is None else task.become(name, arguments)

    @server.tool(name="greet", description="Says hello at once (never a task).")
    def greet(name: str) -> CallToolResult:
        return _text(f"Hello, {name}!")

    @server.tool(name="slow_compute", description="Waits `seconds`; a task when the tasks extension is declared.")
    async def slow_compute(seconds: Annotated[float, Field(ge=0, le=3600)], label: str | None = None) -> CallToolResult:
        task = offer()
        if task is not None:
            return task.become("slow_compute", {"seconds": seconds, "label": label})
        if seconds > SYNC_SLOW_COMPUTE_MAX_SECONDS:
            return _text(f"slow_compute waits at most {SYNC_SLOW_COMPUTE_MAX_SECONDS} s without a task", error=True)
        await anyio.sleep(seconds)
        return _text(slow_compute_text(seconds, label))

    @server.tool(name="failing_job", description="A task that ends in a tool error (completed, isError).")
    def failing_job() -> CallToolResult:
        return as_task("failing_job", {})

    @server.tool(name="protocol_error_job", description="A task that ends in a protocol error (failed).")
    def protocol_error_job() -> CallToolResult:
        return as_task("protocol_error_job", {})

    @server.tool(name="confirm_delete", description="A task that asks for a confirmation (input_required).")
    def confirm_delete(filename: str) -> CallToolResult:
        return as_task("confirm_delete", {"filename": filename})

    @server.tool(name="multi_input", description="A task that asks two questions at once.")
    def multi_input() -> CallToolResult:
        return as_task("multi_input", {})

    @server.tool(name="test_tool_with_task", description="Asks a name by an MRTR round, then becomes a task.")
    async def tool_with_task(ctx: Context) -> CallToolResult | InputRequiredResult:
        rnd = Round(ctx, identity)
        require(rnd.capabilities, Need.FORM, why="this fixture asks for a name through form elicitation")
        answer = _answered_form(rnd.responses, "user_name", NAME_REQUEST)
        if answer is None:
            return rnd.ask({"user_name": NAME_REQUEST}, {})
        name = answer.content["name"] if answer.content is not None else "stranger"
        return as_task("greet_later", {"name": name})


PACK = ToolPack(register, jobs=JOBS)
"""What the entry point `conformance` names: the suite's fixtures and the jobs its task fixtures become."""
