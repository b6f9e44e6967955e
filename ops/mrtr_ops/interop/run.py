"""One run of the matrix: two local clusters, every row's driver, the checks, the timings.

The anonymous cluster and the `--auth` one start side by side (each is 3
workers, Redis and the proxy on free loopback ports, with a short time slice
so long calls are handed back across instances); the rows run one after
another so their timings do not disturb each other.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from mrtr_ops.interop import scenario, timing
from mrtr_ops.interop.catalog import TIMED_ROWS, Feature, Run, Runner, runs
from mrtr_ops.interop.checks import Context, judge
from mrtr_ops.interop.gaps import AnchorMissing, GapBook
from mrtr_ops.interop.report import Outcome, now
from mrtr_ops.interop.runner import Record, Toolbox, run_row
from mrtr_ops.interop.scenario import DriverConfig
from mrtr_ops.interop.timing import Timing
from mrtr_ops.interop.vault_helper import VaultHelper
from mrtr_ops.local.cluster import ClusterConfig, LocalCluster
from mrtr_protocol.wire import encode_request, request_headers, request_meta

WORKERS = 3
DEFAULT_MAX_SLICE_MS = 300


@dataclass(frozen=True)
class Options:
    tools: Toolbox
    max_slice_ms: int = DEFAULT_MAX_SLICE_MS
    only: frozenset[str] = frozenset()
    """Row ids to run (empty: all)."""
    timings: bool = True


def run_matrix(options: Options, say: Callable[[str], None] = print) -> Outcome:
    """Run every selected row on fresh clusters and judge every record."""
    tools = options.tools
    shutil.rmtree(tools.work_dir, ignore_errors=True)
    tools.work_dir.mkdir(parents=True)
    selected = tuple(run for run in runs() if not options.only or run.row.id in options.only)
    book = GapBook(_trees(tools))
    clusters = _start_clusters(tools.work_dir, options.max_slice_ms, auth=any(run.bearer for run in selected))
    anonymous, secured = clusters
    say(f"interop: anonymous cluster at {anonymous.mcp_url}" + (f", --auth at {secured.mcp_url}" if secured else ""))
    helper = None
    try:
        if secured is not None:
            issuer = secured.issuer
            helper = VaultHelper(
                scenario.VAULT_SUBJECT, lambda: issuer.mint(scenario.VAULT_SUBJECT), scenario.VAULT_API_KEY
            ).start()
        tool_names = tool_list(anonymous.mcp_url)
        records: dict[str, dict[Feature, Record]] = {}
        cells = {}
        for run in selected:
            cluster = secured if run.bearer else anonymous
            assert cluster is not None
            token = cluster.issuer.mint(scenario.VAULT_SUBJECT) if run.bearer else None
            features = tuple(f for f in run.row.features if f not in book.unsupported(run.row.id))
            config = DriverConfig(
                cluster.mcp_url,
                tuple(f.value for f in features),
                token=token,
                vault_helper=None if helper is None else helper.url,
                cancel_primes_limit=_cancel_limit(run),
            )
            started = time.perf_counter()
            records[run.id] = run_row(run, config, tools)
            context = Context(run, tool_names, {} if helper is None else dict(helper.completed), book)
            row_cells = {feature: judge(feature, records[run.id].get(feature), context) for feature in run.row.features}
            cells.update({(run.id, feature): cell for feature, cell in row_cells.items()})
            verdicts = ", ".join(f"{f.value} {c.verdict.value}" for f, c in row_cells.items())
            say(f"interop: {run.title}: {verdicts} ({time.perf_counter() - started:.1f} s)")
        timings = _timings(selected, records, anonymous.mcp_url, book) if options.timings else ()
    finally:
        if helper is not None:
            helper.stop()
        for cluster in clusters:
            if cluster is not None:
                cluster.stop()
    return Outcome(selected, cells, installed_versions(tools, selected), timings, options.max_slice_ms, now())


def _cancel_limit(run: Run) -> int:
    """A client whose cancel cannot reach the server (a known gap) leaves its task running: keep that task short."""
    return scenario.CANCEL_PRIMES_LIMIT_LEAKY if run.row.runner is Runner.PYTHON_TASKS else scenario.CANCEL_PRIMES_LIMIT


def _start_clusters(work_dir: Path, max_slice_ms: int, *, auth: bool) -> tuple[LocalCluster, LocalCluster | None]:
    """Both clusters at once (their start-up is mostly waiting); either failing stops both."""
    worker_env = {"MRTR_WORKER_MAX_SLICE_MS": str(max_slice_ms)}

    def config(name: str, secured: bool) -> ClusterConfig:
        return ClusterConfig(workers=WORKERS, port=0, work_dir=work_dir / name, auth=secured, worker_env=worker_env)

    anonymous = LocalCluster(config("anonymous", False))
    secured = LocalCluster(config("auth", True)) if auth else None
    errors: list[BaseException] = []

    def start(cluster: LocalCluster) -> None:
        try:
            cluster.start()
        except BaseException as exc:  # reported below, after both attempts
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(c,)) for c in (anonymous, secured) if c is not None]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for cluster in (anonymous, secured):
            if cluster is not None:
                cluster.stop()
        raise RuntimeError(f"a cluster did not start: {errors[0]}") from errors[0]
    if anonymous.redis is None:
        raise RuntimeError("the cluster has no Redis: the tasks rows need redis-server (scripts/redis-setup)")
    return anonymous, secured


def tool_list(mcp_url: str) -> frozenset[str]:
    """The server's own tool names, read over the wire (the Inspector's list is checked against them)."""
    names: set[str] = set()
    cursor: str | None = None
    with httpx.Client(timeout=30) as http:
        for request_id in range(1, 100):
            params: dict[str, Any] = {"_meta": request_meta({})}
            if cursor is not None:
                params["cursor"] = cursor
            reply = http.post(
                mcp_url,
                headers=request_headers("tools/list", params),
                content=encode_request(request_id, "tools/list", params),
            )
            result = reply.raise_for_status().json()["result"]
            names.update(tool["name"] for tool in result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                break
    return frozenset(names)


def _timings(
    selected: tuple[Run, ...], records: Mapping[str, Mapping[Feature, Record]], url: str, book: GapBook
) -> tuple[Timing, ...]:
    found: list[Timing] = []
    for run in selected:
        if run.bearer or run.row not in TIMED_ROWS:
            continue
        measured = timing.from_record(
            run.row.title, records.get(run.id, {}).get(Feature.HANDBACK), timing.RULES[run.row.id]
        )
        if measured is not None:
            found.append(_cited(measured, book))
    found.append(timing.ours(url))
    return tuple(found)


def _cited(measured: Timing, book: GapBook) -> Timing:
    if measured.rule.anchor is None:
        return measured
    try:
        return replace(measured, citation=book.cite(measured.rule.anchor))
    except AnchorMissing:
        return measured


def _trees(tools: Toolbox) -> dict[str, Path]:
    """The installed trees gaps and rules cite lines in."""
    return {
        "npm": tools.npm_dir / "node_modules",
        "venv": _site_packages(tools.python),
        "tasks-venv": _site_packages(tools.tasks_python),
    }


def _site_packages(python: Path) -> Path:
    """The site-packages of the environment `python` belongs to (a venv's layout: lib/pythonX.Y/site-packages)."""
    env = python.parent.parent
    found = sorted(env.glob("lib/python3*/site-packages"))
    return found[0] if found else env


def installed_versions(tools: Toolbox, selected: tuple[Run, ...]) -> dict[str, str]:
    """The version of each package the rows name, as installed (npm's package.json, the environments' metadata)."""
    versions: dict[str, str] = {}
    names = {name for run in selected for name in run.row.packages}
    for name in names:
        if name.startswith("@"):
            manifest = tools.npm_dir / "node_modules" / name / "package.json"
            versions[name] = _json_version(manifest)
            continue
        for env in (_site_packages(tools.python), _site_packages(tools.tasks_python)):
            found = [d.version for d in metadata.distributions(path=[str(env)]) if _same(d.metadata["Name"], name)]
            if found:
                versions.setdefault(name, found[0])
    return versions


def _same(a: str | None, b: str) -> bool:
    return a is not None and a.replace("_", "-").lower() == b.replace("_", "-").lower()


def _json_version(manifest: Path) -> str:
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "not installed"
