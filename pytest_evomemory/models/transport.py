"""The connection a thread sends an endpoint's requests on, and how it is chosen.

Two transports carry the model client's POST (:mod:`.openai_compat`), behind one
seam (:class:`Connection`): straight to the server, :class:`~.http11.DirectConnection`
on plain sockets, its replies read by ``h11``, which costs about a third of the CPU
a call that ``httpx2`` costs (:mod:`.http11`); through a proxy named by the usual
environment variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, with
``NO_PROXY``), :class:`ProxiedConnection` over ``httpx2``, which reads them as the
``openai`` SDK would. Either reports each chunk of the reply to the attempt's deadline
(:mod:`.deadline`), reads at most the reply limit, aborts from any thread, and
raises the same errors (:mod:`.http11`), so the client cannot tell them apart.
"""

from __future__ import annotations

import atexit
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..core.errors import ConfigError
from ..util.redaction import redact
from .deadline import Attempt
from .endpoint import proxied, proxy_for, proxy_problem
from .http11 import (
    BadEndpoint,
    CertificateRefused,
    DirectConnection,
    NetworkTimeout,
    Reply,
    TransportError,
    read_body,
    refused_certificate,
)

if TYPE_CHECKING:  # a plain-HTTP endpoint never needs the module (4 ms to import)
    import ssl


class Connection(Protocol):
    """What the model client sends a request with (one per endpoint, timeout and thread)."""

    #: the thread it serves: once that thread has ended, the connection is closed
    thread: threading.Thread

    @property
    def is_closed(self) -> bool: ...

    def post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        """``POST`` to the endpoint's ``path``: the whole reply, at most ``limit`` bytes of body."""
        ...

    def abort(self) -> None:
        """End the request under way wherever it blocks (from any thread)."""
        ...

    def close(self) -> None: ...


class ProxiedConnection:
    """The HTTP client one thread sends an endpoint's requests with through a proxy,
    and the sockets its connections opened, so that an attempt can be aborted
    wherever it blocks.

    The socket of a request is known only to ``httpx2``'s connection pool; a pool
    that serves one thread holds no connection but that thread's, so aborting the
    thread's attempt shuts down every socket its pool opened (reported through
    httpcore's ``trace`` extension when each connection is made). An idle
    keep-alive connection shut down with them is found closed and replaced.
    """

    def __init__(self, endpoint: str, timeout_s: float) -> None:
        import httpx2

        self.thread = threading.current_thread()
        try:
            # the headers are the caller's, as a DirectConnection sends them (the model client's)
            self.client = httpx2.Client(base_url=endpoint, timeout=httpx2.Timeout(timeout_s), verify=tls_for(endpoint))
        except (httpx2.InvalidURL, ValueError) as error:
            raise ConfigError(
                f"cannot build an HTTP client for {endpoint} ({redact(str(error))}); "
                "check HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY"
            ) from None
        self._sockets: list[socket.socket] = []
        #: how an error names the proxy the requests go through (they may not: NO_PROXY)
        via = proxy_for(endpoint)
        self._via = f" (through the proxy {via})" if via else ""

    @property
    def is_closed(self) -> bool:
        return self.client.is_closed

    def post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        import httpx2

        attempt.on_cancel(self.abort)
        try:
            return self._post(path, content, headers, attempt, limit)
        except (httpx2.UnsupportedProtocol, httpx2.InvalidURL) as error:
            raise BadEndpoint(str(error)) from None
        except httpx2.TimeoutException as error:
            raise NetworkTimeout(f"{type(error).__name__}: {error}{self._via}") from None
        except httpx2.TransportError as error:
            kind = CertificateRefused if refused_certificate(error) else TransportError
            raise kind(f"{type(error).__name__}: {error}{self._via}") from None

    def _post(self, path: str, content: bytes, headers: Mapping[str, str], attempt: Attempt, limit: int) -> Reply:
        def trace(event: str, info: Mapping[str, Any]) -> None:
            self._trace(event, info)
            if event.endswith(".send_request_body.complete"):
                attempt.sent()

        with self.client.stream(
            "POST", path, content=content, headers=dict(headers), extensions={"trace": trace}
        ) as response:
            found = {name.lower(): value for name, value in response.headers.items()}
            body = read_body(response.iter_bytes(), response.status_code, found, attempt, limit)
            return Reply(response.status_code, found, body)

    def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith((".connect_tcp.complete", ".start_tls.complete", ".connect_unix_socket.complete")):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                self._sockets = [*(known for known in self._sockets if known.fileno() != -1), sock]

    def abort(self) -> None:
        """Shut down every socket of this thread's connections (from any thread)."""
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already

    def close(self) -> None:
        self.client.close()


_CONNECTIONS: dict[tuple[str, float, int], Connection] = {}
_CONNECTIONS_LOCK = threading.Lock()
_SSL_CONTEXT: ssl.SSLContext | None = None


def shared_connection(endpoint: str, timeout_s: float) -> Connection:
    """One connection per endpoint, timeout and thread, kept while the thread lives.

    Streams run one after another in a process (or one per xdist worker, or one per
    thread of ``evomemory run --chains``), and each builds its own agent: keeping the
    connection alive across them saves a connect per call, and the TLS context
    (about 20 ms to load the trust store) is built once per process. One per thread
    because a call runs on its caller's thread, and aborting it at its deadline shuts
    down its own thread's connection and no other's.
    """
    key = (endpoint, timeout_s, threading.get_ident())
    here = threading.current_thread()
    found = _CONNECTIONS.get(key)
    if found is not None and found.thread is here:
        return found
    with _CONNECTIONS_LOCK:
        found = _CONNECTIONS.get(key)
        if found is None or found.thread is not here:  # none yet, or an ended thread's (its id reused)
            for ended in [other for other, held in _CONNECTIONS.items() if not held.thread.is_alive()]:
                _CONNECTIONS.pop(ended).close()  # its connections stay open no longer
            problem = proxy_problem()
            if problem:
                raise ConfigError(problem)
            if proxied():
                found = ProxiedConnection(endpoint, timeout_s)
            else:
                verify = tls_for(endpoint)
                found = DirectConnection(endpoint, timeout_s, None if isinstance(verify, bool) else verify)
            _CONNECTIONS[key] = found
        return found


@atexit.register
def _close_connections() -> None:
    with _CONNECTIONS_LOCK:
        for found in _CONNECTIONS.values():
            found.close()
        _CONNECTIONS.clear()


def tls_for(endpoint: str) -> ssl.SSLContext | bool:
    """The verifying TLS context, or ``False`` where no TLS can happen.

    Loading the trust store costs 20-60 ms of CPU per process. A plain-HTTP
    endpoint reached without a proxy (a local server, the usual case for
    benchmarks) never negotiates TLS: redirects are not followed. Everything else
    gets the verifying context ``httpx2`` builds (its trust store, ``SSL_CERT_FILE``
    and ``SSL_CERT_DIR`` honoured), built once per process.
    """
    global _SSL_CONTEXT
    if endpoint.lower().startswith("http://") and not proxied():
        return False
    if _SSL_CONTEXT is None:
        import httpx2

        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT


__all__ = [
    "Connection",
    "ProxiedConnection",
    "proxy_problem",
    "shared_connection",
    "tls_for",
]
