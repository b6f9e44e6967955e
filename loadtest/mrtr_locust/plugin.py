"""The Locust hooks: options, load caps, web UI, distributed aggregation, thresholds and the summary at quit.

`install()` registers everything on `locust.events` once per process (the
locustfile calls it on import, before Locust builds its argument parser).
"""

from __future__ import annotations

import json
import logging
import os
import time
from argparse import Namespace
from typing import Any, ClassVar

import gevent  # type: ignore[import-untyped]  # gevent ships no type information
from locust import events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.rpc import Message as _Message
from locust.runners import MasterRunner, Runner, WorkerRunner
from locust.web import WebUI

from mrtr_locust import expected, report, runtime, webui
from mrtr_locust.limits import DEFAULT_MAX_RUN_TIME, DEFAULT_MAX_USERS, P95_OPTIONS, env_var, flag
from mrtr_locust.runtime import STATS, STOP_FILE_ENV, SUMMARY_ENV

logger = logging.getLogger("mrtr_locust")

FINAL_REPORTS_WAIT = 30.0
"""Seconds a quitting master waits, at most, for every worker's last report (Locust itself waits 0.5 s)."""

_installed = False
hooks: Any = events
"""`locust.events` (its `EventHook.add_listener` is untyped)."""
Message: Any = _Message
"""`locust.rpc.Message` (untyped)."""


class _Run:
    """What this process knows about the current run."""

    environment: Environment | None = None
    started: float | None = None
    guard: Any = None
    """The greenlet that stops a web UI run after --mrtr-max-run-time."""
    text: str | None = None
    workers: ClassVar[set[str]] = set()
    """The workers that reported during the current run (a master's)."""


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    # The references take seconds of CPU on a busy machine. Computed here, on import of the locustfile,
    # they are ready before a worker connects to its master: a worker computing them once connected
    # sent no heartbeat for as long (a thread did not help), its master dropped it as missing and
    # stopped the run, which then ended with no request. Users never block on them either. The event
    # loop caches its clock: refreshed afterwards, or a `--run-time` timer set next would count those
    # seconds as already run (a 6 s run ended after 1 s).
    expected.precompute()
    gevent.get_hub().loop.update_now()
    hooks.init_command_line_parser.add_listener(add_options)
    hooks.init.add_listener(on_init)
    hooks.test_start.add_listener(on_test_start)
    hooks.test_stop.add_listener(on_test_stop)
    hooks.reset_stats.add_listener(STATS.reset)
    hooks.spawning_complete.add_listener(on_spawning_complete)
    hooks.quitting.add_listener(on_quitting)
    hooks.quit.add_listener(on_quit)


def add_options(parser: LocustArgumentParser, **_: Any) -> None:
    parser.add_argument(
        "--mrtr-pace",
        type=float,
        default=1.0,
        env_var=env_var("mrtr_pace"),
        help="MRTR: multiply every user's task rate (each class paces itself; default 1.0)",
    )
    parser.add_argument(
        "--mrtr-max-users",
        type=int,
        default=DEFAULT_MAX_USERS,
        env_var=env_var("mrtr_max_users"),
        help=f"MRTR: never run more users than this, however started (default {DEFAULT_MAX_USERS}; 0: no cap)",
    )
    parser.add_argument(
        "--mrtr-max-run-time",
        type=int,
        default=DEFAULT_MAX_RUN_TIME,
        env_var=env_var("mrtr_max_run_time"),
        help=f"MRTR: seconds a run lasts when no --run-time is given (default {DEFAULT_MAX_RUN_TIME}; 0: no cap)",
    )
    for dest, (default, what) in P95_OPTIONS.items():
        parser.add_argument(
            flag(dest),
            type=int,
            default=default,
            env_var=env_var(dest),
            help=f"MRTR: p95 latency bound in ms for {what} (default {default})",
        )


def _option(environment: Environment, name: str, default: Any) -> Any:
    options: Namespace | None = environment.parsed_options
    return getattr(options, name, default) if options is not None else default


def on_init(environment: Environment, runner: Runner | None, web_ui: WebUI | None, **_: Any) -> None:
    # httpx logs every request at INFO: thousands of lines a minute that drown Locust's own output.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    _Run.environment = environment
    if runner is None:
        return
    if not isinstance(runner, WorkerRunner):
        _bound_users(environment, runner)
        _bound_run_time(environment)
        _stop_on_file(environment, runner, web_ui)
    if isinstance(runner, MasterRunner):
        _await_final_reports(runner)
    if isinstance(runner, WorkerRunner):
        hooks.report_to_master.add_listener(on_report_to_master)
    if isinstance(runner, MasterRunner):
        hooks.worker_report.add_listener(on_worker_report)
    if web_ui is not None:
        webui.install(environment, web_ui, lambda: current_summary(environment))


def _bound_users(environment: Environment, runner: Runner) -> None:
    """Clamp every start (command line, web UI, keyboard) to --mrtr-max-users."""
    start = runner.start

    def bounded_start(user_count: int, spawn_rate: float, *args: Any, **kwargs: Any) -> None:
        cap = int(_option(environment, "mrtr_max_users", DEFAULT_MAX_USERS))
        if cap and user_count > cap:
            logger.warning("%d users asked for; --mrtr-max-users caps the run at %d", user_count, cap)
            user_count = cap
        start(user_count, spawn_rate, *args, **kwargs)

    runner.start = bounded_start  # type: ignore[method-assign]


def _bound_run_time(environment: Environment) -> None:
    options = environment.parsed_options
    cap = int(_option(environment, "mrtr_max_run_time", DEFAULT_MAX_RUN_TIME))
    if options is None or not cap or options.run_time:
        return
    if getattr(options, "headless", False) or getattr(options, "autostart", False):
        options.run_time = cap
        logger.info("no --run-time given: this run stops after %d s (--mrtr-max-run-time)", cap)


def _stop_on_file(environment: Environment, runner: Runner, web_ui: WebUI | None) -> None:
    """`$MRTR_LOCUST_STOP_FILE`: a headless or `--autostart` run also ends once this file exists, exactly as at
    the end of its run time (users finish within --stop-timeout, then the summary; an `--autostart` run then
    waits `--autoquit`): a driver whose scenario takes longer on a busy machine keeps the load going until it
    is done, and `--run-time` still bounds it."""
    path = os.environ.get(STOP_FILE_ENV)
    headless = bool(_option(environment, "headless", False))
    if not path or not (headless or _option(environment, "autostart", False)):
        return

    def watch() -> None:
        while not os.path.exists(path):
            gevent.sleep(0.2)
        logger.info("%s exists: stopping the run", path)
        if headless:
            runner.quit()
            return
        runner.stop()  # what Locust does at the end of an --autostart run's --run-time
        autoquit = int(_option(environment, "autoquit", -1))
        if autoquit == -1:
            return
        gevent.sleep(autoquit)
        runner.quit()
        if web_ui is not None:
            stop_ui: Any = web_ui.stop  # untyped in Locust
            stop_ui()

    gevent.spawn(watch)


def _await_final_reports(runner: MasterRunner) -> None:
    """A quitting master waits until every worker has said it quit, so it has every worker's last report.

    Locust 2.47's master sends `quit` to its workers, then waits half a second for their final reports
    before it stops listening; a worker on a busy machine answers later, and the master (Locust's own
    figures and the suite's) then misses that worker's last interval. A worker sends its final report,
    then `quit` (in that order, on one connection), so once every worker's `quit` has arrived, every
    report has. This is Locust's `MasterRunner.quit` with that wait instead of the half second, bounded by
    `FINAL_REPORTS_WAIT` (a worker that vanished never answers).
    """

    def quit_after_final_reports() -> None:
        runner.stop(send_stop_to_client=False)
        for client in runner.clients.all:
            runner.server.send_to_client(Message("quit", None, client.id))
        waiting = gevent.Timeout(FINAL_REPORTS_WAIT)
        waiting.start()
        try:
            while runner.clients.all:
                gevent.sleep(0.05)
        except gevent.Timeout as timeout:
            if timeout is not waiting:
                raise
            logger.warning("%d worker(s) did not say goodbye: their last report is missing", len(runner.clients.all))
        finally:
            waiting.close()
        runner.greenlet.kill(block=True)

    runner.quit = quit_after_final_reports  # type: ignore[method-assign]


def on_test_start(environment: Environment, **_: Any) -> None:
    STATS.reset()
    _Run.started = time.time()
    _Run.workers = set()
    runner = environment.runner
    if runner is None or isinstance(runner, WorkerRunner) or _option(environment, "headless", False):
        return
    cap = int(_option(environment, "mrtr_max_run_time", DEFAULT_MAX_RUN_TIME))
    if cap and not _option(environment, "autostart", False):
        # Started from the web UI: whatever its form said, stop by ourselves after the cap.
        if _Run.guard is not None:
            _Run.guard.kill(block=False)

        def stop() -> None:
            logger.warning("stopping the run after %d s (--mrtr-max-run-time)", cap)
            runner.stop()

        _Run.guard = gevent.spawn_later(cap, stop)


def on_spawning_complete(user_count: int, **_: Any) -> None:
    environment = _Run.environment
    if environment is not None and environment.reset_stats:
        STATS.reset()  # --reset-stats: like Locust's own figures, count from the end of the ramp-up


def on_test_stop(environment: Environment, **_: Any) -> None:
    if _Run.guard is not None and _Run.guard is not gevent.getcurrent():
        _Run.guard.kill(block=False)
    _Run.guard = None


def on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
    data["mrtr"] = STATS.take()


def on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    if isinstance(data.get("mrtr"), dict):
        _Run.workers.add(client_id)
        STATS.merge_wire(data["mrtr"])


def p95_bounds(environment: Environment) -> dict[str, float]:
    classes = {**(environment.available_user_classes or {}), **{c.__name__: c for c in environment.user_classes}}
    bounds = {}
    for name, user_class in classes.items():
        option = getattr(user_class, "p95_option", None)
        if option in P95_OPTIONS:
            bounds[name] = float(_option(environment, option, P95_OPTIONS[option][0]))
    return bounds


def current_summary(environment: Environment) -> dict[str, Any]:
    runner = environment.runner
    found = report.verdicts(STATS, p95_bounds(environment))
    run = {
        "host": environment.host,
        "user_classes": sorted(c.__name__ for c in environment.user_classes),
        "distributed": isinstance(runner, MasterRunner),
        "workers": len(_Run.workers) if isinstance(runner, MasterRunner) else 0,
        "started": _Run.started,
        "ended": time.time(),
        "pace": _option(environment, "mrtr_pace", 1.0),
    }
    return report.summary(STATS, found, run)


def on_quitting(environment: Environment, **_: Any) -> None:
    runtime.EVENTS.close()
    if isinstance(environment.runner, WorkerRunner):
        _flush_to_master(environment.runner)
    if environment.runner is None or isinstance(environment.runner, WorkerRunner):
        return
    doc = current_summary(environment)
    path = os.environ.get(SUMMARY_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2)
            out.write("\n")
    if not doc["thresholds"]["passed"]:
        environment.process_exit_code = 1
    _Run.text = report.text(doc)


def _flush_to_master(runner: WorkerRunner) -> None:
    """Make sure the worker's last report reaches the master before the process exits.

    A Locust 2.47 worker sends its final report (the samples since the last
    three-second report) just before it exits; under load the process can end
    before ZeroMQ's I/O thread has sent it, and then the master (Locust's own
    statistics included) never counts that last interval; we saw it happen. Closing the socket
    with a linger and terminating its context waits (at most two seconds)
    until queued messages are out. This runs last among the quitting
    listeners, after Locust's own farewell message.
    """
    socket: Any = runner.client.socket
    try:
        socket.close(linger=2000)
        socket.context.term()
    except Exception:
        logger.debug("could not flush the last report to the master", exc_info=True)


def on_quit(exit_code: int, **_: Any) -> None:
    if _Run.text is not None:
        print(_Run.text, flush=True)
