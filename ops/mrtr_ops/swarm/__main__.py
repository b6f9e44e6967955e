"""`python -m mrtr_ops.swarm` (scripts/swarm-e2e): the rolling upgrade on Docker Swarm, `walkthrough.py`'s run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import docker

from mrtr_ops.paths import project_root
from mrtr_ops.swarm import walkthrough
from mrtr_ops.swarm.stack import SwarmStack, port_taken, swarm_state
from mrtr_ops.swarm.walkthrough import Options, deploy_cluster, images, run


def main(argv: list[str] | None = None) -> int:
    description = (walkthrough.__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m mrtr_ops.swarm", description=description)
    parser.add_argument("--stack", default="mrtr-walkthrough", help="stack name (default mrtr-walkthrough)")
    parser.add_argument("--port", type=int, default=8080, help="the proxy's port on this node (default 8080)")
    parser.add_argument("--locust-port", type=int, default=8089, help="the Locust master's port (default 8089)")
    parser.add_argument("--out", type=Path, default=Path("reports/swarm-walkthrough"), help="report directory")
    parser.add_argument("--users", type=int, default=8, help="Locust users (default 8)")
    parser.add_argument("--rollback", action="store_true", help="after the update, `docker service rollback` too")
    parser.add_argument("--keep", action="store_true", help="leave the stack running at the end")
    args = parser.parse_args(argv)

    engine = docker.from_env()
    if swarm_state(engine) != "active":
        print("swarm-walkthrough: this engine is in no swarm; `docker swarm init --advertise-addr 127.0.0.1` first")
        return 2
    ids = images(engine)
    new_image = ids.pop("MRTR_WORKER_V2_IMAGE")
    env = {**ids, "MRTR_PORT": str(args.port), "MRTR_LOCUST_PORT": str(args.locust_port), "MRTR_MAX_SLICE_MS": "500"}
    stack = SwarmStack(args.stack, project_root(), env, engine)
    url = f"http://127.0.0.1:{args.port}"
    stack.remove()  # a fresh fleet of v1 workers every run
    if taken := [port for port in (args.port, args.locust_port) if port_taken(port)]:
        print(f"swarm-walkthrough: ports {taken} are taken on this machine; pick others (--port, --locust-port)")
        return 2
    try:
        deploy_cluster(stack, url)
        print(f"swarm-walkthrough: stack {stack.name}: {stack.replicas('worker')} v1 workers behind {url}", flush=True)
        code, _ = run(stack, args.out, new_image, Options(users=args.users, rollback=args.rollback))
        return code
    finally:
        if not args.keep:
            stack.remove()


if __name__ == "__main__":
    sys.exit(main())
