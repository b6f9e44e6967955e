"""The test packs are out of the product: its wheel has none, and a worker without them refuses to serve one.

The conformance fixtures and the chaos pack's toxic jobs (one calls `sys.exit(42)`) live in `testpacks/`
(`mrtr-test-packs`), installed in the development environment for the tests and the runs; the worker's own
wheel, the one its image installs, carries the `demo` and `compute` packs only.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from mrtr_ops.local.process import WorkerSpec, free_port
from mrtr_ops.local.redis import RedisServer
from mrtr_ops.waiting import wait_until
from mrtr_protocol.tasks import COMPUTE_META_KEY
from mrtr_worker.packs.registry import BUILTIN_PACKS, installed_packs, job_named, load_pack
from mrtr_worker.sealing.keyring import new_ring
from mrtr_worker.tasks.catalog import JOBS
from tests.conftest import StartWorker
from tests.support.paths import ROOT
from tests.worker.tasks.tasks_support import TaskClient

TEST_PACKS = {"conformance", "chaos"}
TEST_PACKS_DIST = "mrtr-test-packs"


@pytest.fixture(scope="module")
def product_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The worker's wheel, built as `scripts/build-images` builds it for the image (from the uv cache, offline)."""
    out = tmp_path_factory.mktemp("wheel")
    uv = ROOT / ".cache" / "tools" / "bin" / "uv"
    built = subprocess.run(
        [str(uv), "build", "--offline", "--quiet", "--wheel", "--package", "mrtr-worker", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("mrtr_worker-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_product_wheel_carries_the_demo_packs_and_no_test_pack(product_wheel: zipfile.ZipFile) -> None:
    names = product_wheel.namelist()
    packs = sorted(name.removeprefix("mrtr_worker/packs/") for name in names if name.startswith("mrtr_worker/packs/"))
    assert packs == ["__init__.py", "compute.py", "demo.py", "registry.py"]
    assert not [name for name in names if "mrtr_test_packs" in name]
    exits = [name for name in names if name.endswith(".py") and b"sys.exit(42)" in product_wheel.read(name)]
    assert exits == []  # the toxic job's call is nowhere in the product
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "mrtr_worker.tool_packs" not in product_wheel.read(entry_points).decode()


def test_the_test_packs_come_from_their_package_through_the_entry_point_group() -> None:
    assert BUILTIN_PACKS == ("demo", "compute")
    found = installed_packs()
    origins = {name: getattr(found[name].dist, "name", None) for name in TEST_PACKS}
    assert origins == {name: TEST_PACKS_DIST for name in TEST_PACKS}
    conformance = [job.name for job in load_pack("conformance").jobs]
    chaos = [job.name for job in load_pack("chaos").jobs]
    assert conformance == ["slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input",
                           "greet_later"]  # fmt: skip
    assert chaos == ["chaos_raise", "chaos_exit", "chaos_forever"]
    assert set(JOBS).isdisjoint(conformance + chaos)  # not built in: a worker knows them only with the package
    assert all(job_named(name) is not None for name in conformance + chaos)  # here, where it is installed


def _environment_without_test_packs(where: Path) -> Path:
    """A virtual environment holding everything this one holds but the test packs' package: its Python."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = Path(sysconfig.get_path("purelib"))
    for entry in ours.iterdir():
        if not entry.name.startswith(("mrtr_test_packs", "_editable_impl_mrtr_test_packs")):
            (Path(purelib) / entry.name).symlink_to(entry)
    return python


@pytest.mark.slow  # starts a worker process
def test_a_worker_without_the_test_packs_refuses_to_serve_one(tmp_path: Path) -> None:
    python = _environment_without_test_packs(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MRTR_WORKER_", "PYTHON"))}
    env |= {
        "MRTR_WORKER_ALLOW_ANONYMOUS": "true",
        "MRTR_WORKER_KEYRING": new_ring("no-test-packs").dumps(),
        "MRTR_WORKER_TOOL_PACKS": "demo,conformance",
    }
    listed = subprocess.run(
        [str(python), "-c", "from mrtr_worker.packs.registry import available_packs; print(*available_packs())"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.stdout.split() == ["demo", "compute", "collatz"], listed.stderr  # the environment is this one's
    done = subprocess.run(
        [str(python), "-m", "mrtr_worker"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("mrtr-worker: configuration error: ")
    assert "unknown tool pack(s) ['conformance']; available: ['demo', 'compute', 'collatz']" in lines[0]


@pytest.mark.slow  # three worker processes and Redis
def test_a_worker_without_the_test_packs_leaves_their_tasks_to_one_that_has_them(
    tmp_path: Path, start_worker: StartWorker, redis_server: RedisServer, keyring_file: Path
) -> None:
    """A task's slice may reach any worker of the fleet; one that lacks the job's pack must neither run nor fail it."""
    env = {"MRTR_WORKER_REDIS_URL": redis_server.url, "MRTR_WORKER_REDIS_PREFIX": "no-test-packs:"}
    packs = ("demo", "compute", "conformance")
    with_packs, with_process = start_worker(tool_packs=packs, env=env)
    lacking = WorkerSpec("lacking", free_port(), keyring_file, tool_packs=("demo", "compute"),
                         extra_env=tuple(env.items()))  # fmt: skip
    python = _environment_without_test_packs(tmp_path / "venv")
    process = dataclasses.replace(lacking.process(tmp_path), argv=[str(python), "-m", "mrtr_worker"]).start()
    try:
        process.wait_ready()
        creator, reader = TaskClient(with_packs.url), TaskClient(lacking.url)
        task_id = creator.create("slow_compute", {"seconds": 1, "label": "kept"})
        creator.close()
        with_process.stop()  # the only worker that knows the job drains: its slice goes back to the queue

        def left_here() -> bool:
            log = process.log_path.read_text()
            return f"task {task_id}: slice left to other instances: job 'slow_compute' unknown to version 1" in log

        wait_until(left_here, timeout=60, interval=0.1, what="the worker without the pack to leave the slice")
        assert reader.get(task_id)["status"] == "working"  # neither run nor failed here
        start_worker(tool_packs=packs, env=env)  # a worker with the pack joins and finishes it
        done = reader.wait_status(task_id, timeout=60)
        reader.close()
    finally:
        process.stop()
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "slow_compute finished after 1.0 s (label 'kept')"
    visited = [instance for instance, _ in done["result"]["_meta"][COMPUTE_META_KEY]["visited"]]
    assert "lacking" not in visited  # every step ran where the job is known
