"""pytest fixtures around :class:`ScriptedServer`.

Enable with ``pytest_plugins = ["pytest_evomemory.testing.fixtures"]`` in a root
conftest.py (or import the fixture into a nested one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .scripted_server import Policy, ScriptedServer, echo_policy

ServerFactory = Callable[..., ScriptedServer]


@pytest.fixture
def scripted_openai_server() -> Iterator[ServerFactory]:
    """Start scripted servers: ``scripted_openai_server(policy, latency_s=0.0)``.

    A factory rather than one server, because a test often wants a fresh policy;
    every server started is stopped at teardown.
    """
    started: list[ScriptedServer] = []

    def start(policy: Policy = echo_policy, *, latency_s: float = 0.0) -> ScriptedServer:
        server = ScriptedServer(policy, latency_s=latency_s).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
