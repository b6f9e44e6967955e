"""How many examples each property tries: a bound per property in CI, many more in the long profile."""

from __future__ import annotations

import os

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
"""The hypothesis profile this run uses (registered in the fuzz conftest)."""

_SCALE = {"ci": 1, "long": 20}


def budget(ci_examples: int) -> int:
    """The example budget of one property: `ci_examples` in CI, twenty times that in the long profile."""
    return ci_examples * _SCALE.get(PROFILE, 1)
