"""HAProxy as a child process with a generated config: the reference balancer of the proxy benchmark.

It is configured the way services/lb/README.md says a replacement balancer
must be: round robin, no stickiness, health checks on /readyz, retries only
on connection failures; plus `option http-keep-alive` on both sides. With
``access_log`` it logs one line per request to its stdout (`option httplog`,
as services/haproxy/haproxy.cfg does in compose), which is what mrtr_lb does
by default. It runs as a child of the benchmark (foreground, `-db`), never
as a system service.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from mrtr_ops.local.process import LOOPBACK, ManagedProcess


def ensure_installed(*, install: bool) -> tuple[str | None, str]:
    """The haproxy binary, installing the Debian package if it is missing; (None, why) if it cannot be had."""
    found = shutil.which("haproxy")
    if found:
        return found, "found"
    if not install:
        return None, "haproxy is not installed (and installing was not allowed)"
    if os.geteuid() != 0:
        return None, "haproxy is not installed and installing it needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("installing haproxy (apt-get install -y haproxy)", flush=True)
    install_cmd = ["apt-get", "install", "-y", "haproxy"]
    for argv in (install_cmd, ["apt-get", "update"], install_cmd):  # update only if the first install fails
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
        if argv is install_cmd and done.returncode == 0:
            break
    found = shutil.which("haproxy")
    if found:
        return found, "installed"
    return None, f"haproxy could not be installed: {done.stderr.strip().splitlines()[-1:] or done.returncode}"


def config(port: int, backends: list[str], *, access_log: bool = False, server_maxconn: int | None = None) -> str:
    """The configuration; `server_maxconn` limits each worker's concurrent requests, the rest queue in HAProxy."""
    limit = f" maxconn {server_maxconn}" if server_maxconn else ""
    queue = "\n    timeout queue 60s" if server_maxconn else ""
    servers = "\n".join(
        f"    server w{i} {url.removeprefix('http://')} check" for i, url in enumerate(backends, start=1)
    )
    global_log = "\n    log stdout format raw local0 info" if access_log else ""
    defaults_log = "\n    log global\n    option httplog" if access_log else ""
    return f"""global
    maxconn 4096{global_log}

defaults
    mode http{defaults_log}
    option http-keep-alive
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 10s{queue}

frontend mcp
    bind {LOOPBACK}:{port}
    default_backend workers

backend workers
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 1 rise 1{limit}
    retry-on conn-failure
    retries 3
    option redispatch
{servers}
"""


def process(
    binary: str,
    port: int,
    backends: list[str],
    work_dir: Path,
    *,
    access_log: bool = False,
    server_maxconn: int | None = None,
) -> ManagedProcess:
    """An HAProxy child listening on 127.0.0.1:port; ready once it forwards /readyz to a worker."""
    work_dir.mkdir(parents=True, exist_ok=True)
    config_file = work_dir / "haproxy.cfg"
    config_file.write_text(config(port, backends, access_log=access_log, server_maxconn=server_maxconn))
    return ManagedProcess(
        name="haproxy",
        argv=[binary, "-db", "-f", str(config_file)],
        env=dict(os.environ),
        log_path=work_dir / "haproxy.log",
        ready_url=f"http://{LOOPBACK}:{port}/readyz",
    )
