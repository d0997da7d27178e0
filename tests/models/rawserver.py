"""A server on 127.0.0.1 written byte by byte, for the model client's transport tests:
each connection runs a handler that reads whole requests and answers whatever bytes
the test scripts (tests/models/test_transport.py, tests/models/test_http11.py)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable

#: Serves one connection: given the socket and its reader, answers requests until it returns.
Handler = Callable[[socket.socket, "Reader"], None]


class Reader:
    """Reads whole HTTP requests (head and Content-Length body) off a socket."""

    def __init__(self, connection: socket.socket) -> None:
        self.file = connection.makefile("rb")
        #: the last request's headers, names in lower case
        self.headers: dict[str, str] = {}

    def request(self) -> tuple[str, bytes] | None:
        line = self.file.readline()
        if not line:
            return None
        self.headers = {}
        while (header := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()
        return line.decode("latin-1").strip(), self.file.read(int(self.headers.get("content-length", "0")))


class RawServer:
    """A listener on 127.0.0.1 whose every connection runs ``handler`` on a thread."""

    def __init__(self, handler: Handler, context: ssl.SSLContext | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.request_lines: list[str] = []
        self._handler = handler
        self._context = context
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            if self._context is not None:
                connection = self._context.wrap_socket(connection, server_side=True)
            with connection:
                self._handler(connection, Reader(connection))
        except (OSError, ssl.SSLError):
            pass  # the client hung up or refused the certificate

    def close(self) -> None:
        self.listener.close()
