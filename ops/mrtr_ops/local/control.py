"""A small control API on the local cluster process, so `scripts/rolling-upgrade` can change it from outside.

`scripts/cluster` owns its worker processes (they stop with it); the upgrade
runs in another process and asks the cluster, over loopback HTTP, to start
and drain workers. `ControlledFleet` is that client side, a `Fleet` like any
other.

    GET  /fleet                          {"keyring_file": ..., "workers": [...]}
    POST /fleet/workers                  {"version": 2, "env": {...}}  -> the new worker
    POST /fleet/workers/<id>/drain       -> {"drained": id}
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from mrtr_ops.fleet import FleetWorker
from mrtr_ops.local.fleet import LocalFleet
from mrtr_ops.local.loopback import JsonHandler, LoopbackServer


class ControlServer(LoopbackServer):
    """Serves the control API for one `LocalFleet` on 127.0.0.1, in a background thread."""

    def __init__(self, fleet: LocalFleet, port: int = 0) -> None:
        self._lock = threading.Lock()  # one membership change at a time
        super().__init__(_handler_for(fleet, self._lock), name="cluster control", port=port)


def _handler_for(fleet: LocalFleet, lock: threading.Lock) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            if self.path != "/fleet":
                return self._reply(404, {"error": f"no {self.path}"})
            workers = [asdict(w) for w in fleet.workers()]
            self._reply(200, {"keyring_file": str(fleet.keyring_file), "workers": workers})

        def do_POST(self) -> None:
            parts = self.path.strip("/").split("/")
            try:
                with lock:
                    if parts == ["fleet", "workers"]:
                        body = json.loads(self._body() or b"{}")
                        worker = fleet.start_worker(int(body["version"]), dict(body.get("env") or {}))
                        return self._reply(200, asdict(worker))
                    if len(parts) == 4 and parts[:2] == ["fleet", "workers"] and parts[3] == "drain":
                        fleet.drain_worker(parts[2])
                        return self._reply(200, {"drained": parts[2]})
            except (KeyError, ValueError) as exc:
                return self._reply(400, {"error": f"{type(exc).__name__}: {exc}"})
            except Exception as exc:
                return self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})
            self._reply(404, {"error": f"no {self.path}"})

    return Handler


class ControlledFleet:
    """A `Fleet` whose workers belong to a `scripts/cluster` process, changed through its control API."""

    def __init__(self, url: str) -> None:
        self._http = httpx.Client(base_url=url, timeout=120)

    @property
    def keyring_file(self) -> Path:
        return Path(self._get()["keyring_file"])

    def workers(self) -> list[FleetWorker]:
        return [FleetWorker(**w) for w in self._get()["workers"]]

    def start_worker(self, version: int, env: dict[str, str]) -> FleetWorker:
        return FleetWorker(**self._post("/fleet/workers", {"version": version, "env": env}))

    def drain_worker(self, instance_id: str) -> None:
        self._post(f"/fleet/workers/{instance_id}/drain", {})

    def _get(self) -> dict[str, Any]:
        response = self._http.get("/fleet")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        if response.status_code != 200:
            raise RuntimeError(f"cluster control {path}: {response.status_code} {response.text}")
        answer: dict[str, Any] = response.json()
        return answer
