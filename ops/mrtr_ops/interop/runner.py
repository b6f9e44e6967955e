"""Start one row's driver (or the Inspector's CLI) against a cluster and collect its records by feature.

A driver is a separate process on the client's own runtime; what it printed
on stderr goes to `<work>/logs/<run>.log`, and a driver that crashes or hangs
simply leaves features without a record (which the checks count as failures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrtr_ops.interop import scenario
from mrtr_ops.interop.catalog import Feature, Run, Runner
from mrtr_ops.interop.drivers import DRIVERS_DIR
from mrtr_ops.interop.scenario import DriverConfig

Record = dict[str, Any]

DRIVER_TIMEOUT_S = 240.0
"""A whole row's bound (a row takes seconds; a hung client must not hang CI)."""
INSPECTOR_LAUNCHER = "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"


@dataclass(frozen=True)
class Toolbox:
    """Where the installed clients are (`scripts/interop` installs them), and where a run keeps its files."""

    node: Path
    npm_dir: Path
    tasks_python: Path
    work_dir: Path
    python: Path = Path(sys.executable)

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "logs"


def run_row(run: Run, config: DriverConfig, tools: Toolbox) -> dict[Feature, Record]:
    """The records one row printed, by feature (features it printed nothing for are absent)."""
    if run.row.runner is Runner.INSPECTOR:
        return _inspector(run, config, tools)
    tools.log_dir.mkdir(parents=True, exist_ok=True)
    config_file = tools.work_dir / f"{run.id}.json"
    config_file.write_text(json.dumps(config.to_json(), indent=1))
    argv = _argv(run, config_file, tools)
    with (tools.log_dir / f"{run.id}.log").open("w") as log:
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, timeout=DRIVER_TIMEOUT_S, check=False)
            output = done.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as timeout:
            print(f"driver timed out after {DRIVER_TIMEOUT_S:.0f} s", file=log)
            output = (timeout.stdout or b"").decode(errors="replace")
    (tools.work_dir / f"{run.id}.records.jsonl").write_text(output)
    return records_by_feature(output.splitlines())


def _argv(run: Run, config_file: Path, tools: Toolbox) -> list[str]:
    row = run.row
    if row.runner is Runner.NODE:
        for script in DRIVERS_DIR.glob("*.mjs"):  # beside the installed node_modules, so the imports resolve
            shutil.copy2(script, tools.npm_dir / script.name)
        return [str(tools.node), str(tools.npm_dir / row.script), str(config_file)]
    python = tools.tasks_python if row.runner is Runner.PYTHON_TASKS else tools.python
    return [str(python), str(DRIVERS_DIR / "py_clients.py"), row.script, str(config_file)]


def records_by_feature(lines: Sequence[str]) -> dict[Feature, Record]:
    """Parse a driver's stdout: one JSON object per feature; anything else on stdout is ignored."""
    records: dict[Feature, Record] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
            feature = Feature(record["feature"])
        except (ValueError, KeyError, TypeError):
            continue
        records[feature] = record
    return records


# --- the MCP Inspector's CLI, one invocation per feature ----------------------------------------------


def inspector_argv(url: str, feature: Feature) -> list[str]:
    """The CLI's arguments for a feature (after `node launcher --cli`): modern era, JSON output."""
    modern = ["--protocol-era", "modern"]
    if feature is Feature.TOOLS_LIST:
        return [url, *modern, "--method", "tools/list"]
    if feature is Feature.TOOLS_CALL:
        arguments = json.dumps({"text": scenario.ECHO_TEXT})
        return [url, *modern, "--method", "tools/call", "--tool-name", "echo", "--tool-args-json", arguments]
    if feature is Feature.TASK_RESULT:
        arguments = json.dumps({"limit": scenario.INSPECTOR_PRIMES_LIMIT})
        return [url, *modern, "--method", "tools/call", "--tool-name", "count_primes", "--tool-args-json", arguments]
    if feature is Feature.LEGACY_DEFAULT:
        return [url, "--method", "tools/list"]
    raise ValueError(f"the Inspector row has no {feature}")


def inspector_record(feature: Feature, stdout: str, stderr: str, elapsed_ms: float) -> Record:
    """A record from the CLI's `--format json` output: `{"result": ...}` or `{"error": ...}`."""
    record: Record = {"feature": feature.value, "asked": [], "exchanges": [], "elapsedMs": round(elapsed_ms, 3)}
    for text in (stdout, stderr):
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            try:
                shown = json.loads(line)
            except ValueError:
                continue
            if "result" in shown:
                return {**record, "ok": True, "value": shown["result"]}
            if "error" in shown:
                error = shown["error"]
                return {**record, "ok": False, "error": {"type": "cli", "message": str(error.get("message", error))}}
    return {**record, "ok": False, "error": {"type": "cli", "message": f"no JSON result; stderr: {stderr[-500:]}"}}


def _inspector(run: Run, config: DriverConfig, tools: Toolbox) -> dict[Feature, Record]:
    home = tools.work_dir / "inspector-home"  # its catalog and settings, kept out of the user's home
    home.mkdir(parents=True, exist_ok=True)
    tools.log_dir.mkdir(parents=True, exist_ok=True)
    env: Mapping[str, str] = {**os.environ, "HOME": str(home)}
    launcher = tools.npm_dir / INSPECTOR_LAUNCHER
    records: dict[Feature, Record] = {}
    with (tools.log_dir / f"{run.id}.log").open("w") as log:
        for name in config.features:
            feature = Feature(name)
            argv = [str(tools.node), str(launcher), "--cli", *inspector_argv(config.url, feature), "--format", "json"]
            started = time.perf_counter()
            try:
                done = subprocess.run(argv, capture_output=True, env=env, timeout=120, check=False)
            except subprocess.TimeoutExpired:
                print(f"{feature}: timed out", file=log)
                continue
            elapsed = (time.perf_counter() - started) * 1000
            stdout, stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
            print(f"$ {' '.join(argv[2:])}\nexit {done.returncode}\n{stdout}\n{stderr}", file=log)
            records[feature] = inspector_record(feature, stdout, stderr, elapsed)
    lines = [json.dumps(record) for record in records.values()]
    (tools.work_dir / f"{run.id}.records.jsonl").write_text("\n".join(lines) + "\n")
    return records
