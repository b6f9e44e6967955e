"""Where a worker finds its tool packs: the built-in table, then packs installed as Python packages.

The built-in packs are modules of `mrtr_worker.packs`, listed in `BUILTIN_PACKS`.
Any other installed distribution can bring packs of its own through the entry-point
group `mrtr_worker.tool_packs` (the way pytest and Locust find plugins), each entry
naming a `ToolPack` (or just its `register` function):

    [project.entry-points."mrtr_worker.tool_packs"]
    collatz = "mrtr_example_pack.pack:PACK"

Installed is not served: a worker serves exactly the packs `MRTR_WORKER_TOOL_PACKS`
names. But the task jobs of every installed pack join the task catalog on every worker
(`mrtr_worker.tasks.catalog`), since any instance may take a task's next slice.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from mrtr_worker.tasks.catalog import JOBS
from mrtr_worker.tasks.jobs import Job

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from mrtr_worker.packs import PackEnv

ENTRY_POINT_GROUP = "mrtr_worker.tool_packs"
"""The entry-point group an installed package declares its packs in (`name = "module:PACK"`)."""

BUILTIN_PACKS = ("demo", "compute")
"""The packs that ship with the worker, as modules of `mrtr_worker.packs`; they take precedence over entry points.

The test packs (`conformance`, `chaos`) are not among them: they come from the package `mrtr-test-packs`
(`testpacks/`), installed where the tests, the conformance suite and the chaos runs need them, never in the product."""


class PackError(ValueError):
    """A pack that cannot be found, loaded or registered: a configuration error, reported in one line at start."""


@dataclass(frozen=True)
class ToolPack:
    """A tool pack: the function that registers its tools, and the task jobs its tools may become.

    `jobs` are looked up by name whenever a task's slice runs, on whichever instance takes it,
    so they join the catalog of every worker the pack is installed on, served or not.
    """

    register: Callable[[MCPServer, PackEnv], None]
    jobs: tuple[Job, ...] = ()


def installed_packs() -> dict[str, EntryPoint]:
    """The packs installed packages declare, by name (no pack is imported)."""
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, []).append(point)
    clashes = {name: points for name, points in found.items() if len(points) > 1}
    if clashes:
        name, points = sorted(clashes.items())[0]
        raise PackError(f"tool pack {name!r} is declared by more than one package: {', '.join(map(_origin, points))}")
    shadowing = sorted(set(found) & set(BUILTIN_PACKS))
    if shadowing:
        name = shadowing[0]
        raise PackError(f"tool pack {name!r} of {_origin(found[name][0])} has the name of a built-in pack; rename it")
    return {name: points[0] for name, points in sorted(found.items())}


def available_packs() -> tuple[str, ...]:
    """Every pack name `MRTR_WORKER_TOOL_PACKS` may use: the built-in ones, then the installed ones."""
    return BUILTIN_PACKS + tuple(installed_packs())


def check_names(names: list[str]) -> list[str]:
    """`names` if every one is a pack this worker can serve; otherwise a one-line error naming what is available."""
    available = available_packs()
    unknown = [name for name in names if name not in available]
    if unknown:
        raise _unknown(unknown, available)
    return names


def _unknown(names: list[str], available: tuple[str, ...]) -> PackError:
    return PackError(f"unknown tool pack(s) {names}; available: {list(available)}")


def load_pack(name: str) -> ToolPack:
    """The pack called `name`: a built-in module's `register`, or what an installed entry point names."""
    if name in BUILTIN_PACKS:
        return ToolPack(importlib.import_module(f"mrtr_worker.packs.{name}").register)
    installed = installed_packs()
    if name not in installed:
        raise _unknown([name], BUILTIN_PACKS + tuple(installed))
    return _loaded(name, installed[name])


def _loaded(name: str, point: EntryPoint) -> ToolPack:
    try:
        target = point.load()
    except Exception as exc:  # any failure of a third-party import is a configuration error, said in one line
        why = " ".join(f"{exc.__class__.__name__}: {exc}".split())
        raise PackError(f"tool pack {name!r} ({_origin(point)}) failed to load: {why}") from exc
    if isinstance(target, ToolPack):
        _check_jobs(name, point, target.jobs)
        return target
    if callable(target):
        return ToolPack(target)
    raise PackError(
        f"tool pack {name!r} ({_origin(point)}) names a {type(target).__name__}, not a ToolPack or a register function"
    )


def _check_jobs(name: str, point: EntryPoint, jobs: object) -> None:
    if not isinstance(jobs, tuple) or not all(isinstance(job, Job) for job in jobs):
        raise PackError(f"tool pack {name!r} ({_origin(point)}): ToolPack.jobs must be a tuple of Job")


def register_packs(names: list[str], server: MCPServer, env: PackEnv) -> None:
    """Load and register the packs `names`, in order, on `server`.

    An installed pack's failure is a configuration error naming the pack. So is a tool name another
    pack already serves: the SDK would keep the first tool and drop the second without an error, and
    calls meant for one pack's tool would reach the other's.
    """
    owners: dict[str, str] = {}
    for name in names:
        _register(name, load_pack(name), server, env, owners)


def _register(name: str, pack: ToolPack, server: MCPServer, env: PackEnv, owners: dict[str, str]) -> None:
    add_tool = server.add_tool

    def add_owned_tool(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        tool = kwargs.get("name") or (args[0] if args else None) or fn.__name__  # as the SDK names it
        if tool in owners:
            raise PackError(f"tool pack {name!r} adds tool {tool!r}, which tool pack {owners[tool]!r} serves")
        owners[tool] = name
        add_tool(fn, *args, **kwargs)

    setattr(server, "add_tool", add_owned_tool)  # noqa: B010  # this pack's registration only (mypy: a method)
    try:
        pack.register(server, env)
    except PackError:
        raise
    except Exception as exc:
        if name in BUILTIN_PACKS:
            raise
        raise PackError(f"tool pack {name!r} failed to register: {exc.__class__.__name__}: {exc}") from exc
    finally:
        delattr(server, "add_tool")  # the SDK's own method again


@functools.cache
def installed_jobs() -> dict[str, Job]:
    """The task jobs of every installed pack, by name (loaded once per process).

    A job name must be new: a built-in job's name, or another installed pack's, is refused.
    """
    jobs: dict[str, Job] = {}
    owner: dict[str, str] = {}
    for name, point in installed_packs().items():
        for job in _loaded(name, point).jobs:
            if job.name in JOBS or job.name in jobs:
                where = "a built-in job" if job.name in JOBS else f"a job of tool pack {owner[job.name]!r}"
                raise PackError(f"tool pack {name!r} ({_origin(point)}) declares job {job.name!r}, already {where}")
            jobs[job.name], owner[job.name] = job, name
    return jobs


def job_named(name: str) -> Job | None:
    """The job called `name`: a built-in one, or one of an installed pack's; None if this worker has none."""
    return JOBS.get(name) or installed_jobs().get(name)


def _origin(point: EntryPoint) -> str:
    dist = point.dist
    where = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"{point.value} from {where}"
