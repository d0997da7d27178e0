"""Fixtures for the real-model tests: the embedded GGUF model and a model server.

These tests run SmolLM2-135M on the CPU. Locally they are skipped when
llama-cpp-python is missing; under CI (``CI`` set) a missing extra is an error,
so a broken install cannot turn the suite green by skipping it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: The name the server answers to; the agent config's ``model.model`` must match it.
SERVER_MODEL_NAME = "smollm2-135m"

#: A cold start on a busy 2-core runner loads the model in about a second, but
#: other jobs sharing the cores can stretch that a lot.
SERVER_START_TIMEOUT_S = 180.0


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


@pytest.fixture(autouse=True)
def _require_llama_cpp() -> None:
    if llama_cpp_available():
        return
    message = "llama-cpp-python is not installed; run: evomemory local-model build"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the local_llm tests: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed")
    from pytest_evomemory.models.local import default_model_path

    return default_model_path()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class ModelServer:
    base_url: str
    model: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def _wait_until_ready(server: ModelServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    url = f"{server.base_url}/models"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"the model server exited with status {server.process.returncode}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the model server did not answer {url} within {timeout_s:g}s:\n{server.log_tail()}")


def _start(command: list[str], log: Path) -> ModelServer:
    """Start a server command (its port is the last argument) and wait until it answers."""
    port = command[-1]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = ModelServer(f"http://127.0.0.1:{port}/v1", SERVER_MODEL_NAME, log, process)
    try:
        _wait_until_ready(server, SERVER_START_TIMEOUT_S)
    except BaseException:
        _stop(server)
        raise
    return server


def _stop(server: ModelServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=15)


def _server_options(gguf_path: Path) -> list[str]:
    # One thread each, as the embedded model runs (docs/local-model.md): the tests
    # share the cores with whatever else runs, and the answers do not depend on it.
    return [
        "--model", str(gguf_path),
        "--model_alias", SERVER_MODEL_NAME,
        "--n_ctx", "2048",
        "--n_threads", "1",
        "--n_threads_batch", "1",
        "--verbose", "False",
        "--host", "127.0.0.1",
        "--port", str(free_port()),
    ]  # fmt: skip


@pytest.fixture(scope="session")
def model_server(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """llama-cpp-python's OpenAI-compatible server on a free port, for the session.

    It is started through ``python -m pytest_evomemory.models.local``, which runs
    ``llama_cpp.server``'s own ``main`` after registering the ``evomemory-tools``
    chat format: the built-in ``chatml-function-calling`` format ignores tools
    unless the request sets ``tool_choice``, and drops tool results from the prompt.
    """
    from pytest_evomemory.models.local import CHAT_FORMAT

    log = tmp_path_factory.mktemp("model_server") / "server.log"
    command = [sys.executable, "-m", "pytest_evomemory.models.local", "--chat_format", CHAT_FORMAT]
    server = _start([*command, *_server_options(gguf_path)], log)
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="session")
def plain_model_server(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """``python -m llama_cpp.server`` exactly as a user starts it: no chat format
    given, so the model's own chat template is used and tools are never called
    (SmolLM2's template knows none). The server for ``protocol: text | auto``."""
    log = tmp_path_factory.mktemp("plain_model_server") / "server.log"
    server = _start([sys.executable, "-m", "llama_cpp.server", *_server_options(gguf_path)], log)
    try:
        yield server
    finally:
        _stop(server)
