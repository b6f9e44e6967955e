"""The command's answers to bad input: each a clear message on stderr and exit status 2, before any load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mrtr_fleet_check.cli import main

SCENARIO = Path(__file__).parents[2] / "examples" / "servers" / "python-sdk" / "scenario.toml"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--v1", "python -m app", "--scenario", str(SCENARIO)], "has no {port}"),
        (["--v1", "app {port}", "--v2", "app", "--scenario", str(SCENARIO)], "'app' has no {port}"),
        (["--v1", "app {port}", "--scenario", "absent.toml"], "absent.toml: cannot read the scenario"),
        (["--v1", "app {port}", "--scenario", str(SCENARIO), "--instances", "1"], "--instances must be at least 2"),
        (["--v1", "app {port}", "--scenario", str(SCENARIO), "--mcp-path", "mcp"], "--mcp-path must start with /"),
        (["--v1", "app {port}", "--v2-image", "app:2", "--scenario", str(SCENARIO)], "--v2-image goes with --v1-image"),
        (["--v1", "app {port}", "--env-file", "x.env", "--scenario", str(SCENARIO)], "--env-file goes with --v1-image"),
        (["--v1-image", "app:1", "--v2", "app {port}", "--scenario", str(SCENARIO)], "--v2 goes with --v1, not"),
        (["--v1-image", "app:1", "--env-file", "absent.env", "--scenario", str(SCENARIO)], "cannot read the env file"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_a_server_that_exits_before_it_listens_is_named_with_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--v1", "sh -c 'echo no luck; exit 3' {port}", "--scenario", str(SCENARIO), "--work-dir", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "v1-0 exited with 3 before it listened" in err
    assert (tmp_path / "v1-0.log").read_text() == "no luck\n"


def test_a_command_and_an_image_together_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--v1", "app {port}", "--v1-image", "app:1", "--scenario", str(SCENARIO)])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_count_below_one_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--v1", "app {port}", "--scenario", str(SCENARIO), "--users", "0"])
    assert exited.value.code == 2
    assert "must be above 0" in capsys.readouterr().err


@pytest.mark.slow  # starts two SDK server processes
def test_a_tool_the_server_does_not_list_stops_the_check_before_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "typo.toml"
    scenario.write_text('name = "typo"\n[[call]]\ntool = "add_upp"\n')
    server = f"{sys.executable} -m uvicorn --app-dir examples/servers/python-sdk python_sdk_server:app --port {{port}}"
    args = ["--v1", server, "--instances", "2", "--scenario", str(scenario), "--work-dir", str(tmp_path / "work")]
    assert main(args) == 2
    assert "the server lists no tool add_upp (it lists: add_up)" in capsys.readouterr().err
    assert not (tmp_path / "work" / "v2-0.log").exists()  # no rolling update began
