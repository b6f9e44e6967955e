"""The MRTR Locust suite: every answer checked, MRTR hops counted, thresholds enforced (see loadtest/README.md).

    locust -f loadtest/locustfile.py --host http://127.0.0.1:8080 --headless -u 10 -r 2 -t 2m
    locust -f loadtest/locustfile.py --host http://127.0.0.1:8080 ComputeUser ElicitationUser

User classes (name them on the command line to pick; default: all, weighted):
ShortCallsUser, ComputeUser, LoginUser, ElicitationUser, SamplingRootsUser, MixedUser.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The suite's package is `loadtest.mrtr_locust`: make the directory above this file importable
# (the repository root locally, /app in the loadtest image) whatever the working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest.mrtr_locust import plugin
from loadtest.mrtr_locust.users import (
    ComputeUser,
    ElicitationUser,
    LoginUser,
    MixedUser,
    SamplingRootsUser,
    ShortCallsUser,
)

plugin.install()

__all__ = ["ComputeUser", "ElicitationUser", "LoginUser", "MixedUser", "SamplingRootsUser", "ShortCallsUser"]
