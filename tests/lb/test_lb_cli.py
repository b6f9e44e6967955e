"""``python -m mrtr_lb`` as a real process: flags over env, clean stop, one-line config errors."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys

import aiohttp
import pytest

from tests.lb.standin import MakeBackend, jsonrpc_body, wait_until

pytestmark = pytest.mark.slow  # starts the proxy as a process

WAIT = 20.0  # hang guard only


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without its MRTR_LB_ settings; the admin listener on a free port unless ``extra`` says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MRTR_LB_")}
    env.update({"MRTR_LB_ADMIN_PORT": "0", **extra})
    return env


async def test_cli_serves_and_stops_on_sigterm(make_backend: MakeBackend, client: aiohttp.ClientSession) -> None:
    """As a process, the only way it runs on uvloop."""
    backend = await make_backend("w")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mrtr_lb",
        "--port",
        "0",
        "--backends",
        backend.url,
        env=clean_env(MRTR_LB_HOST="127.0.0.1", MRTR_LB_PORT="1", MRTR_LB_BACKENDS="http://127.0.0.1:1"),
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), WAIT)).decode()
            assert line, "process ended before listening"
            if match := re.search(r"listening on (http://127\.0\.0\.1:\d+) \(engine=lean", line):
                url = match.group(1)
        for _ in range(3):  # the second and third reuse the pooled upstream connection
            async with client.post(f"{url}/mcp", data=jsonrpc_body()) as resp:
                assert resp.status == 200
                assert resp.headers["X-Worker-Id"] == "w"
                assert (await resp.json())["result"]["worker"] == "w"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), WAIT) == 0
        rest = (await proc.stderr.read()).decode()
        assert "Traceback" not in rest
        access = re.compile(
            r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO mrtr_lb\.access: POST /mcp mcp_method=\S+ "
            r"mcp_name=\S+ backend=http://\S+ status=200 duration_ms=[\d.]+ retried=no attempts=1 result=ok worker=w$",
            re.MULTILINE,
        )
        assert len(access.findall(rest)) == 3, rest  # one line per request, in the root formatter's shape
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        ([], {}, "MRTR_LB_BACKENDS, MRTR_LB_BACKENDS_FILE or MRTR_LB_BACKEND_DNS"),
        (["--backends", "127.0.0.1:9001", "--port", "8090", "--admin-port", "8090"], {}, "MRTR_LB_ADMIN_PORT"),
        ([], {"MRTR_LB_BACKENDS": "ftp://x:1"}, "MRTR_LB_BACKENDS"),
        (["--backends", "127.0.0.1:9001"], {"MRTR_LB_PORT": "eighty"}, "MRTR_LB_PORT"),
        (["--backend-dns", "worker"], {}, "MRTR_LB_BACKEND_DNS"),
        (["--backends", "127.0.0.1:9001"], {"MRTR_LB_ENGINE": "nginx"}, "MRTR_LB_ENGINE"),
        (["--backends", "127.0.0.1:9001"], {"MRTR_LB_ENGINE": "aiohttp"}, "the aiohttp engine was retired"),
        (["--backends", "127.0.0.1:9001"], {"MRTR_LB_HEALTH_CHECK": "icmp"}, "MRTR_LB_HEALTH_CHECK"),
        (["--port"], {}, "bad arguments"),
        (["--nope"], {}, "bad arguments"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(args: list[str], env: dict[str, str], needle: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mrtr_lb", *args],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mrtr-lb: ")
    assert needle in lines[0]
    assert result.stdout == ""


async def _refused(url: str) -> bool:
    """The listener is closed (the proxy began its graceful stop).

    A connect that raced the close is reset rather than refused (it sat in the closed listener's backlog).
    """
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        _, writer = await asyncio.open_connection(host, int(port))
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    writer.close()
    return False


async def test_lean_cli_writes_every_access_line_at_sigterm(
    make_backend: MakeBackend, client: aiohttp.ClientSession
) -> None:
    """The lean CLI gathers access-log lines in memory and writes them on a timer (here too slow to fire):
    at SIGTERM every line is written, also that of a request that ends during the graceful stop."""
    backend = await make_backend("w")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mrtr_lb",
        "--port",
        "0",
        "--backends",
        backend.url,
        env=clean_env(MRTR_LB_ENGINE="lean", MRTR_LB_SHUTDOWN_TIMEOUT="20", MRTR_LB_LOG_FLUSH_INTERVAL="600"),
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    stderr = proc.stderr

    async def line_with(needle: str) -> str:
        while True:
            line = (await asyncio.wait_for(stderr.readline(), WAIT)).decode()
            assert line, f"process ended before writing {needle!r}"
            if needle in line:
                return line

    try:
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", await line_with("listening on"))
        assert match is not None
        url = match.group(1)

        async def call(name: str, **headers: str) -> None:
            async with client.post(f"{url}/mcp", data=jsonrpc_body(), headers={"Mcp-Name": name, **headers}) as resp:
                assert resp.status == 200

        names = [f"t{n}" for n in range(40)]
        for name in names:
            await call(name)
        held = asyncio.ensure_future(call("held", **{"X-Test-Mode": "hold"}))
        await wait_until(lambda: _async(backend.holding == 1), what="the held request at the backend")
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: _refused(url), what="the proxy to stop accepting")
        backend.release.set()  # it ends during the graceful stop: its line is written just before exit
        await asyncio.wait_for(held, WAIT)
        assert await asyncio.wait_for(proc.wait(), WAIT) == 0
        rest = (await stderr.read()).decode()
        access = re.compile(
            r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO mrtr_lb\.access: POST /mcp mcp_method=- mcp_name=(\S+) "
            rf"backend={re.escape(backend.url)} status=200 duration_ms=\d+\.\d "
            r"retried=no attempts=1 result=ok worker=w$",
            re.MULTILINE,
        )
        assert access.findall(rest) == [*names, "held"], rest  # every line, in the order the requests ended
    finally:
        backend.release.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _async(value: bool) -> bool:
    return value
