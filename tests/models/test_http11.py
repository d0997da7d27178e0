"""The direct connection's reading of replies (models/http11.py, on ``h11``) against
a server on 127.0.0.1 that answers scripted bytes: every way a reply may be framed
(Content-Length, chunked, until the server closes), headers as servers really
write them, interim replies, and every malformed or truncated reply, which must be a
:class:`TransportError` naming what was wrong and never a wrong body.

Each reply is also read with ``READ_CHUNK`` set to 1 byte, so that it arrives over
as many ``recv`` calls as it has bytes, whatever the kernel would have batched: a
split anywhere (inside the status line, a header, the blank line, a chunk-size line,
a CRLF after a chunk) must give the same reply. Nothing here depends on timing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator

import pytest

from pytest_evomemory.models import http11
from pytest_evomemory.models.deadline import Attempt
from pytest_evomemory.models.http11 import DirectConnection, Reply, ReplyTooLarge, TransportError

from .rawserver import RawServer, Reader

BODY = b'{"choices": [{"message": {"content": "4"}}]}'


def _reply(head: bytes, body: bytes = BODY) -> bytes:
    return head + b"\r\n" + body


def _length(body: bytes = BODY, extra: bytes = b"", status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return _reply(status + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%b" % (len(body), extra), body)


def _chunked(body: bytes = BODY, size: int = 7) -> bytes:
    parts = [body[start:start + size] for start in range(0, len(body), size)]
    return (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x;name=value\r\n%b\r\n" % (len(part), part) for part in parts)
        + b"0\r\nX-Trailer: yes\r\n\r\n"
    )


class Script:
    """A server whose connections answer each request with the next scripted reply;
    a reply followed by ``None`` in the script is sent and the connection closed."""

    def __init__(self, raw_server: Callable[..., RawServer], *replies: bytes | None) -> None:
        self._replies = list(replies)
        self._lock = threading.Lock()
        self.server = raw_server(self._handle)
        self.connection = DirectConnection(f"http://127.0.0.1:{self.server.port}/v1", 5.0, None)

    def _handle(self, connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            with self._lock:
                reply = self._replies.pop(0) if self._replies else None
                close = not self._replies or self._replies[0] is None
                if self._replies and self._replies[0] is None:
                    self._replies.pop(0)
            if reply is not None:
                connection.sendall(reply)
            if close or reply is None:
                connection.shutdown(socket.SHUT_RDWR)
                return

    def post(self, limit: int = 1 << 20) -> Reply:
        return self.connection.post("/chat/completions", b"{}", {"Content-Type": "application/json"}, Attempt(), limit)


@pytest.fixture(params=[http11.READ_CHUNK, 1], ids=["whole", "byte-by-byte"])
def read_chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(http11, "READ_CHUNK", request.param)
    yield request.param


@pytest.fixture
def script(raw_server: Callable[..., RawServer], read_chunk: int) -> Iterator[Callable[..., Script]]:
    made: list[Script] = []

    def start(*replies: bytes | None) -> Script:
        made.append(Script(raw_server, *replies))
        return made[-1]

    yield start
    for each in made:
        each.connection.close()


def test_a_content_length_reply_keeps_the_connection_for_the_next(script: Callable[..., Script]) -> None:
    served = script(_length(), _length(b"{}"), _length(b"", status=b"HTTP/1.1 503 Busy"))
    first = served.post()
    assert (first.status, first.body, first.headers["content-type"]) == (200, BODY, "application/json")
    assert served.post().body == b"{}"
    assert (served.post().status, served.server.connections) == (503, 1)


def test_a_chunked_reply_with_extensions_and_trailers_is_read_whole(script: Callable[..., Script]) -> None:
    served = script(_chunked(), _chunked(BODY * 3, size=50), _length())
    assert served.post().body == BODY
    assert served.post().body == BODY * 3
    assert served.post().body == BODY
    assert served.server.connections == 1  # the chunked replies left it ready for the next


def test_a_reply_without_length_ends_where_the_connection_does(script: Callable[..., Script]) -> None:
    served = script(_reply(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"), None, _length())
    assert served.post().body == BODY
    assert served.post().body == BODY
    assert served.server.connections == 2


@pytest.mark.parametrize(
    ("head", "reused"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n", False),
        (b"HTTP/1.1 200 OK\r\nconnection: Keep-Alive, Close\r\nContent-Length: %d\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n", False),
        # h11 does not take up HTTP/1.0's keep-alive, which RFC 9112 (9.3) leaves to the client
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: %d\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n", True),
    ],
    ids=["close", "close-among-tokens", "http-1.0", "http-1.0-keep-alive", "http-1.1"],
)
def test_connection_close_and_http_1_0_open_a_new_connection_for_the_next_call(
    script: Callable[..., Script], head: bytes, reused: bool
) -> None:
    served = script(_reply(head % len(BODY)), _reply(head % len(BODY)), _length())
    assert served.post().body == BODY
    assert served.post().body == BODY
    assert served.server.connections == (1 if reused else 2)


def test_headers_in_any_case_folded_or_with_bare_line_feeds(script: Callable[..., Script]) -> None:
    head = (
        b"HTTP/1.1 429 Too Many Requests\n"
        b"CONTENT-type:application/json\r\n"
        b"Retry-After:   2  \n"
        b"X-Folded: first\r\n   second\r\n\tthird\r\n"
        b"x-repeated: one\r\nX-Repeated: two\r\n"
        b"Content-LENGTH: %d\n\n" % len(BODY)
    )
    reply = script(head + BODY).post()
    assert reply.status == 429 and reply.body == BODY
    assert dict(reply.headers) == {
        "content-type": "application/json", "retry-after": "2", "x-folded": "first second third",
        "x-repeated": "two", "content-length": str(len(BODY)),
    }


def test_interim_replies_before_the_reply_are_skipped(script: Callable[..., Script]) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
    served = script(interim + _length(), _length(b"{}"))
    assert served.post().body == BODY
    assert (served.post().body, served.server.connections) == (b"{}", 1)


def test_replies_without_a_body_leave_the_connection_ready(script: Callable[..., Script]) -> None:
    served = script(b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", _length())
    assert (served.post().status, served.post().status, served.post().body) == (204, 304, BODY)
    assert served.server.connections == 1


def test_bytes_after_the_reply_are_not_read_as_the_next_reply(script: Callable[..., Script]) -> None:
    """What a server sends past the announced length belongs to no request: the reply
    is the announced bytes, and the next call goes out on a new connection."""
    served = script(_length() + _length(b"{}"), _length())
    assert served.post().body == BODY
    assert served.post().body == BODY
    assert served.server.connections == 2


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (None, r"^RemoteDisconnected: Remote end closed connection without response$"),
        (_length()[:-5], r"^RemoteProtocolError: peer closed connection without sending complete message body "
         rf"\(received {len(BODY) - 5} bytes, expected {len(BODY)}\); reading the body of a 200 reply"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
         r"^RemoteProtocolError: peer unexpectedly closed connection; reading the reply's head$"),
        (_chunked()[:-20],
         r"^RemoteProtocolError: peer unexpectedly closed connection; reading the body of a 200 reply"),
        (b"HTTP/1.1 100 Continue\r\n\r\n", r"^RemoteDisconnected: .* after an interim reply$"),
        (b"GARBAGE\r\n\r\n",
         r"^RemoteProtocolError: illegal status line: bytearray\(b'GARBAGE'\); reading the reply's head$"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", r"^RemoteProtocolError: illegal status line: bytearray\(b'HTTP/1.1 2000 OK'\)"),
        (b"HTTP/1.1 OK 200\r\n\r\n", r"^RemoteProtocolError: illegal status line: "),
        (b"HTTP/2 200\r\n\r\n", r"^RemoteProtocolError: illegal status line: bytearray\(b'HTTP/2 200'\)"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
         r"^RemoteProtocolError: Received server _SWITCH_UPGRADE event without a pending proposal"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
         r"^RemoteProtocolError: bad Content-Length; reading the reply's head$"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
         r"^RemoteProtocolError: conflicting Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
         r"^RemoteProtocolError: illegal chunk header: .*'zz"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n",
         r"^RemoteProtocolError: illegal chunk header: .*'-1"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
         r"^RemoteProtocolError: malformed chunk footer"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
         r"^RemoteProtocolError: more than 100 headers in the reply's head$"),
    ],
    ids=[
        "no-reply", "body-cut-short", "head-cut-short", "chunked-cut-short", "only-an-interim-reply",
        "garbage-status-line", "four-digit-status", "status-not-a-number", "http-2", "switching-protocols",
        "negative-length", "two-lengths", "chunk-size-not-hex", "chunk-size-negative", "chunk-too-long",
        "too-many-headers",
    ],
)
def test_a_malformed_or_truncated_reply_is_a_transport_error_naming_it(
    script: Callable[..., Script], reply: bytes | None, message: str
) -> None:
    served = script(reply, None, _length())
    with pytest.raises(TransportError, match=message):
        served.post()
    assert served.post().body == BODY  # the next call is not disturbed: it goes on a new connection
    assert served.server.connections == 2


@pytest.mark.parametrize("end", [b"\r\n\r\n", b""], ids=["ending-past-the-bound", "never-ending"])
def test_a_head_over_its_bound_is_refused(
    script: Callable[..., Script], monkeypatch: pytest.MonkeyPatch, end: bytes
) -> None:
    monkeypatch.setattr(http11, "MAX_HEAD_BYTES", 4096)
    served = script(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 9000 + end)
    with pytest.raises(TransportError, match=r"^RemoteProtocolError: the reply's head is over 4,096 bytes$"):
        served.post()


def test_a_chunked_reply_over_the_limit_stops_at_the_limit(script: Callable[..., Script]) -> None:
    served = script(_chunked(BODY * 10, size=10), None, _length(b"x" * 100), None)
    with pytest.raises(ReplyTooLarge) as raised:
        served.post(limit=len(BODY) * 2)
    assert (raised.value.status, raised.value.announced) == (200, "")
    with pytest.raises(ReplyTooLarge) as raised:
        served.post(limit=99)
    assert raised.value.announced == "; it announced 100"


def test_the_request_names_the_host_as_http_client_did() -> None:
    assert http11._host_header("127.0.0.1", 80, https=False) == "Host: 127.0.0.1"
    assert http11._host_header("127.0.0.1", 8000, https=False) == "Host: 127.0.0.1:8000"
    assert http11._host_header("::1", 443, https=True) == "Host: [::1]"
    assert http11._host_header("::1", 80, https=True) == "Host: [::1]:80"
    assert http11._host_header("bücher.example", 8080, https=False) == "Host: xn--bcher-kva.example:8080"


def test_a_plain_http_call_loads_no_http_client_or_ssl(raw_server: Callable[..., RawServer]) -> None:
    """Every process that calls a model pays for what its first call imports: the
    direct connection needs neither ``http.client`` (with the ``email`` package that
    parsed its headers) nor ``ssl`` for an ``http://`` endpoint. Checked in a fresh
    interpreter, by module name."""

    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            connection.sendall(_length(b'{"choices": [{"message": {"content": "4"}}]}'))

    server = raw_server(handler)
    code = textwrap.dedent(f"""
        import json, sys
        from pytest_evomemory.config import ModelConfig
        from pytest_evomemory.models.openai_compat import OpenAICompatibleModel
        config = ModelConfig(base_url="http://127.0.0.1:{server.port}/v1", model="m", api_key_env=None, cache=False)
        assert OpenAICompatibleModel(config).complete([{{"role": "user", "content": "2 + 2?"}}], []).content == "4"
        print(json.dumps([name for name in ("http.client", "email.parser", "ssl") if name in sys.modules]))
    """)
    env = {name: value for name, value in os.environ.items() if "proxy" not in name.lower()}
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_refused_certificate_is_found_inside_what_an_http_library_wraps_it_in() -> None:
    """httpx2 raises its ConnectError from the ssl module's error: either transport's
    certificate failure is told apart from a transient one by the chain."""
    import ssl

    def wrapped() -> BaseException:
        try:
            try:
                raise ssl.SSLCertVerificationError(1, "certificate verify failed")
            except ssl.SSLError as error:
                raise ConnectionError("ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED]") from error
        except ConnectionError as outer:
            return outer

    assert http11.refused_certificate(wrapped())
    assert not http11.refused_certificate(ConnectionResetError(104, "Connection reset by peer"))
    assert not http11.refused_certificate(ssl.SSLError(1, "record layer failure"))
