"""Backend specifics: where SQLite files go, PostgreSQL tables, and failures at open time."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.core.errors import ConfigError, MemoryBackendError
from pytest_evomemory.memory import build_memory
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.postgres import PostgresMemory, table_name
from pytest_evomemory.memory.sqlite import SqliteMemory, SqliteOptions
from pytest_evomemory.testing.scripted_server import (
    ScriptedServer,
    memory_library_policy,
    scripted_model_config,
)

from .conftest import LIBRARY_EXTRAS, NO_EMBEDDINGS_REASON, memory_config, skip_without_extra


def context(tmp_path: Path, stream: str = "aime_2024", run_name: str = "run1") -> MemoryContext:
    return MemoryContext(stream=stream, run_dir=tmp_path / "results" / run_name, run_name=run_name)


# --------------------------------------------------------------------------- sqlite


def test_sqlite_file_is_one_per_stream_under_the_run_directory(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    memory = build_memory(memory_config("sqlite"), ctx)
    assert isinstance(memory, SqliteMemory)
    assert memory.path == ctx.run_dir / "memory" / "aime_2024.sqlite3"
    memory.retain("persisted record")
    memory.close()
    with sqlite3.connect(ctx.run_dir / "memory" / "aime_2024.sqlite3") as connection:
        assert connection.execute("SELECT content FROM records").fetchall() == [("persisted record",)]


def test_sqlite_path_template_fills_stream_and_run_name(tmp_path: Path) -> None:
    absolute = build_memory(
        memory_config("sqlite", sqlite={"path": str(tmp_path / "mem" / "{run_name}-{stream}.db")}),
        context(tmp_path, stream="gpqa/diamond"),
    )
    relative = build_memory(memory_config("sqlite", sqlite={"path": "store/{stream}.db"}), context(tmp_path))
    try:
        assert isinstance(absolute, SqliteMemory) and isinstance(relative, SqliteMemory)
        assert absolute.path == tmp_path / "mem" / "run1-gpqa_diamond.db"
        assert relative.path == tmp_path / "results" / "run1" / "store" / "aime_2024.db"
    finally:
        absolute.close()
        relative.close()


def test_sqlite_path_without_stream_placeholder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must contain '\{stream\}'"):  # when the config is read
        memory_config("sqlite", sqlite={"path": str(tmp_path / "one.db")})
    unchecked = MemoryConfig.model_validate({"backend": "sqlite", "sqlite": {"path": str(tmp_path / "one.db")}})
    assert SqliteOptions.SECTION == "sqlite"
    with pytest.raises(MemoryBackendError, match=r"must contain '\{stream\}'"):  # and by the backend itself
        build_memory(unchecked, context(tmp_path))


def test_sqlite_stale_file_from_an_earlier_run_is_replaced(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    stale = ctx.run_dir / "memory" / "aime_2024.sqlite3"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"not a database at all" * 100)
    Path(f"{stale}-wal").write_bytes(b"junk")
    memory = build_memory(memory_config("sqlite+hashing"), ctx)
    try:
        assert memory.recall("database") == []
        memory.retain("fresh database record")
        assert len(memory.recall("database")) == 1
    finally:
        memory.close()


@pytest.mark.parametrize("where", ["parent_is_a_file", "directory_in_the_way"])
def test_sqlite_that_cannot_be_opened_fails_at_open_with_the_path(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "blocker"
    if where == "parent_is_a_file":
        blocker.write_text("a file, not a directory")
        template = str(blocker / "{stream}.sqlite3")
    else:
        (tmp_path / "aime_2024.sqlite3").mkdir()
        (tmp_path / "aime_2024.sqlite3" / "keep").write_text("x")
        template = str(tmp_path / "{stream}.sqlite3")
    with pytest.raises(MemoryBackendError, match="sqlite memory could not be opened at"):
        build_memory(memory_config("sqlite", sqlite={"path": template}), context(tmp_path))


def test_sqlite_hybrid_finds_a_record_that_shares_no_word_with_the_query_only_through_vectors(
    tmp_path: Path,
) -> None:
    """Bigram/unigram hashing puts 'lamp oil' close to 'lamp oils'; FTS alone with
    no shared stem would miss it — here both signals agree, and RRF keeps order."""
    memory = build_memory(memory_config("sqlite+hashing"), context(tmp_path))
    try:
        first = memory.retain("lamp oil storage rules for the lighthouse")
        memory.retain("lighthouse visiting hours")
        hits = memory.recall("lamp oil lighthouse", top_k=2)
        assert hits[0].record_id == first
        assert hits[0].score > hits[1].score > 0
    finally:
        memory.close()


# --------------------------------------------------------------------------- postgres


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_postgres_server_down_fails_at_open_with_a_clear_message(tmp_path: Path) -> None:
    port = free_port()
    config = memory_config("postgres", postgres={"host": "127.0.0.1", "port": port, "connect_timeout_s": 2})
    with pytest.raises(MemoryBackendError, match=rf"could not connect to postgres@127.0.0.1:{port}/postgres"):
        build_memory(config, context(tmp_path))


def test_postgres_bad_credentials_fail_at_open(
    tmp_path: Path, postgres_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOMEMORY_TEST_WRONG_PASSWORD", "definitely-not-the-password")
    config = memory_config("postgres", postgres={**postgres_settings, "password_env": "EVOMEMORY_TEST_WRONG_PASSWORD"})
    with pytest.raises(MemoryBackendError, match=r"could not connect.*(password|authentication)"):
        build_memory(config, context(tmp_path))
    wrong_user = memory_config("postgres", postgres={**postgres_settings, "user": "no_such_role_evomemory"})
    with pytest.raises(MemoryBackendError, match="could not connect to no_such_role_evomemory@"):
        build_memory(wrong_user, context(tmp_path))


def test_postgres_missing_password_variable_is_named(tmp_path: Path, postgres_settings: dict[str, Any]) -> None:
    variable = f"EVOMEMORY_UNSET_{uuid.uuid4().hex[:6].upper()}"
    assert variable not in os.environ
    config = memory_config("postgres", postgres={**postgres_settings, "password_env": variable})
    try:
        memory = build_memory(config, context(tmp_path))
    except MemoryBackendError as error:
        assert f"${variable} is not set" in str(error)
    else:  # the server trusts local connections or ~/.pgpass answers: nothing to report
        memory.close()


def _admin_connection(settings: dict[str, Any]) -> Any:
    """A connection of our own to the test server, beside the memory's."""
    import psycopg

    return psycopg.connect(
        host=settings["host"], port=settings["port"], user=settings["user"], dbname=settings["dbname"],
        password=os.environ.get("PGPASSWORD"), autocommit=True,
    )


def test_postgres_tables_are_per_run_and_stream_and_dropped_on_close(
    tmp_path: Path, postgres_settings: dict[str, Any]
) -> None:
    run = f"tbl_{uuid.uuid4().hex[:8]}"
    memory = build_memory(memory_config("postgres", postgres=postgres_settings), context(tmp_path, "mmlu_pro", run))
    assert isinstance(memory, PostgresMemory)
    assert memory.table.startswith(f"evomemory_{run}_mmlu_pro_")  # + a hash of the exact names
    memory.retain("a row")
    with _admin_connection(postgres_settings) as connection:
        def exists() -> bool:
            row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (memory.table,)).fetchone()
            return bool(row and row[0])

        assert exists()
        index = connection.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%gin%%'", (memory.table,)
        ).fetchall()
        assert index, "the tsvector column must be GIN-indexed"
        memory.close()
        assert not exists()


def test_postgres_table_dropped_by_hand_mid_stream_fails_in_one_line_naming_it(
    tmp_path: Path, postgres_settings: dict[str, Any]
) -> None:
    """psycopg's message carries the query's excerpt and a caret line; the failed
    episode's reason and the terminal line stay one line."""

    memory = build_memory(memory_config("postgres", postgres=postgres_settings), context(tmp_path, "s", f"drop_{uuid.uuid4().hex[:8]}"))
    assert isinstance(memory, PostgresMemory)
    memory.retain("a row")
    with _admin_connection(postgres_settings) as connection:
        connection.execute(f'DROP TABLE "{memory.table}"')
    try:
        for operation in (lambda: memory.recall("row"), lambda: memory.retain("another"), memory.reset):
            with pytest.raises(MemoryBackendError) as failed:
                operation()
            assert "\n" not in str(failed.value) and "^" not in str(failed.value)
            assert f"postgres memory {memory.table!r}" in str(failed.value) and "does not exist" in str(failed.value)
    finally:
        memory.close()


def test_table_names_are_valid_distinct_and_bounded() -> None:
    long_run = "a-very-long-run-name-" * 5
    names = {
        table_name("evomemory", long_run, "aime_2024"),
        table_name("evomemory", long_run, "gpqa_diamond"),
        table_name("evomemory", long_run + "x", "aime_2024"),
        table_name("evomemory", "Run Name!", "toolbench"),
    }
    assert len(names) == 4
    for name in names:
        assert len(name) <= 63
        assert name.replace("_", "a").isalnum() and name.islower()


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (Path(__file__).parents[2] / "pytest_evomemory" / "configs" / "memory").glob("*.yaml"))
)
def test_shipped_memory_configs_are_valid_and_sqlite_ones_open(tmp_path: Path, name: str) -> None:
    import yaml

    from pytest_evomemory.configs.load import validate_memory

    from .conftest import HAS_EMBEDDINGS_EXTRA

    path = Path(__file__).parents[2] / "pytest_evomemory" / "configs" / "memory" / name
    config = validate_memory(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
    encoder = config.embedder == "sentence-transformers" or (config.backend == "dense" and config.embedder is None)
    if config.backend == "postgres" or (encoder and not HAS_EMBEDDINGS_EXTRA):
        return
    if config.embedder_model is not None and not Path(config.embedder_model).expanduser().is_dir():
        return  # a hub model (the paper's bge) this machine need not have: loaded offline only
    if config.backend in LIBRARY_EXTRAS:  # the memory libraries: their extra, and a model for infer
        skip_without_extra(config.backend)
        if not HAS_EMBEDDINGS_EXTRA:
            pytest.skip(NO_EMBEDDINGS_REASON)
        infer = config.sections()[config.backend]["infer"]
        text = "Q: do configs open cleanly? A: yes" if infer else "configs open cleanly"
        with ScriptedServer(memory_library_policy(lambda said: ["Q: do configs open cleanly? A: yes"])) as server:
            agent = scripted_model_config(server)
            memory = build_memory(config, MemoryContext("s1", tmp_path / "run", "r", agent))
            try:
                memory.retain("configs open cleanly")
                assert memory.recall("configs open cleanly")[0].content == text
            finally:
                memory.close()
        return
    memory = build_memory(config, context(tmp_path))
    try:
        memory.retain("configs open cleanly")
        assert memory.recall("configs")[0].content == "configs open cleanly"
    finally:
        memory.close()
