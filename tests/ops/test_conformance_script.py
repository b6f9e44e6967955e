"""`scripts/conformance`'s membership test: a scenario the suite lists is never read as unknown.

Under `set -o pipefail`, `printf '%s\\n' "${list[@]}" | grep -qx -- NEEDLE` fails with SIGPIPE (141) when
grep finds the needle and exits before printf has written the rest: CI once recorded a listed tasks
scenario as "the suite does not know this scenario". The script now asks `is_one_of`, which has no pipe.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "conformance"


def _is_one_of(needle: str, items: int) -> int:
    """Exit status of the script's own `is_one_of`, run under the script's shell options."""
    program = (
        "set -euo pipefail\n"
        f"source <(sed -n '/^is_one_of()/,/^}}/p' {SCRIPT})\n"
        f'items=(); for i in $(seq 1 {items}); do items+=("x$i"); done\n'
        f'is_one_of "{needle}" "${{items[@]}}" && echo yes || echo no\n'
    )
    run = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60, check=True)
    return 0 if run.stdout.strip() == "yes" else 1


def test_a_needle_early_in_a_long_list_is_found() -> None:
    """The case the piped grep got wrong: found at once, with thousands of lines still to write."""
    assert _is_one_of("x1", 20_000) == 0
    assert _is_one_of("x20000", 20_000) == 0


def test_a_needle_not_in_the_list_is_not_found() -> None:
    assert _is_one_of("x20001", 20_000) == 1
    assert _is_one_of("x", 3) == 1


def test_the_script_asks_no_piped_grep_whether_a_name_is_listed() -> None:
    code = [line.split("#", 1)[0] for line in SCRIPT.read_text().splitlines()]
    assert [line for line in code if "| grep -q" in line] == []
