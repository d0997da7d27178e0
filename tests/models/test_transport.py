"""The model client's two transports (models/transport.py, models/http11.py) against
servers written byte by byte: what the scripted server never does (closing a kept-alive
connection, chunked bodies, a body cut short, TLS, a proxy) must not cost a wrong
reply, a lost attempt or an unverified certificate."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.config import ModelConfig
from pytest_evomemory.core.errors import ModelError
from pytest_evomemory.models import endpoint, http11, transport
from pytest_evomemory.models.deadline import Attempt
from pytest_evomemory.models.http11 import DirectConnection
from pytest_evomemory.models.openai_compat import OpenAICompatibleModel
from pytest_evomemory.models.transport import ProxiedConnection, shared_connection
from pytest_evomemory.testing.scripted_server import final_answer

from .rawserver import RawServer, Reader

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
REPLY = json.dumps(final_answer("4")).encode()
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _config(url: str, **overrides: object) -> ModelConfig:
    settings: dict[str, object] = {
        "base_url": url, "model": "m", "api_key_env": None, "cache": False,
        "timeout_s": 5.0, "max_retries": 1, "retry_backoff_s": 0.0,
    }
    settings.update(overrides)
    return ModelConfig(**settings)  # type: ignore[arg-type]


def _ok(body: bytes = REPLY, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%b\r\n%b" % (
        len(body), extra, body
    )


def test_a_kept_alive_connection_carries_every_call(raw_server: Callable[..., RawServer]) -> None:
    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            connection.sendall(_ok())

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1"))
    for _ in range(3):
        assert model.complete(MESSAGES, []).tool_calls[0].name == "final_answer"
        assert model.last_attempts == 1
    assert server.connections == 1
    assert isinstance(shared_connection(model.endpoint, model.config.timeout_s), DirectConnection)


def test_a_connection_the_server_closed_while_idle_is_replaced_without_a_failed_attempt(
    raw_server: Callable[..., RawServer],
) -> None:
    """The server answers one request per connection and hangs up without saying so
    (no ``Connection: close``): the next call opens a new connection, first time."""
    closed = threading.Semaphore(0)

    def handler(connection: socket.socket, reader: Reader) -> None:
        reader.request()
        connection.sendall(_ok())
        connection.shutdown(socket.SHUT_RDWR)
        closed.release()

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1", max_retries=0))
    for _ in range(3):
        assert model.complete(MESSAGES, []).tool_calls[0].name == "final_answer"
        assert closed.acquire(timeout=5)
    assert server.connections == 3


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_kept_alive_connection_closed_as_the_request_went_out_is_replaced_within_the_attempt(
    raw_server: Callable[..., RawServer], how: str
) -> None:
    """The server reads the next request on a kept-alive connection and closes it
    without a reply (its idle timeout passed as the request arrived): the request
    goes out again on a new connection, in the same attempt (max_retries 0)."""

    def handler(connection: socket.socket, reader: Reader) -> None:
        reader.request()
        connection.sendall(_ok())
        reader.request()
        if how == "reset":
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1", max_retries=0))
    for calls in range(1, 4):
        assert model.complete(MESSAGES, []).tool_calls[0].name == "final_answer"
        assert model.last_attempts == 1 and server.connections == calls


def test_a_new_connection_closed_without_a_reply_is_a_failed_attempt(raw_server: Callable[..., RawServer]) -> None:
    """A server that closes every connection on the request: the kept-alive
    connection gets one more go on a new one, which fails as the server's failure."""
    served = threading.Semaphore(1)

    def handler(connection: socket.socket, reader: Reader) -> None:
        reader.request()
        if served.acquire(blocking=False):  # the first connection answers once, then is closed on the next request
            connection.sendall(_ok())
            reader.request()

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1", max_retries=0))
    model.complete(MESSAGES, [])
    with pytest.raises(ModelError, match=r"after 1 attempt: connection error \(RemoteDisconnected: Remote end closed "
                                         r"connection without response\)"):
        model.complete(MESSAGES, [])
    assert server.connections == 2  # the kept-alive one and one new one: no loop


def test_the_request_goes_out_in_one_send_on_a_blocking_socket(
    raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Head and body in one ``sendall``, and no per-operation timeout once connected
    (each is a system call that hands the interpreter lock to another chain; the
    attempt's deadline bounds the call: tests/models/test_deadline.py)."""
    sends: list[bytes] = []
    original = socket.socket.sendall
    client = threading.get_ident()

    def counting(self: socket.socket, data: bytes, *args: int) -> None:
        if threading.get_ident() == client:  # the client's, not the server's
            sends.append(bytes(data))
        original(self, data, *args)

    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            connection.sendall(_ok())

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1"))
    monkeypatch.setattr(socket.socket, "sendall", counting)
    model.complete(MESSAGES, [])
    monkeypatch.undo()
    assert len(sends) == 1
    head, _, body = sends[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1") and json.loads(body)["messages"] == MESSAGES
    lines = head.split(b"\r\n")
    assert b"User-Agent: pytest-evomemory" in lines and b"Accept: application/json" in lines
    connection = shared_connection(model.endpoint, model.config.timeout_s)
    assert isinstance(connection, DirectConnection) and connection._socket is not None
    assert connection._socket.gettimeout() is None


def test_a_deadline_that_passes_while_connecting_ends_the_attempt_before_the_request(
    raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog's abort shuts down the socket of the request under way; while
    the connection is still being made there is none to shut down, and the
    connected socket is blocking (no timeout of its own): the attempt must end
    there, not send the request and wait for ever for a server that never answers."""
    outcome: list[str] = []
    settled = threading.Event()
    hang_up = threading.Event()

    def handler(connection: socket.socket, reader: Reader) -> None:
        if reader.request() is not None:
            outcome.append("the request was sent")
            settled.set()
        hang_up.wait()  # never answers

    server = raw_server(handler)
    attempt = Attempt()
    connecting = http11._blocking

    def connected_as_the_deadline_passes(sock: socket.socket) -> None:
        connecting(sock)
        attempt.cancel()  # the watchdog, while the client is still in _open

    monkeypatch.setattr(http11, "_blocking", connected_as_the_deadline_passes)
    client = DirectConnection(f"http://127.0.0.1:{server.port}/v1", 5.0, None)

    def call() -> None:
        try:
            client.post("/chat/completions", b"{}", {"Content-Type": "application/json"}, attempt, 1 << 20)
            outcome.append("a reply")
        except BaseException as error:  # which one is what the test looks at
            outcome.append(type(error).__name__)
        settled.set()

    threading.Thread(target=call, daemon=True).start()
    try:
        settled.wait()
        assert outcome[0] == "AttemptCancelled"
    finally:
        hang_up.set()
        client.close()


def test_a_chunked_reply_is_read_whole_and_counted_against_the_limit(raw_server: Callable[..., RawServer]) -> None:
    answer = "4" * 3000
    reply = json.dumps(final_answer(answer)).encode()

    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            parts = [reply[start:start + 700] for start in range(0, len(reply), 700)]
            connection.sendall(head + b"".join(b"%x\r\n%b\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n")

    server = raw_server(handler)
    url = f"http://127.0.0.1:{server.port}/v1"
    completion = OpenAICompatibleModel(_config(url)).complete(MESSAGES, [])
    assert json.loads(completion.tool_calls[0].arguments) == {"answer": answer}
    with pytest.raises(ModelError, match=r"over model.max_reply_bytes \(1,024 bytes\); the server sent far more"):
        OpenAICompatibleModel(_config(url, max_reply_bytes=1024, timeout_s=6.0)).complete(MESSAGES, [])


def test_a_reply_cut_short_is_a_connection_error_not_a_reply(raw_server: Callable[..., RawServer]) -> None:
    """The body ends (the server hangs up) before its announced length: retried, never parsed."""

    def handler(connection: socket.socket, reader: Reader) -> None:
        reader.request()
        whole = _ok()
        connection.sendall(whole[: len(whole) - 5])

    server = raw_server(handler)
    model = OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1", max_retries=1))
    with pytest.raises(ModelError, match=r"failed after 2 attempts: connection error \(RemoteProtocolError: peer closed connection without sending complete message body"):
        model.complete(MESSAGES, [])
    assert server.connections == 2


def test_headers_of_every_request(raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    def handler(connection: socket.socket, reader: Reader) -> None:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += connection.recv(1)
        seen.append(head)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while length:
            length -= len(connection.recv(length))
        connection.sendall(_ok())

    server = raw_server(handler)
    monkeypatch.setenv("TRANSPORT_TEST_KEY", "sk-transport-test-0123456789")
    OpenAICompatibleModel(_config(f"http://127.0.0.1:{server.port}/v1/", api_key_env="TRANSPORT_TEST_KEY")).complete(
        MESSAGES, []
    )
    lines = seen[0].decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:] if line)}
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["authorization"] == "Bearer sk-transport-test-0123456789"
    assert (headers["content-type"], headers["accept"], headers["user-agent"]) == (
        "application/json", "application/json", "pytest-evomemory"
    )


def test_a_proxy_variable_sends_the_request_through_the_proxy(
    raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a proxy set, httpx2 reads the variables (NO_PROXY too) and the request
    goes to the proxy in absolute form, as the openai SDK would send it."""

    sent_headers: list[dict[str, str]] = []

    def handler(connection: socket.socket, reader: Reader) -> None:
        while (request := reader.request()) is not None:
            proxy.request_lines.append(request[0])
            sent_headers.append(reader.headers)
            big = b"big" in request[1]
            connection.sendall(_ok(json.dumps(final_answer("4" * 3000)).encode() if big else REPLY))

    proxy = raw_server(handler)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    model = OpenAICompatibleModel(_config("http://upstream.invalid:8000/v1", timeout_s=4.5, max_reply_bytes=1024))
    assert isinstance(shared_connection(model.endpoint, model.config.timeout_s), ProxiedConnection)
    assert model.complete(MESSAGES, []).tool_calls[0].name == "final_answer"
    assert proxy.request_lines == ["POST http://upstream.invalid:8000/v1/chat/completions HTTP/1.1"]
    # the model client's headers, as a direct connection sends them
    assert {name: sent_headers[0].get(name) for name in ("user-agent", "accept", "content-type")} == {
        "user-agent": "pytest-evomemory", "accept": "application/json", "content-type": "application/json",
    }
    with pytest.raises(ModelError, match=r"over model.max_reply_bytes \(1,024 bytes; it announced 3,"):
        model.complete([{"role": "user", "content": "big"}], [])


def test_a_proxy_that_fails_is_named_without_its_password(
    raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that refuses the connection, or asks for credentials (407): the error
    names the proxy variable, so "connection refused" does not blame the model server."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:Pr0xyPassw0rd@127.0.0.1:{closed}")
    model = OpenAICompatibleModel(_config("http://upstream.invalid:8000/v1", max_retries=0))
    with pytest.raises(ModelError) as refused:
        model.complete(MESSAGES, [])
    assert f"(through the proxy HTTP_PROXY=http://***@127.0.0.1:{closed})" in str(refused.value)

    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            connection.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

    proxy = raw_server(handler)
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:Pr0xyPassw0rd@127.0.0.1:{proxy.port}")
    with pytest.raises(ModelError) as asked:
        OpenAICompatibleModel(_config("http://upstream.invalid:8001/v1")).complete(MESSAGES, [])
    assert "HTTP status 407" in str(asked.value) and "(not retried" in str(asked.value)
    assert f"the proxy (HTTP_PROXY=http://***@127.0.0.1:{proxy.port}) asks for credentials" in str(asked.value)
    assert "Pr0xyPassw0rd" not in str(refused.value) + str(asked.value)
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    assert endpoint.proxy_for("http://upstream.invalid:8000/v1") is None


def _self_signed(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a certificate")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )
    return key, cert


def test_an_https_endpoint_is_verified(
    raw_server: Callable[..., RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An untrusted certificate fails the call; a trusted one for another host name does
    too; trusted and matching, the reply comes back over TLS."""
    key, cert = _self_signed(tmp_path)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)

    def handler(connection: socket.socket, reader: Reader) -> None:
        while reader.request() is not None:
            connection.sendall(_ok())

    server = raw_server(handler, served)
    # not retried (max_retries 3): every attempt would meet the certificate again
    with pytest.raises(ModelError, match=r"failed after 1 attempt: connection error \(SSLCertVerificationError.*"
                       r"\(not retried: the certificate would be refused again\); .* set SSL_CERT_FILE"):
        OpenAICompatibleModel(_config(f"https://localhost:{server.port}/v1", max_retries=3)).complete(MESSAGES, [])
    assert server.connections == 1
    trusting = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(transport, "_SSL_CONTEXT", trusting)
    with pytest.raises(ModelError, match=r"connection error \(SSLCertVerificationError.*(mismatch|match)"):
        OpenAICompatibleModel(
            _config(f"https://127.0.0.1:{server.port}/v1", max_retries=0, timeout_s=4.0)
        ).complete(MESSAGES, [])
    model = OpenAICompatibleModel(_config(f"https://localhost:{server.port}/v1", timeout_s=3.0))
    assert model.complete(MESSAGES, []).tool_calls[0].name == "final_answer"
