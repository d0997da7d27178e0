"""One kept-alive HTTP/1.1 connection on plain sockets: the model client's request
path when no proxy is in the way (:mod:`.transport` decides).

Why not ``httpx2`` here too: a chat call is one small POST on a connection kept
alive, and ``httpx2``'s per-request machinery (its request and URL models and the
``httpcore2`` pool, over the same ``h11``) cost about 0.55 ms of CPU a call, about
three times what this connection costs for the same POST
(``benchmarks/bench_client_cpu.py``). With many chains in one process (``evomemory
run --chains``) every one of those milliseconds is a turn of the one interpreter
lock, so the chains queued on it.
Nor ``http.client``, which built a buffered file over the socket for each reply and
parsed its headers through the ``email`` package (7 % of the CPU of a 64-chain grid).

The reply is read by ``h11`` (the sans-IO HTTP/1.1 parser under ``httpcore``):
its framing (Content-Length, chunked, until the server closes; none for 1xx, 204
and 304), its header rules and its keep-alive state (``Connection: close`` and any
HTTP/1.0 reply close the connection) are the library's, fed here from the socket,
usually in one ``recv``. It costs 0.07-0.09 ms of CPU a call more than the reader
written here by hand before it did (docs/performance.md). The request's bytes are
built here, head and body in one ``send``: ``h11``'s serialization (its header
validation) cost about 0.04 ms more, and ``h11`` is told only what reading the
reply depends on (a POST to this target is complete, :meth:`DirectConnection._told`).

Once connected the socket is in blocking mode, so that a send or a read is one
system call rather than a ``poll`` and then the call (what CPython does for a
socket with a timeout): with many chains in one process each system call that
waits hands the interpreter lock to another chain's thread. Nothing is lost by
dropping the per-operation timeout: the attempt's deadline (:mod:`.deadline`,
``timeout_s`` for the whole attempt) passes no later than any one operation's
would, and its abort shuts the socket down, which ends a blocked send or read at once.

What the caller relies on, kept here: the reply is read at most ``limit`` bytes
far (:class:`ReplyTooLarge`), each chunk is reported to the :class:`~.deadline.Attempt`
(which stops an attempt past its deadline), and :meth:`DirectConnection.abort`
shuts the socket down from any thread. Every failure on the way is a
:class:`TransportError` whose message starts with the name of what went wrong
(``ConnectionRefusedError: [Errno 111] ...``, ``RemoteDisconnected: ...``,
``RemoteProtocolError: ...`` with ``h11``'s reason and where it was reading), or
:class:`NetworkTimeout` for a connect over ``timeout_s``.
"""

from __future__ import annotations

import select
import socket
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import h11

from .deadline import Attempt

if TYPE_CHECKING:
    import ssl

#: The most read at once from the socket while the reply comes in.
READ_CHUNK = 65536

#: A reply's head (status line and headers, interim replies' included) longer than
#: this is refused: a model server's is a few hundred bytes (``http.client``
#: refused a line over 64 KiB). ``h11``'s ``max_incomplete_event_size``.
MAX_HEAD_BYTES = 65536

#: More header lines than this are refused (as ``http.client`` did).
MAX_HEADERS = 100

_END = h11.EndOfMessage()


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
    names what was raised (``ConnectionRefusedError: [Errno 111] ...``) or what was
    wrong with the reply (``RemoteDisconnected: ...``, ``RemoteProtocolError: ...``)."""


class CertificateRefused(TransportError):
    """The server's TLS certificate was not accepted (not trusted, or not for this
    host name): every attempt would meet it again."""


def refused_certificate(error: BaseException) -> bool:
    """Whether ``error``, or what it was raised from, is a failed certificate check."""
    ssl = sys.modules.get("ssl")  # never imported for it: no TLS, no certificate
    seen: BaseException | None = error
    for _ in range(8):  # the chain an HTTP library wraps it in
        if seen is None:
            return False
        if ssl is not None and isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class NetworkTimeout(TransportError):
    """One network operation took over ``timeout_s``: the connect (a direct
    connection's sends and reads are bounded by the attempt's deadline alone), or
    through a proxy also one write or read."""


class BadEndpoint(Exception):
    """The endpoint is no http(s) URL a request can go to."""


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
            self._port = parts.port or (443 if self._https else 80)
        except ValueError as error:
            self._problem, self._port = str(error), 0
        if parts.scheme.lower() not in ("http", "https") or not self._host:
            self._problem = f"no http(s) URL with a host: {endpoint!r}"
        elif not self._prefix.isascii() or any(ord(character) <= 32 or ord(character) == 127 for character in self._prefix):
            self._problem = f"the path of {endpoint!r} holds a space, a control or a non-ASCII character"
        self._host_header = _host_header(self._host, self._port, self._https) if self._problem is None else ""
        #: the connected socket, kept alive between calls; shut down by :meth:`abort`
        self._socket: socket.socket | None = None
        self._poller: select.poll | None = None
        #: ``h11``'s state of the connection: one per socket
        self._parser: h11.Connection | None = None
        self._requests: dict[str, h11.Request] = {}
        self.is_closed = False
        #: the socket of the request under way was opened for it (not kept alive from before)
        self._fresh = False
        #: a byte of the reply under way has come
        self._replied = False

    def post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        """``POST`` ``content`` to the endpoint's ``path``; the whole reply, at most ``limit`` bytes of body.

        A kept-alive connection the server closed just as the request went out (its
        idle timeout, uvicorn's five seconds, passing while the request was on its
        way) fails before a byte of the reply comes: the request is sent once more,
        on a new connection, within the same attempt and deadline, as a browser
        does. A new connection that fails so is the server's failure (an attempt)."""
        if self._problem is not None:
            raise BadEndpoint(self._problem)
        attempt.on_cancel(self.abort)
        try:
            return self._exchange(path, content, headers, attempt, limit)
        except _Stale:
            return self._exchange(path, content, headers, attempt, limit)

    def _exchange(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        """One request and its reply on the kept-alive connection (or a new one)."""
        reused = self._replied = False
        try:
            sock, parser = self._open()
            reused = not self._fresh
            # A deadline that passed while connecting found no socket to shut down (and
            # the connected one is blocking, with no timeout of its own): stop here.
            attempt.check()
            message = self._request(path, content, headers)
            parser.send(self._told(path))
            parser.send(_END)
            sock.sendall(message)
            attempt.sent()
            return self._receive(sock, parser, attempt, limit)
        except TimeoutError as error:
            self._drop()
            raise NetworkTimeout(f"{type(error).__name__}: {error}") from None
        except OSError as error:  # ssl.SSLError included
            self._drop()
            if reused and not self._replied and isinstance(error, _HUNG_UP) and not attempt.cancelled:
                raise _Stale from None
            kind = CertificateRefused if refused_certificate(error) else TransportError
            raise kind(f"{type(error).__name__}: {error}") from None
        except _NoReply as error:
            self._drop()
            if reused and not attempt.cancelled:
                raise _Stale from None
            raise TransportError(str(error)) from None
        except BaseException:  # malformed, over the limit, cancelled, interrupted: the rest is not read
            self._drop()
            raise

    def _request(self, path: str, content: bytes, headers: Mapping[str, str]) -> bytes:
        """The request's head and body, as one message (one ``send``); the headers
        ``http.client`` sent (Host, Accept-Encoding, Content-Length) first."""
        lines = [
            f"POST {self._prefix}{path} HTTP/1.1", self._host_header, "Accept-Encoding: identity",
            f"Content-Length: {len(content)}",
        ]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:  # the key is checked when read (endpoint.py): never ours
                raise ValueError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1") + content

    def _told(self, path: str) -> h11.Request:
        """The request as ``h11`` is told of it: a POST to this target, whose reply
        is framed as a POST's and may keep the connection (no ``Connection: close``,
        no upgrade). Its headers and body are :meth:`_request`'s, which ``h11`` does
        not read; one event per path, built once (``h11`` validates each it is given)."""
        told = self._requests.get(path)
        if told is None:
            host = self._host_header.removeprefix("Host: ")
            told = h11.Request(method="POST", target=f"{self._prefix}{path}", headers=[("Host", host)])
            self._requests[path] = told
        return told

    def _open(self) -> tuple[socket.socket, h11.Connection]:
        """The kept-alive socket, or a new one where the server closed it (or an
        abort shut it down) while it was idle."""
        if self._socket is not None and self._poller is not None and self._poller.poll(0):
            # An idle kept-alive socket with something to read has been closed by the
            # server (or shut down by an abort): it cannot carry the next request.
            self._drop()
        self._fresh = self._socket is None or self._parser is None
        if self._fresh:
            self._connect()
        assert self._socket is not None and self._parser is not None  # for mypy: _connect set them
        return self._socket, self._parser

    def _connect(self) -> None:
        """A new connection, made within ``timeout_s`` (TLS handshake included),
        then blocking: the attempt's deadline bounds it (module docstring)."""
        sock = socket.create_connection((self._host, self._port), self._timeout_s)
        try:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client: no Nagle delay
            except OSError:
                pass  # not a TCP socket after all
            if self._https:
                context = self._context
                if context is None:
                    import ssl

                    context = ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=self._host)
            _blocking(sock)
        except BaseException:
            sock.close()
            raise
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        self._socket, self._poller = sock, poller
        self._parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)

    def _receive(self, sock: socket.socket, parser: h11.Connection, attempt: Attempt, limit: int) -> Reply:
        """The whole reply, as ``h11`` reads it from what the socket gives (usually
        one ``recv``); interim 1xx replies skipped, 101 refused (by ``h11``: no
        upgrade was asked for)."""
        received = 0  # bytes read before the reply's head was whole (interim replies' included)
        event: h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED] = h11.NEED_DATA
        try:
            while type(event) is not h11.Response:
                if event is h11.NEED_DATA:
                    data = sock.recv(READ_CHUNK)
                    if not data and not parser.trailing_data[0]:  # no head begun: the server hung up
                        if not received:
                            raise _NoReply("RemoteDisconnected: Remote end closed connection without response")
                        raise TransportError("RemoteDisconnected: Remote end closed connection after an interim reply")
                    received += len(data)
                    self._replied = True
                    parser.receive_data(data)  # b"": the head was cut short, which h11 names
                event = parser.next_event()
        except h11.RemoteProtocolError as error:
            too_long = error.error_status_hint == 431  # h11's bound on a head still incomplete
            raise (_head_too_long() if too_long else _unreadable(error, "the reply's head")) from None
        assert isinstance(event, h11.Response)  # the loop's end, for mypy
        if received > MAX_HEAD_BYTES and received - len(parser.trailing_data[0]) > MAX_HEAD_BYTES:
            raise _head_too_long()  # h11 bounds a head still incomplete; this one came whole at once
        if len(event.headers) > MAX_HEADERS:
            raise TransportError(f"RemoteProtocolError: more than {MAX_HEADERS} headers in the reply's head")
        status = event.status_code
        # raw_items() is one list built in C-speed comprehension; iterating ``event.headers`` goes
        # through the Sequence ABC's __iter__ and __getitem__ per header. h11's own names are
        # these names lower-cased as bytes, as here.
        headers = {name.lower().decode("latin-1"): value.decode("latin-1") for name, value in event.headers.raw_items()}
        try:
            body = read_body(_body(sock, parser), status, headers, attempt, limit)
        except h11.RemoteProtocolError as error:
            raise _unreadable(error, f"the body of a {status} reply, {attempt.received:,} bytes read") from None
        # Kept for the next request only where h11 says both sides are done and nothing
        # else came: Connection: close, an HTTP/1.0 reply, a body that ends where the
        # connection does, or bytes past the reply (answering no request of ours) close it.
        if parser.our_state is h11.DONE and parser.their_state is h11.DONE and parser.trailing_data == (b"", False):
            parser.start_next_cycle()
        else:
            self._drop()
        return Reply(status, headers, body)

    def _drop(self) -> None:
        """Close the connection: a request that failed half-way leaves it unusable."""
        sock, self._socket, self._poller, self._parser = self._socket, None, None, None
        if sock is not None:
            sock.close()

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


class _NoReply(TransportError):
    """The server closed the connection without a byte of reply."""


class _Stale(Exception):
    """A kept-alive connection the server had closed: the request goes out again on a new one."""


#: How a server's closing of a connection meets a request sent on it.
_HUNG_UP = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def _host_header(host: str, port: int, https: bool) -> str:
    """The Host header ``http.client`` sent: IPv6 in brackets, the port unless the scheme's."""
    try:
        name = host.encode("ascii").decode("ascii")
    except UnicodeEncodeError:
        name = host.encode("idna").decode("ascii")
    if ":" in name:
        name = f"[{name}]"
    return f"Host: {name}" if port == (443 if https else 80) else f"Host: {name}:{port}"


def _body(sock: socket.socket, parser: h11.Connection) -> Iterator[bytes]:
    """The reply's body as ``h11`` frames it, read from the socket as it needs more."""
    while True:
        event = parser.next_event()
        if type(event) is h11.Data:
            yield event.data
        elif event is h11.NEED_DATA:
            # b"" (the server closed) ends a body framed by the connection; any other is cut short
            parser.receive_data(sock.recv(READ_CHUNK))
        else:  # EndOfMessage
            return


def _unreadable(error: h11.RemoteProtocolError, where: str) -> TransportError:
    """A reply that breaks HTTP/1.1, as ``h11`` names it, and where it was reading."""
    return TransportError(f"RemoteProtocolError: {error}; reading {where}")


def _head_too_long() -> TransportError:
    return TransportError(f"RemoteProtocolError: the reply's head is over {MAX_HEAD_BYTES:,} bytes")


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
    return b"".join(parts)  # bytes (h11 hands out bytearrays); one bytes part is not copied


def _blocking(sock: socket.socket) -> None:
    """The connected socket in blocking mode: a send or read is one system call."""
    sock.settimeout(None)


__all__ = ["BadEndpoint", "CertificateRefused", "DirectConnection", "NetworkTimeout", "Reply", "ReplyTooLarge", "TransportError", "read_body", "refused_certificate"]
