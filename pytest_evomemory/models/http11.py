"""One kept-alive HTTP/1.1 connection on the standard library: the model client's
request path when no proxy is in the way (:mod:`.transport` decides).

Why not ``httpx2`` here too: a chat call is one small POST on a connection kept
alive, and ``httpx2``'s per-request machinery (its request and URL models, the
``httpcore2`` pool, ``h11``'s event state machine) cost about 0.55 ms of CPU a
call, four times what ``http.client`` costs for the same POST (0.15 ms, measured
against a stub answering at once: ``benchmarks/bench_client_cpu.py``). With many
chains in one process (``evomemory run --chains``) every one of those
milliseconds is a turn of the one interpreter lock, so the chains queued on it.

What the caller relies on, kept here: the reply is read at most ``limit`` bytes
far (:class:`ReplyTooLarge`), each chunk is reported to the :class:`~.deadline.Attempt`
(which stops an attempt past its deadline), and :meth:`DirectConnection.abort`
shuts the socket down from any thread, which ends a blocked write or read at once.
Every failure on the way is a :class:`TransportError` (or :class:`NetworkTimeout`
for a connect over ``timeout_s``), whichever library raised it.

Fewer system calls per call, because with many chains in one process each one
that waits hands the interpreter lock to another chain's thread (a futex wake and
wait each way): the request's head and body go out in one ``send`` (``http.client``
sends them in two), and once connected the socket is in blocking mode, so that a
send or a read is one system call rather than a ``poll`` and then the call (what
CPython does for a socket with a timeout). Nothing is lost by dropping the
per-operation timeout: the attempt's deadline (:mod:`.deadline`, ``timeout_s`` for
the whole attempt) passes no later than any one operation's would, and its abort
shuts the socket down, which ends a blocked send or read at once.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .deadline import Attempt

#: The most read at once from the socket while the reply comes in.
READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole reply: its status, its headers (names in lower case) and its body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class ReplyTooLarge(Exception):
    """The reply is longer than the caller reads (announced, or counted as it came)."""

    def __init__(self, status: int, announced: str) -> None:
        super().__init__(status)
        self.status = status
        #: ``"; it announced N"`` when the Content-Length said so up front, else ``""``
        self.announced = announced


class TransportError(Exception):
    """The request failed on its way: connecting, sending or reading. The message
    names what was raised (``ConnectionRefusedError: [Errno 111] ...``)."""


class NetworkTimeout(TransportError):
    """One network operation took over ``timeout_s``: the connect (a direct
    connection's sends and reads are bounded by the attempt's deadline alone), or
    through a proxy also one write or read."""


class BadEndpoint(Exception):
    """The endpoint is no http(s) URL a request can go to."""


class _OneSend:
    """A request's head and its ``bytes`` body in one ``send`` (``http.client``
    sends the body after the head, one more system call per request)."""

    def _send_output(self, message_body: object = None, *args: Any, **kwargs: Any) -> None:
        # http.client's private method (3.11-3.13 alike): anything this override does
        # not know (another body, chunked encoding, an argument a later Python adds,
        # no ``_buffer``) goes to http.client's own, which sends it as it always did.
        buffer = getattr(self, "_buffer", None)
        if isinstance(message_body, bytes) and not args and not any(kwargs.values()) and isinstance(buffer, list):
            buffer.extend((b"", b""))
            message = b"\r\n".join(buffer) + message_body
            del buffer[:]
            self.send(message)  # type: ignore[attr-defined]
            return
        super()._send_output(message_body, *args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_OneSend, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneSend, http.client.HTTPSConnection):
    pass


class DirectConnection:
    """The connection one thread sends an endpoint's requests on, straight to the
    server (no proxy), kept alive between calls and opened again when the server
    closed it.

    Used by one thread at a time (its owner, :attr:`thread`); :meth:`abort` may
    come from any thread (the deadline watchdog).
    """

    def __init__(self, endpoint: str, timeout_s: float, context: ssl.SSLContext | None) -> None:
        #: the thread it serves: once that thread has ended, the connection is closed
        self.thread = threading.current_thread()
        self._timeout_s = timeout_s
        self._context = context
        self._problem: str | None = None
        parts = urlsplit(endpoint)
        self._https = parts.scheme.lower() == "https"
        self._prefix = parts.path.rstrip("/")
        self._host = parts.hostname or ""
        try:
            self._port = parts.port
        except ValueError as error:
            self._problem, self._port = str(error), None
        if parts.scheme.lower() not in ("http", "https") or not self._host:
            self._problem = f"no http(s) URL with a host: {endpoint!r}"
        self._connection: http.client.HTTPConnection | None = None
        #: the socket of the request under way, shut down by :meth:`abort`
        self._socket: socket.socket | None = None
        self.is_closed = False

    def post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        """``POST`` ``content`` to the endpoint's ``path``; the whole reply, at most ``limit`` bytes of body."""
        if self._problem is not None:
            raise BadEndpoint(self._problem)
        attempt.on_cancel(self.abort)
        try:
            connection = self._open()
            # A deadline that passed while connecting found no socket to shut down (and
            # the connected one is blocking, with no timeout of its own): stop here.
            attempt.check()
            connection.request("POST", self._prefix + path, body=content, headers=headers)
            response = connection.getresponse()
            return _read(response, attempt, limit)
        except TimeoutError as error:
            self._drop()
            raise NetworkTimeout(f"{type(error).__name__}: {error}") from None
        except (OSError, http.client.HTTPException) as error:
            self._drop()
            raise TransportError(f"{type(error).__name__}: {error}") from None
        except BaseException:  # over the limit, cancelled, interrupted: the rest of the reply is not read
            self._drop()
            raise

    def _open(self) -> http.client.HTTPConnection:
        """The kept-alive connection, or a new one where the server closed it (or an
        abort shut it down) while it was idle."""
        connection = self._connection
        if connection is not None and connection.sock is not None and _closed_by_peer(connection.sock):
            connection.close()
        if connection is None:
            if self._https:
                connection = _HTTPSConnection(self._host, self._port, timeout=self._timeout_s, context=self._context)
            else:
                connection = _HTTPConnection(self._host, self._port, timeout=self._timeout_s)
            self._connection = connection
        if connection.sock is None:
            connection.connect()  # within timeout_s
            _blocking(connection)  # then the attempt's deadline bounds it (module docstring)
        self._socket = connection.sock
        return connection

    def _drop(self) -> None:
        """Close the connection: a request that failed half-way leaves it unusable."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def abort(self) -> None:
        """Shut the socket of the request under way down (from any thread)."""
        sock = self._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already

    def close(self) -> None:
        self._drop()
        self.is_closed = True


def _read(response: http.client.HTTPResponse, attempt: Attempt, limit: int) -> Reply:
    """The whole reply; the connection left ready for the next request."""
    headers = {name.lower(): value for name, value in response.getheaders()}
    body = read_body(iter(lambda: response.read1(READ_CHUNK), b""), response.status, headers, attempt, limit)
    if response.length:  # the connection ended before the announced length (``read1`` does not say so)
        raise http.client.IncompleteRead(body, response.length)
    response.close()  # read to its end: the connection carries the next request
    return Reply(response.status, headers, body)


def read_body(
    chunks: Iterable[bytes], status: int, headers: Mapping[str, str], attempt: Attempt, limit: int
) -> bytes:
    """A reply's body from its ``chunks``, at most ``limit`` bytes (a runaway server
    must not fill the process's memory), each chunk reported to ``attempt``.
    ``headers``' names are in lower case."""
    announced = headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise ReplyTooLarge(status, f"; it announced {int(announced):,}")
    parts: list[bytes] = []
    size = 0
    attempt.reading(0)
    for chunk in chunks:
        attempt.reading(len(chunk))
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(status, "")
        parts.append(chunk)
    attempt.check()  # an abort may end the body early: that is no reply
    return b"".join(parts)


def _blocking(connection: http.client.HTTPConnection) -> None:
    """The connected socket in blocking mode: a send or read is one system call."""
    connection.sock.settimeout(None)


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket with something to read has been closed by the
    server (or shut down by an abort): it cannot carry the next request."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


__all__ = ["BadEndpoint", "DirectConnection", "NetworkTimeout", "Reply", "ReplyTooLarge", "TransportError", "read_body"]
