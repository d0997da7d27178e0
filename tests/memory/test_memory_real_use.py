"""The built-in backends under real use: shared servers and paths, bad text, hung factories."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.memory import MemorySystem, RecordRejected, build_memory, open_with_timeout
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.inprocess import InProcessMemory
from pytest_evomemory.memory.postgres import table_name

from .conftest import memory_config

# --------------------------------------------------------------------------- postgres


def test_run_names_that_fold_together_get_distinct_tables() -> None:
    names = {table_name("evomemory", run, "mmlu_pro") for run in ("exp-1", "Exp_1", "exp 1", "EXP-1", "exp_1")}
    assert len(names) == 5
    assert all(name.startswith("evomemory_exp_1_mmlu_pro_") and len(name) <= 63 for name in names)
    assert table_name("evomemory", "exp-1", "mmlu_pro") == table_name("evomemory", "exp-1", "mmlu_pro")


@pytest.mark.postgres
def test_two_runs_whose_names_fold_together_keep_their_own_records(
    tmp_path: Path, postgres_settings: dict[str, Any]
) -> None:
    base = f"fold{uuid.uuid4().hex[:6]}"
    config = memory_config("postgres", postgres=postgres_settings)
    first = build_memory(config, MemoryContext("mmlu_pro", tmp_path / "a", f"{base}-1"))
    second = build_memory(config, MemoryContext("mmlu_pro", tmp_path / "b", f"{base.upper()}_1"))
    try:
        first.retain("first run: the harbor closes at noon")
        second.retain("second run: the harbor closes at dusk")
        assert [h.content for h in first.recall("harbor closes", top_k=10)] == ["first run: the harbor closes at noon"]
        assert [h.content for h in second.recall("harbor closes", top_k=10)] == [
            "second run: the harbor closes at dusk"
        ]
    finally:
        first.close()
        second.close()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("content", "metadata", "problem"),
    [
        ("a NUL \x00 in the text", None, "content contains a NUL character"),
        ("clean text", {"note": "NUL \x00 in metadata"}, "metadata contains a NUL character"),
        ("a lone surrogate \udc80", None, "content contains a lone surrogate"),
    ],
)
def test_postgres_refuses_one_unstorable_record_and_goes_on(
    tmp_path: Path, postgres_settings: dict[str, Any], content: str, metadata: dict[str, str] | None, problem: str
) -> None:
    memory = build_memory(
        memory_config("postgres", postgres=postgres_settings),
        MemoryContext("s1", tmp_path, f"nul_{uuid.uuid4().hex[:8]}"),
    )
    try:
        before = memory.retain("stored before: granite quarry")
        with pytest.raises(RecordRejected, match=f"this record was not stored: its {problem}"):
            memory.retain(content, metadata)
        after = memory.retain("stored after: granite quarry")
        assert {h.record_id for h in memory.recall("granite quarry", top_k=10)} == {before, after}
        assert len(memory) == 2  # type: ignore[arg-type]
    finally:
        memory.close()


# --------------------------------------------------------------------------- sqlite


def test_a_second_memory_on_the_same_sqlite_file_is_refused_clearly(tmp_path: Path) -> None:
    config = memory_config("sqlite", sqlite={"path": str(tmp_path / "shared-{stream}.sqlite3")})
    first = build_memory(config, MemoryContext("s1", tmp_path / "run-a", "a"))
    first_id = first.retain("first run's record about the lighthouse")
    with pytest.raises(MemoryBackendError) as refused:
        build_memory(config, MemoryContext("s1", tmp_path / "run-b", "b"))
    message = str(refused.value)
    assert "is already in use by another run or stream" in message
    assert "put '{run_name}' in sqlite.path" in message
    assert "meta already exists" not in message and "writable" not in message
    # the first run never noticed
    assert [h.record_id for h in first.recall("lighthouse")] == [first_id]
    first.close()
    again = build_memory(config, MemoryContext("s1", tmp_path / "run-b", "b"))  # free once closed
    assert again.recall("lighthouse") == []
    again.close()


def test_the_same_sqlite_file_in_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory-{stream}.sqlite3"
    config = memory_config("sqlite", sqlite={"path": str(path)})
    first = build_memory(config, MemoryContext("s1", tmp_path, "a"))
    script = (
        "from pathlib import Path\n"
        "from pytest_evomemory.core.errors import MemoryBackendError\n"
        "from pytest_evomemory.memory.sqlite import SqliteMemory\n"
        f"try:\n    SqliteMemory(Path({str(tmp_path / 'memory-s1.sqlite3')!r}))\n"
        "except MemoryBackendError as error:\n    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "already in use by another run or stream" in result.stdout, result.stderr
    first.close()


# --------------------------------------------------------------------------- hung factories


def test_a_factory_that_never_returns_is_abandoned_with_its_name() -> None:
    release = threading.Event()
    built: list[InProcessMemory] = []

    def hanging() -> MemorySystem:
        release.wait(30)
        memory = InProcessMemory()
        built.append(memory)
        return memory

    started = time.monotonic()
    with pytest.raises(MemoryBackendError, match=r"memory factory my_pkg:open_mem did not return within 0.2 s"):
        open_with_timeout(hanging, 0.2, "my_pkg:open_mem")
    assert time.monotonic() - started < 5
    release.set()
    for _ in range(100):  # the late memory is closed, not leaked
        if built:
            break
        time.sleep(0.05)
    time.sleep(0.1)
    with pytest.raises(MemoryBackendError, match="closed"):
        built[0].retain("too late")


def test_open_with_timeout_returns_the_memory_or_the_factory_error() -> None:
    memory = InProcessMemory()
    assert open_with_timeout(lambda: memory, 5, "f") is memory

    def broken() -> MemorySystem:
        raise MemoryBackendError("cannot reach the server")

    with pytest.raises(MemoryBackendError, match="cannot reach the server"):
        open_with_timeout(broken, 5, "f")
