"""Reading `strace -c`'s table (`benchmarks._syscalls`): the counts per call, per request, grouped."""

from __future__ import annotations

import pytest

from benchmarks._syscalls import GROUPS, Syscalls, parse

TABLE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 90.59    1.376903       18358        75         5 futex
  5.89    0.089467          11      7646           write
  2.21    0.033625           4      7678           read
  0.92    0.013974           9      1423           epoll_pwait
  0.07    0.001052          38        27        27 connect
------ ----------- ----------- --------- --------- ----------------
100.00    1.519892          85     16849       32 total
"""


def test_the_calls_column_is_read_per_system_call_with_or_without_errors() -> None:
    assert parse(TABLE) == {"futex": 75, "write": 7646, "read": 7678, "epoll_pwait": 1423, "connect": 27}


def test_per_request_leaves_futex_waits_out_and_groups_names_that_do_one_job() -> None:
    counted = Syscalls(requests=1000, calls=parse(TABLE))
    assert counted.per_request() == pytest.approx((7646 + 7678 + 1423 + 27) / 1000)
    assert counted.per_request(GROUPS["write"]) == pytest.approx(7.646)
    assert counted.per_request(GROUPS["poll"]) == pytest.approx(1.423)
    assert counted.summary() == "16.77 (write 7.65, read 7.68, poll 1.42)"
    haproxy = Syscalls(requests=2, calls={"sendto": 4, "recvfrom": 4, "epoll_wait": 1, "clock_gettime": 3})
    assert haproxy.summary() == "6.00 (write 2.00, read 2.00, poll 0.50)"


def test_no_requests_no_ratio() -> None:
    assert Syscalls(requests=0, calls={"write": 3}).per_request() == 0.0
