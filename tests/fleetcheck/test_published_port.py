"""Readiness behind a published port: Docker's port proxy accepts every connection, so a connect says nothing.

Real sockets on 127.0.0.1 stand for the three things the check can meet there: nothing at all, a
port proxy that closes at once (nothing listens in the container), and a server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mrtr_fleet_check.containers import answers
from mrtr_fleet_check.servers import LOOPBACK, free_port


@contextmanager
def listener(serve: Callable[[socket.socket], object]) -> Iterator[int]:
    """A port on 127.0.0.1 whose one connection `serve` handles; its port."""
    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen()
        done = threading.Event()

        def accept() -> None:
            connection, _ = server.accept()
            with connection:
                serve(connection)
                done.wait(5)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            thread.join(5)


def test_nothing_on_the_port_is_not_ready() -> None:
    assert not answers(free_port())


def test_a_port_proxy_that_closes_at_once_is_not_ready() -> None:
    with listener(lambda connection: connection.close()) as port:
        assert not answers(port)


def test_a_status_line_is_ready() -> None:
    def status_line(connection: socket.socket) -> None:
        connection.recv(1024)
        connection.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")

    with listener(status_line) as port:
        assert answers(port)


def test_a_server_slow_to_answer_but_holding_the_connection_is_ready() -> None:
    with listener(lambda connection: connection.recv(1024)) as port:
        assert answers(port)
