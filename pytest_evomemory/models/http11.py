"""One kept-alive HTTP/1.1 connection on plain sockets: the model client's request
path when no proxy is in the way (:mod:`.transport` decides).

Why not ``httpx2`` here too: a chat call is one small POST on a connection kept
alive, and ``httpx2``'s per-request machinery (its request and URL models, the
``httpcore2`` pool, ``h11``'s event state machine) cost about 0.55 ms of CPU a
call, four times what ``http.client`` costs for the same POST (0.15 ms, measured
against a stub answering at once: ``benchmarks/bench_client_cpu.py``). With many
chains in one process (``evomemory run --chains``) every one of those
milliseconds is a turn of the one interpreter lock, so the chains queued on it.

Why not ``http.client`` either (it carried the POST until issue 38): per reply it
builds a buffered file over the socket and parses the headers through the
``email`` package, which was 7 % of the CPU of a whole 64-chain grid; the reply is
read here into one buffer, usually in one ``recv``, and its head parsed with
``bytes`` operations (:func:`_parse_head`). The request's head and body go out in
one ``send``, and once connected the socket is in blocking mode, so that a send or
a read is one system call rather than a ``poll`` and then the call (what CPython
does for a socket with a timeout): with many chains in one process each system
call that waits hands the interpreter lock to another chain's thread. Nothing is
lost by dropping the per-operation timeout: the attempt's deadline
(:mod:`.deadline`, ``timeout_s`` for the whole attempt) passes no later than any
one operation's would, and its abort shuts the socket down, which ends a blocked
send or read at once.

What the caller relies on, kept here: the reply is read at most ``limit`` bytes
far (:class:`ReplyTooLarge`), each chunk is reported to the :class:`~.deadline.Attempt`
(which stops an attempt past its deadline), and :meth:`DirectConnection.abort`
shuts the socket down from any thread. Every failure on the way is a
:class:`TransportError` whose message starts with the name of what went wrong
(``ConnectionRefusedError: [Errno 111] ...``, ``IncompleteRead: ...``,
``BadStatusLine: ...``), or :class:`NetworkTimeout` for a connect over ``timeout_s``.
The body is framed as HTTP/1.1 says (RFC 9112): none for 1xx, 204 and 304,
chunked, by Content-Length, else until the server closes; a reply that says
``Connection: close`` (or an HTTP/1.0 one without keep-alive) closes the
connection, and the next call opens a new one.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .deadline import Attempt

if TYPE_CHECKING:
    import ssl

#: The most read at once from the socket while the reply comes in.
READ_CHUNK = 65536

#: A reply's head (status line and headers) longer than this is refused: a model
#: server's is a few hundred bytes (``http.client`` refused a line over 64 KiB).
MAX_HEAD_BYTES = 65536

#: More header lines than this are refused (as ``http.client`` did).
MAX_HEADERS = 100

#: A chunk-size line (or a trailer line) longer than this is refused.
MAX_CHUNK_LINE = 4096

_HEX_DIGITS = b"0123456789abcdefABCDEF"


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
    wrong with the reply (``IncompleteRead: ...``, ``BadStatusLine: ...``)."""


class NetworkTimeout(TransportError):
    """One network operation took over ``timeout_s``: the connect (a direct
    connection's sends and reads are bounded by the attempt's deadline alone), or
    through a proxy also one write or read."""


class BadEndpoint(Exception):
    """The endpoint is no http(s) URL a request can go to."""


def _bad(kind: str, detail: str) -> TransportError:
    """A reply the client cannot read, named as ``http.client`` named it."""
    return TransportError(f"{kind}: {detail}")


def _incomplete(received: int, expected: str) -> TransportError:
    return _bad("IncompleteRead", f"{received:,} bytes read, {expected}")


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
        #: as ``getaddrinfo`` takes it: a ``str`` would be IDNA-encoded, which imports
        #: ``encodings.idna`` (4 ms) in every process, for nothing where it is ASCII
        self._address = self._host.encode("ascii") if self._host.isascii() else self._host
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
        #: the reply just read leaves the connection able to carry the next request
        self._reusable = True
        self.is_closed = False

    def post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        """``POST`` ``content`` to the endpoint's ``path``; the whole reply, at most ``limit`` bytes of body."""
        if self._problem is not None:
            raise BadEndpoint(self._problem)
        attempt.on_cancel(self.abort)
        try:
            sock = self._open()
            # A deadline that passed while connecting found no socket to shut down (and
            # the connected one is blocking, with no timeout of its own): stop here.
            attempt.check()
            sock.sendall(self._request(path, content, headers))
            reply = self._receive(sock, attempt, limit)
        except TimeoutError as error:
            self._drop()
            raise NetworkTimeout(f"{type(error).__name__}: {error}") from None
        except OSError as error:  # ssl.SSLError included
            self._drop()
            raise TransportError(f"{type(error).__name__}: {error}") from None
        except BaseException:  # malformed, over the limit, cancelled, interrupted: the rest is not read
            self._drop()
            raise
        if not self._reusable:  # the server closes it, or sent more than the reply
            self._drop()
        return reply

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

    def _open(self) -> socket.socket:
        """The kept-alive socket, or a new one where the server closed it (or an
        abort shut it down) while it was idle."""
        sock = self._socket
        if sock is not None and self._poller is not None and self._poller.poll(0):
            # An idle kept-alive socket with something to read has been closed by the
            # server (or shut down by an abort): it cannot carry the next request.
            self._drop()
            sock = None
        if sock is None:
            sock = self._connect()
        self._reusable = True
        return sock

    def _connect(self) -> socket.socket:
        """A new connection, made within ``timeout_s`` (TLS handshake included),
        then blocking: the attempt's deadline bounds it (module docstring)."""
        # getaddrinfo takes a bytes host too (typeshed says str only)
        sock = socket.create_connection((self._address, self._port), self._timeout_s)  # type: ignore[arg-type]
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
        return sock

    def _receive(self, sock: socket.socket, attempt: Attempt, limit: int) -> Reply:
        """The whole reply, read into one buffer (usually in one ``recv``); 1xx
        interim replies skipped."""
        data = sock.recv(READ_CHUNK)
        if not data:
            raise _bad("RemoteDisconnected", "Remote end closed connection without response")
        while True:
            searched = 0
            while (end := _head_end(data, searched)) is None:
                if len(data) > MAX_HEAD_BYTES:
                    raise _bad("LineTooLong", f"the reply's head is over {MAX_HEAD_BYTES:,} bytes")
                more = sock.recv(READ_CHUNK)
                if not more:
                    raise _incomplete(len(data), "the connection ended within the reply's head")
                searched = max(0, len(data) - 3)
                data += more
            head_end, body_start = end
            if head_end > MAX_HEAD_BYTES:
                raise _bad("LineTooLong", f"the reply's head is over {MAX_HEAD_BYTES:,} bytes")
            status, version, headers = _parse_head(data[:head_end])
            if not 100 <= status < 200:
                break
            if status == 101:
                raise _bad("BadStatusLine", "101 Switching Protocols, which was not asked for")
            data = data[body_start:]  # an interim reply (100 Continue, 103 Early Hints): the reply follows
            if not data:
                data = sock.recv(READ_CHUNK)
                if not data:
                    raise _bad("RemoteDisconnected", "Remote end closed connection after an interim reply")
        length, chunked = _framing(status, headers)
        connection = headers.get("connection", "").lower()
        if version == 10:
            self._reusable = "keep-alive" in connection or "keep-alive" in headers
        else:
            self._reusable = "close" not in connection
        if length is None and not chunked:
            self._reusable = False  # the body ends where the connection does
        rest = data[body_start:]
        if chunked:
            chunks: Iterable[bytes] = self._chunked(sock, rest)
        elif length is not None:
            if len(rest) > length:  # more than the reply: nothing the next request could use
                self._reusable, rest = False, rest[:length]
            chunks = self._counted(sock, rest, length)
        else:
            chunks = _until_closed(sock, rest)
        return Reply(status, headers, read_body(chunks, status, headers, attempt, limit))

    def _counted(self, sock: socket.socket, rest: bytes, length: int) -> Iterator[bytes]:
        """A body of ``length`` bytes, ``rest`` of it already read."""
        if rest:
            yield rest
        received = len(rest)
        while received < length:
            data = sock.recv(min(READ_CHUNK, length - received))
            if not data:
                raise _incomplete(received, f"{length - received:,} more expected")
            received += len(data)
            yield data

    def _chunked(self, sock: socket.socket, data: bytes) -> Iterator[bytes]:
        """A chunked body (RFC 9112 7.1), ``data`` the bytes already read after the head."""
        position = 0
        received = 0

        def line() -> bytes:
            """The next line (without its end), reading more as needed."""
            nonlocal data, position
            while (newline := data.find(b"\n", position)) < 0:
                if len(data) - position > MAX_CHUNK_LINE:
                    raise _bad("BadChunk", f"a chunk-size or trailer line over {MAX_CHUNK_LINE:,} bytes")
                more = sock.recv(READ_CHUNK)
                if not more:
                    raise _incomplete(received, "the connection ended within a chunked body")
                data, position = data[position:] + more, 0
            found, position = data[position:newline], newline + 1
            return found.rstrip(b"\r")

        while True:
            size_text = line().split(b";", 1)[0].strip()
            if not size_text or size_text.strip(_HEX_DIGITS) or len(size_text) > 16:
                raise _bad("BadChunk", f"the chunk size {size_text[:40]!r} is no hexadecimal number")
            size = int(size_text, 16)
            if size == 0:
                break
            while size:
                if position == len(data):
                    data, position = sock.recv(min(READ_CHUNK, size + 2)), 0
                    if not data:
                        raise _incomplete(received, f"{size:,} more expected in a chunk")
                piece = data[position:position + size]
                position += len(piece)
                size -= len(piece)
                received += len(piece)
                yield piece
            if line():
                raise _bad("BadChunk", "a chunk is longer than its size says")
        while line():  # trailer fields, ignored, up to the blank line
            pass
        if position < len(data):
            self._reusable = False  # more than the reply

    def _drop(self) -> None:
        """Close the connection: a request that failed half-way leaves it unusable."""
        sock, self._socket, self._poller = self._socket, None, None
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


def _host_header(host: str, port: int, https: bool) -> str:
    """The Host header ``http.client`` sent: IPv6 in brackets, the port unless the scheme's."""
    try:
        name = host.encode("ascii").decode("ascii")
    except UnicodeEncodeError:
        name = host.encode("idna").decode("ascii")
    if ":" in name:
        name = f"[{name}]"
    return f"Host: {name}" if port == (443 if https else 80) else f"Host: {name}:{port}"


def _head_end(data: bytes, start: int) -> tuple[int, int] | None:
    """Where the head ends (after its last line's ``\\n``) and the body starts; None
    while the blank line is still to come. Lines may end in CRLF or a bare LF."""
    crlf = data.find(b"\n\r\n", start)
    lf = data.find(b"\n\n", start)
    if lf >= 0 and (crlf < 0 or lf < crlf):
        return lf + 1, lf + 2
    if crlf >= 0:
        return crlf + 1, crlf + 3
    return None


def _parse_head(head: bytes) -> tuple[int, int, dict[str, str]]:
    """The status, the HTTP version (10 or 11) and the headers (names in lower case,
    folded lines joined, the last of repeated names kept) of a reply's head."""
    lines = head.decode("latin-1").split("\n")
    status_line = lines[0].rstrip("\r")
    version, _, rest = status_line.partition(" ")
    code = rest.lstrip(" ")[:3]
    if (
        not version.startswith("HTTP/") or len(code) != 3 or not code.isdigit() or not code.isascii()
        or rest.lstrip(" ")[3:4] not in ("", " ")
    ):
        raise _bad("BadStatusLine", repr(status_line[:200]))
    if version == "HTTP/1.0":
        number = 10
    elif version.startswith("HTTP/1."):
        number = 11
    else:
        raise _bad("UnknownProtocol", repr(version[:40]))
    headers: dict[str, str] = {}
    name = ""
    count = 0
    for raw in lines[1:-1]:  # the last is the blank line's remainder
        line = raw.rstrip("\r")
        if line[:1] in (" ", "\t"):  # obsolete line folding: the previous header goes on
            if name:
                headers[name] = f"{headers[name]} {line.strip()}".strip()
            continue
        found, colon, value = line.partition(":")
        if not colon:
            continue  # not a header line; http.client's parser dropped such lines too
        count += 1
        if count > MAX_HEADERS:
            raise _bad("HTTPException", f"got more than {MAX_HEADERS} headers")
        name, value = found.strip().lower(), value.strip()
        if name == "content-length" and headers.get(name, value) != value:
            raise _bad("BadContentLength", f"two different lengths {headers[name][:20]!r} and {value[:20]!r}")
        headers[name] = value
    return int(code), number, headers


def _framing(status: int, headers: Mapping[str, str]) -> tuple[int | None, bool]:
    """How the body ends: ``(length, False)`` after ``length`` bytes, ``(None, True)``
    chunked, ``(None, False)`` when the server closes the connection."""
    if status in (204, 304) or status < 200:
        return 0, False
    coding = headers.get("transfer-encoding")
    if coding is not None and coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
        return None, True
    announced = headers.get("content-length")
    if announced is None:
        return None, False
    if not announced.isdigit() or not announced.isascii():
        raise _bad("BadContentLength", repr(announced[:40]))
    return int(announced), False


def _until_closed(sock: socket.socket, rest: bytes) -> Iterator[bytes]:
    """A body that ends where the connection does."""
    if rest:
        yield rest
    while data := sock.recv(READ_CHUNK):
        yield data


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
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _blocking(sock: socket.socket) -> None:
    """The connected socket in blocking mode: a send or read is one system call."""
    sock.settimeout(None)


__all__ = ["BadEndpoint", "DirectConnection", "NetworkTimeout", "Reply", "ReplyTooLarge", "TransportError", "read_body"]
