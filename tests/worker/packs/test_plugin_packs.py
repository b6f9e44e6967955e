"""Tool packs from installed packages: found by entry point, served only when named, every mistake one clear line.

The example pack (`examples/collatz-pack`) and the test packs (`testpacks/`), workspace members,
are installed in the development environment; the broken packs below are distributions written into a
temporary directory on `sys.path`, found by `importlib.metadata` as any installed one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import INTERNAL_ERROR
from pydantic import ValidationError

from mrtr_client import Client, RpcError, ScriptedInputs
from mrtr_ops.local.redis import RedisServer
from mrtr_worker.config import WorkerSettings
from mrtr_worker.packs.registry import (
    ENTRY_POINT_GROUP,
    PackError,
    ToolPack,
    available_packs,
    installed_jobs,
    load_pack,
    register_packs,
)
from mrtr_worker.sealing.keyring import new_ring
from tests.conftest import StartWorker
from tests.support.wire import McpHttp

RING = new_ring("plugin-tests").dumps()

FAILING_PACK = """
def register(server, env):
    raise KeyError("tool_name")
"""

SHARED_TOOL = """
def register(server, env):
    @server.tool()
    def shared() -> str:
        return __name__
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on `sys.path` where a test installs distributions by writing their metadata."""
    monkeypatch.syspath_prepend(str(tmp_path))
    installed_jobs.cache_clear()
    yield tmp_path
    installed_jobs.cache_clear()
    for name, module in list(sys.modules.items()):  # the next test's module of the same name is another file
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> WorkerSettings:
    """The worker's settings from this environment (as a worker reads them at start)."""
    for name in [name for name in os.environ if name.startswith("MRTR_WORKER_")]:
        monkeypatch.delenv(name)
    for name, value in {"KEYRING": RING, "ALLOW_ANONYMOUS": "true", **env}.items():
        monkeypatch.setenv(f"MRTR_WORKER_{name}", value)
    return WorkerSettings()


def install(site: Path, dist: str, packs: dict[str, str], modules: dict[str, str] | None = None) -> None:
    """A distribution `dist` declaring `packs` (name -> "module:attr") in the worker's entry-point group."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in packs.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)


def test_an_installed_pack_is_available_but_not_served_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert available_packs() == ("demo", "compute", "chaos", "collatz", "conformance")
    assert settings(monkeypatch).tool_packs == ["demo", "compute"]
    assert settings(monkeypatch, TOOL_PACKS="demo,collatz").tool_packs == ["demo", "collatz"]


def test_an_unknown_pack_name_is_one_line_listing_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError) as caught:
        settings(monkeypatch, TOOL_PACKS="demo,colatz")
    message = caught.value.errors()[0]["msg"]
    assert message == (
        "Value error, unknown tool pack(s) ['colatz']; "
        "available: ['demo', 'compute', 'chaos', 'collatz', 'conformance']"
    )


def test_the_example_pack_loads_with_its_task_job() -> None:
    pack = load_pack("collatz")
    assert isinstance(pack, ToolPack)
    assert [job.name for job in pack.jobs] == ["longest_collatz"]
    assert installed_jobs()["longest_collatz"] is pack.jobs[0]


def test_a_bare_register_function_is_a_pack_without_jobs(site: Path) -> None:
    install(site, "bare-pack", {"bare": "bare_pack:register"}, {"bare_pack": "def register(server, env):\n    pass\n"})
    pack = load_pack("bare")
    assert pack.jobs == ()
    assert pack.register.__module__ == "bare_pack"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("raise ImportError('needs numpy')", "(broken_pack:PACK from broken-pack 0.1) failed to load: ImportError"),
        ("PACK = 42", "names a int, not a ToolPack or a register function"),
        ("from mrtr_worker.plugin import ToolPack\nPACK = ToolPack(print, jobs=[1])", "must be a tuple of Job"),
        ("x = 1", "failed to load: AttributeError"),
    ],
)
def test_a_pack_that_does_not_load_says_which_and_why(site: Path, source: str, expected: str) -> None:
    install(site, "broken-pack", {"broken": "broken_pack:PACK"}, {"broken_pack": source})
    assert "broken" in available_packs()  # found without importing it
    with pytest.raises(PackError, match=r"^tool pack 'broken'") as caught:
        load_pack("broken")
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_pack_named_like_a_built_in_is_refused(site: Path) -> None:
    install(site, "impostor", {"demo": "impostor:register"})
    with pytest.raises(PackError, match=r"'demo' of impostor:register from impostor 0\.1 has the name of a built-in"):
        available_packs()


def test_two_packages_declaring_one_name_are_refused(site: Path) -> None:
    install(site, "first-pack", {"twin": "first:register"})
    install(site, "second-pack", {"twin": "second:register"})
    with pytest.raises(PackError, match="'twin' is declared by more than one package"):
        available_packs()


def test_a_job_named_like_one_the_catalog_has_is_refused(site: Path) -> None:
    source = (
        "from mrtr_worker.plugin import ToolPack, compute_job\n"
        "from mrtr_worker.compute.primes import COUNT_PRIMES\n"
        "PACK = ToolPack(print, jobs=(compute_job(COUNT_PRIMES),))\n"
    )
    install(site, "copycat", {"copycat": "copycat:PACK"}, {"copycat": source})
    with pytest.raises(PackError, match="declares job 'count_primes', already a built-in job"):
        installed_jobs()


def test_a_pack_whose_register_fails_is_named(site: Path) -> None:
    install(site, "failing-pack", {"failing": "failing:register"}, {"failing": FAILING_PACK})
    with pytest.raises(PackError, match=r"^tool pack 'failing' failed to register: KeyError: 'tool_name'$"):
        register_packs(["failing"], MCPServer("test"), None)  # type: ignore[arg-type]  # it fails before using env


def test_a_tool_name_another_pack_serves_is_refused(site: Path) -> None:
    """The SDK keeps the first tool of a name and drops the next one silently: calls would reach the wrong tool."""
    install(site, "first-pack", {"first": "first:register"}, {"first": SHARED_TOOL})
    install(site, "second-pack", {"second": "second:register"}, {"second": SHARED_TOOL})
    server = MCPServer("test")
    with pytest.raises(PackError, match=r"^tool pack 'second' adds tool 'shared', which tool pack 'first' serves$"):
        register_packs(["first", "second"], server, None)  # type: ignore[arg-type]  # the packs use no env
    assert "add_tool" not in vars(server)  # the SDK's own method again


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_WORKER_")}
    base = {"MRTR_WORKER_ALLOW_ANONYMOUS": "true", "MRTR_WORKER_KEYRING": RING}
    return subprocess.run(
        [sys.executable, "-m", "mrtr_worker"], env={**clean, **base, **env}, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow  # starts a worker process per case
@pytest.mark.parametrize(
    "env",
    [
        {"MRTR_WORKER_TOOL_PACKS": "demo,broken"},
        # Not served, but tasks are on: every installed pack's jobs are loaded at start (a slice may need them).
        {"MRTR_WORKER_TOOL_PACKS": "demo", "MRTR_WORKER_REDIS_URL": "redis://127.0.0.1:9/0"},
    ],
)
def test_a_worker_with_a_broken_pack_stops_with_one_line(site: Path, env: dict[str, str]) -> None:
    install(site, "broken-pack", {"broken": "broken_pack:PACK"}, {"broken_pack": "import not_installed_anywhere\n"})
    done = _start({**env, "PYTHONPATH": str(site)})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "mrtr-worker: configuration error: tool pack 'broken' (broken_pack:PACK from broken-pack 0.1) failed to "
        "load: ModuleNotFoundError: No module named 'not_installed_anywhere'"
    ]


def test_a_worker_serves_an_installed_pack_only_when_it_is_named(start_worker: StartWorker) -> None:
    plain, _ = start_worker(tool_packs=("demo", "compute"))
    named, _ = start_worker(tool_packs=("demo", "collatz"))
    served: dict[str, set[str]] = {}
    for spec in (plain, named):
        client = McpHttp(f"{spec.url}/mcp")
        try:
            served[spec.instance_id] = {tool["name"] for tool in client.call("tools/list").result["tools"]}
        finally:
            client.close()
    assert {"longest_collatz", "collatz_walk"}.isdisjoint(served[plain.instance_id])
    assert {"longest_collatz", "collatz_walk", "echo"} <= served[named.instance_id]


SLOPPY_PACK = """
from mrtr_worker.plugin import Context, MCPServer, PackEnv, TaskSupport, offer


def register(server: MCPServer, env: PackEnv) -> None:
    env.tasks.declare("sloppy", TaskSupport.OPTIONAL)

    @server.tool()
    async def sloppy(ctx: Context) -> str:
        task = offer()
        if task is not None:
            return str(task.become("undeclared_job", {}).content)
        return "answered at once"
"""


def test_a_tool_that_becomes_a_job_no_pack_declares_gets_a_clear_error(
    site: Path, start_worker: StartWorker, redis_server: RedisServer
) -> None:
    install(site, "sloppy-pack", {"sloppy": "sloppy_pack:register"}, {"sloppy_pack": SLOPPY_PACK})
    env = {"PYTHONPATH": str(site), "MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": "sloppy:"}
    spec, _ = start_worker(tool_packs=("sloppy",), env=env)
    with Client(f"{spec.url}/mcp", ScriptedInputs()) as client:
        assert client.call_tool("sloppy").text == "answered at once"  # no task asked for: the tool answers
        with pytest.raises(RpcError) as caught:
            client.call_tool("sloppy", task=True)
    assert caught.value.code == INTERNAL_ERROR
    assert "task job 'undeclared_job', which no installed pack declares" in caught.value.message
