"""The model client's tests share the agents' scripted server and isolated cache, and
the byte-by-byte server of the transport tests (:mod:`.rawserver`)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator

import pytest

from ..agents.conftest import isolated_cache, scripted_openai_server
from .rawserver import Handler, RawServer


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    started: list[RawServer] = []

    def start(handler: Handler, context: ssl.SSLContext | None = None) -> RawServer:
        server = RawServer(handler, context)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


__all__ = ["isolated_cache", "raw_server", "scripted_openai_server"]
