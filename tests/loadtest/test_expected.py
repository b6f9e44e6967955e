"""The Locust suite's known answers are its own copies (the loadtest image has no worker code): check them here."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from mrtr_locust import expected
from mrtr_worker.compute import hashchain, montecarlo, primes
from mrtr_worker.compute.computation import Computation, run_uninterrupted
from mrtr_worker.packs import demo
from tests.support.paths import ROOT


def test_the_prime_counts_are_the_workers() -> None:
    assert expected.PRIME_COUNTS.items() <= primes.KNOWN_COUNTS.items()


@pytest.mark.parametrize("case", expected.PRIMES_CASES, ids=str)
def test_every_primes_case_has_a_known_answer_and_the_workers_step_count(case: expected.PrimesCase) -> None:
    assert case.limit in expected.PRIME_COUNTS
    assert case.steps == primes.total_steps(primes.initial(case.arguments))


def test_the_prime_count_of_a_small_case_is_what_the_worker_computes() -> None:
    case = expected.PrimesCase(1_000_000, 250_000)
    assert run_uninterrupted(primes.COUNT_PRIMES, case.arguments) == (expected.primes_result(case), case.steps)


@pytest.mark.parametrize("case", expected.HASH_CHAIN_CASES, ids=str)
def test_the_hash_chain_reference_is_the_workers(case: expected.HashChainCase) -> None:
    assert expected.hash_chain(case.seed, case.iterations) == hashchain.reference(case.seed, case.iterations)
    assert run_uninterrupted(hashchain.HASH_CHAIN, case.arguments) == (expected.hash_chain_result(case), case.steps)


def _run_with_answer(computation: Computation, arguments: dict[str, Any], answer: dict[str, Any]) -> tuple[Any, int]:
    """An uninterrupted run that answers the computation's midway question with `answer`."""
    state = computation.initial(arguments)
    steps = 0
    while not computation.done(state):
        question = computation.question(state)
        if question is not None:
            state = question.apply(state, answer)
            continue
        state = computation.step(state)
        steps += 1
    return computation.result(state), steps


@pytest.mark.parametrize("case", expected.PI_CASES + expected.PI_REFINE_CASES, ids=str)
def test_the_monte_carlo_reference_is_the_workers(case: expected.PiCase) -> None:
    worker = _run_with_answer(montecarlo.ESTIMATE_PI, case.arguments, {"refine": case.refine})
    assert worker == (expected.pi_result(case), case.steps)


@pytest.mark.parametrize("seed", [0, 1, 2**63, 12345])
def test_the_monte_carlo_reference_draws_the_workers_numbers_for_any_seed(seed: int) -> None:
    arguments = {"samples": 1_000, "seed": seed, "chunk": 300}
    assert run_uninterrupted(montecarlo.ESTIMATE_PI, arguments)[0] == expected.estimate_pi(1_000, seed)


def test_the_logins_by_version_are_the_demo_packs() -> None:
    assert {str(v): keys for v, keys in demo.LOGINS_BY_VERSION.items()} == expected.LOGINS_BY_VERSION


@pytest.mark.slow  # imports the suite in a new interpreter
def test_the_suite_imports_only_the_client_and_the_locust_stack() -> None:
    """What the loadtest image holds: `mrtr_protocol` (with the MCP SDK it needs), `mrtr_client` and `loadtest/`;
    the worker, proxy and cluster are absent."""
    script = (
        "import runpy, sys\n"
        "for name in ('mrtr_worker', 'mrtr_lb', 'mrtr_ops', 'tests'):\n"
        "    sys.modules[name] = None\n"
        "module = runpy.run_path(sys.argv[1])\n"
        "print(sorted(k for k, v in module.items() if isinstance(v, type) and k.endswith('User')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "loadtest" / "locustfile.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    for name in ("ShortCallsUser", "ComputeUser", "LoginUser", "ElicitationUser", "SamplingRootsUser", "MixedUser"):
        assert name in done.stdout
