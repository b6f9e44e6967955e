"""`--env-file`: the environment given to every container of the server, in Docker's env-file form.

One `NAME=value` a line, taken as written (no quotes removed, no `$` expanded), blank lines and
lines starting with `#` skipped; anything else is refused with its line number.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_env_file(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the env file: {exc.strerror}") from None
    environment: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        if not equals or not NAME.fullmatch(name):
            raise ValueError(f"{path}:{number}: expected NAME=value, not {line!r}")
        environment[name] = value
    return environment
