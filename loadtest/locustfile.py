"""The MRTR Locust suite: every answer checked, MRTR hops counted, thresholds enforced (see loadtest/README.md).

    locust -f loadtest/locustfile.py --host http://127.0.0.1:8080 --headless -u 10 -r 2 -t 2m
    locust -f loadtest/locustfile.py --host http://127.0.0.1:8080 ComputeUser ElicitationUser

User classes (name them on the command line to pick; default: all, weighted):
ShortCallsUser, ComputeUser, LoginUser, ElicitationUser, SamplingRootsUser, MixedUser, TaskUser.
"""

from __future__ import annotations

from mrtr_locust import plugin
from mrtr_locust.users import (
    ComputeUser,
    ElicitationUser,
    LoginUser,
    MixedUser,
    SamplingRootsUser,
    ShortCallsUser,
    TaskUser,
)

plugin.install()

__all__ = [
    "ComputeUser",
    "ElicitationUser",
    "LoginUser",
    "MixedUser",
    "SamplingRootsUser",
    "ShortCallsUser",
    "TaskUser",
]
