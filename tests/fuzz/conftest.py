"""Hypothesis profiles and the per-property case count for the fuzz suite.

`ci` (the default) is derandomized and bounded so the whole suite runs in
about a minute on two cores and every run tries the same cases;
`HYPOTHESIS_PROFILE=long` tries many more, with fresh random cases each run
and failures remembered in `.cache/hypothesis` to be replayed first next time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from mrtr_dev_issuer import PUBLIC_KEY_NAME, DevIssuer
from mrtr_ops.local.process import WorkerSpec, free_port
from tests.fuzz.budget import PROFILE
from tests.fuzz.origins import HOP_BY_HOP, Origins, collect
from tests.fuzz.tally import TALLY, TALLY_KEY
from tests.fuzz.target import FuzzTarget

_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=_SLOW_IS_FINE,
)
settings.register_profile(
    "long",
    deadline=None,
    max_examples=2_000,
    database=DirectoryBasedExampleDatabase(str(Path(__file__).parents[2] / ".cache" / "hypothesis")),
    print_blob=True,
    suppress_health_check=_SLOW_IS_FINE,
)
settings.load_profile(PROFILE)


@pytest.fixture(scope="session")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevIssuer, Path]:
    """The development token issuer the fuzzed worker trusts, and its public key file."""
    directory = tmp_path_factory.mktemp("issuer")
    return DevIssuer.ensure(directory), directory / PUBLIC_KEY_NAME


@pytest.fixture(scope="session")
def target(keyring_file: Path, log_dir: Path, issuer: tuple[DevIssuer, Path]) -> Iterator[FuzzTarget]:
    """One real worker for the whole fuzz suite (starting one per module would cost more than the fuzzing).

    Demo and compute packs, 1 ms time slices (a computation, fuzzed or not, hands back after a step or two),
    bearer tokens of the development issuer verified, anonymous calls allowed (the local cluster's setting):
    so the same worker serves the anonymous fuzz and the cross-user state swaps.
    """
    auth = {"MRTR_WORKER_JWT_PUBLIC_KEY_FILE": str(issuer[1]), "MRTR_WORKER_ALLOW_ANONYMOUS": "true"}
    spec = WorkerSpec(
        instance_id="fuzz",
        port=free_port(),
        keyring_file=keyring_file,
        tool_packs=("demo", "compute"),
        extra_env=tuple({**HOP_BY_HOP, **auth}.items()),
    )
    process = spec.process(log_dir).start()
    try:
        process.wait_ready()
        fuzzed = FuzzTarget(spec, process, log_dir / f"{spec.instance_id}.log")
        yield fuzzed
        fuzzed.close()
    finally:
        process.stop()


@pytest.fixture(scope="session")
def origins(target: FuzzTarget) -> Origins:
    """Real sealed states, collected once from the worker under fuzz."""
    return collect(target.mcp)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Count cases under the running test; after each test that used the worker, check it is still healthy."""
    TALLY.current = item.nodeid
    try:
        result = yield
    finally:
        TALLY.current = ""
    target = getattr(item, "funcargs", {}).get("target")
    if isinstance(target, FuzzTarget):
        target.assert_healthy()
    return result


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.nodeid in TALLY.cases:
        TALLY.seconds[report.nodeid] = report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, hand this process's tally to the controller (which prints the table)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and TALLY.cases:
        workeroutput[TALLY_KEY] = TALLY.as_data()
