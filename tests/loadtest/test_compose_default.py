"""The compose `loadtest` profile runs the full suite by default, whose web UI has the MRTR tabs (issue 21).

It ran the smoke file, whose UI has none of the tabs (checks, hops, rounds) that make the suite worth
opening; the full suite was one variable away. Offline: the compose files and the image, read as
compose and Docker read them. That this file's web UI shows the tabs is checked on a running Locust in
`test_web_host.py`, which starts the file named here.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support.compose_files import compose_project, default_locustfile, with_defaults
from tests.support.paths import ROOT

SUITE = ROOT / "loadtest" / "locustfile.py"


@pytest.mark.parametrize("service", ["locust-master", "locust-worker"])
def test_the_compose_profile_runs_the_full_suite_by_default(service: str) -> None:
    services = compose_project()["services"]
    assert services[service]["profiles"] == ["loadtest"]
    assert default_locustfile(services[service]) == SUITE


@pytest.mark.parametrize("service", ["locust-master", "locust-worker"])
def test_the_swarm_loadtest_stack_runs_the_full_suite_by_default(service: str) -> None:
    stack = yaml.safe_load((ROOT / "compose.swarm-loadtest.yaml").read_text())
    assert default_locustfile(stack["services"][service]) == SUITE


def test_the_image_runs_the_full_suite_and_holds_both_files() -> None:
    dockerfile = (ROOT / "loadtest" / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    assert yaml.safe_load(cmd) == ["locust", "-f", "/app/loadtest/locustfile.py"]
    assert "COPY loadtest/locustfile.py loadtest/smoke.py /app/loadtest/" in dockerfile


def test_the_full_suite_installs_the_mrtr_web_ui() -> None:
    """The file is the suite's: its hooks (`plugin.install`, which adds the MRTR tabs) run on import."""
    assert "plugin.install()" in SUITE.read_text()


def test_a_variable_still_picks_another_file() -> None:
    command = compose_project()["services"]["locust-master"]["command"]
    assert "/app/loadtest/${MRTR_LOCUSTFILE:-locustfile.py}" in command
    assert with_defaults("/app/loadtest/${MRTR_LOCUSTFILE:-locustfile.py}") == "/app/loadtest/locustfile.py"
