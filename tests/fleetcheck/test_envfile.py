"""`--env-file`: Docker's env-file form read as written, and every other line refused with its number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mrtr_fleet_check.envfile import read_env_file


def test_lines_are_taken_as_written(tmp_path: Path) -> None:
    path = tmp_path / "server.env"
    path.write_text('# the ring\nKEYS={"a": "b=c"}\n\n  # indented comment\nEMPTY=\nQUOTED="x y"\n')
    assert read_env_file(path) == {"KEYS": '{"a": "b=c"}', "EMPTY": "", "QUOTED": '"x y"'}


@pytest.mark.parametrize("line", ["NO_EQUALS", "1ST=x", "A B=x", "=x"])
def test_a_line_that_is_no_assignment_is_refused_with_its_number(tmp_path: Path, line: str) -> None:
    path = tmp_path / "server.env"
    path.write_text(f"GOOD=1\n{line}\n")
    with pytest.raises(ValueError, match=re.escape(f"server.env:2: expected NAME=value, not '{line}'")):
        read_env_file(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape("absent.env: cannot read the env file")):
        read_env_file(tmp_path / "absent.env")
