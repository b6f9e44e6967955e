"""Raw HTTP/1.1 against a listener: exact bytes out, every response read back, and what the process holds.

For the hostile-connection tests: a test writes the bytes it means (a broken head, a
pipelined pair, a body that stops), reads until the server closes, and splits what
came back into responses. The process side is read from /proc: its resident memory,
its open sockets, and how many bytes wait unread in its connections' receive queues
(so a test knows the server has read what was sent before it measures anything).
"""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

READ_SECONDS = 30.0
"""How long a read may wait for the server before the test fails (an upper bound, never a pause)."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = field(repr=False)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=READ_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (or resets) the connection."""
    sock.setblocking(True)
    sock.settimeout(READ_SECONDS)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def exchange(port: int, data: bytes) -> list[Response]:
    """Send `data` on a new connection and split everything the server answers, until it closes, into responses.

    The connection is not half-closed (a server may take that as the client gone): the last request
    says `Connection: close`, or is refused, and the server closes.
    """
    with connect(port) as sock:
        sock.sendall(data)
        return responses(read_until_closed(sock))


def send_until_answered(sock: socket.socket, chunks: Iterable[bytes]) -> tuple[list[Response], int]:
    """Write the chunks, stopping as soon as the server answers (or stops taking bytes); (answers, bytes sent)."""
    sent = 0
    sock.setblocking(False)
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            readable, writable, _ = select.select([sock], [sock], [], READ_SECONDS)
            if readable:
                return responses(read_until_closed(sock)), sent
            if not writable:
                raise AssertionError(f"the server neither answered nor read for {READ_SECONDS} s")
            try:
                count = sock.send(view)
            except (BrokenPipeError, ConnectionResetError):
                return responses(read_until_closed(sock)), sent
            sent += count
            view = view[count:]
    return responses(read_until_closed(sock)), sent


def responses(data: bytes) -> list[Response]:
    """Split a stream of HTTP/1.1 responses (bodies framed by Content-Length or chunked)."""
    found: list[Response] = []
    while data:
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep, f"an incomplete response head: {head[:200]!r}"
        status_line, *lines = head.decode("latin-1").split("\r\n")
        assert status_line.startswith("HTTP/1.1 "), status_line
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        if headers.get("transfer-encoding") == "chunked":
            body, data = _dechunk(data)
        else:
            length = int(headers.get("content-length", "0"))
            assert len(data) >= length, f"a body cut short: {len(data)} of {length} bytes"
            body, data = data[:length], data[length:]
        found.append(Response(int(status_line.split()[1]), headers, body))
    return found


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    body = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            _, _, rest = data.partition(b"\r\n")
            return body, rest
        body, data = body + data[:size], data[size + 2 :]


def request(method: str, path: str, port: int, *, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    """One well-formed request's bytes (Content-Length set when there is a body)."""
    fields = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    if body:
        fields["Content-Length"] = str(len(body))
    head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
    return f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body


# --- the process ---------------------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_sockets(pid: int) -> int:
    """Sockets the process holds open (its listener, its event loop's own pair, and its connections)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except FileNotFoundError:
            continue  # closed while listed
    return count


def server_side(port: int) -> list[int]:
    """Unread bytes in the receive queue of each established connection to `port` on 127.0.0.1 (/proc/net/tcp)."""
    queues = []
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            parts = line.split()
            local, state, queue = parts[1], parts[3], parts[4]
            if state == "01" and int(local.split(":")[1], 16) == port:
                queues.append(int(queue.split(":")[1], 16))
    return queues
