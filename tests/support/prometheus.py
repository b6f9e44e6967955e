"""Asking a running Prometheus what it scrapes and what its console shows (the compose and swarm checks)."""

from __future__ import annotations

import re
from typing import Any

import httpx

TASK_STATUSES = {"working", "input_required", "completed", "failed", "cancelled"}
"""The statuses the console's "Tasks by status" table lists (the exporter's script counts every one)."""


def active_targets(prometheus_url: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{prometheus_url}/api/v1/targets", params={"state": "active"}, timeout=10.0)
    reply.raise_for_status()
    targets: list[dict[str, Any]] = reply.json()["data"]["activeTargets"]
    return targets


def targets_per_job_once_all_up(prometheus_url: str) -> dict[str, int] | None:
    """Targets per job once every one is up (None until then): the workers, the proxy's admin listener, the exporter."""
    try:
        targets = active_targets(prometheus_url)
    except httpx.HTTPError:
        return None
    if not targets or any(target["health"] != "up" for target in targets):
        return None
    jobs: dict[str, int] = {}
    for target in targets:
        jobs[target["labels"]["job"]] = jobs.get(target["labels"]["job"], 0) + 1
    return jobs


def console_task_statuses(prometheus_url: str) -> set[str] | None:
    """The task statuses the console's "Tasks by status" table lists (None while it lists none)."""
    page = httpx.get(f"{prometheus_url}/consoles/mrtr.html", timeout=10.0)
    page.raise_for_status()
    found = set(re.findall(r'<tr data-status="([a-z_]+)">', page.text))
    return found or None
