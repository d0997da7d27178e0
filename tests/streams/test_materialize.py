"""Materialization: first-use download, offline reuse, corruption, gating, abort."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pytest_evomemory.benchmarks import load_benchmark
from pytest_evomemory.benchmarks.evomemory import EvoMemorySingleTurn
from pytest_evomemory.benchmarks.evomemory.materialize import (
    default_data_dir,
    manifest_path,
    materialize,
    resolve_data_dir,
    stream_file,
)
from pytest_evomemory.benchmarks.evomemory.sources import SOURCES, STREAM_ORDER
from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.errors import DataError

from .conftest import FakeHub, upstream_files


def _load(tmp_path: Path, **settings: object) -> list:  # type: ignore[type-arg]
    config = BenchmarkConfig(benchmark="evomemory_single_turn", **settings)  # type: ignore[arg-type]
    return load_benchmark(config, tmp_path)


def test_first_use_downloads_every_stream_in_upstream_layout(
    hub: FakeHub, data_dir: Path, tmp_path: Path
) -> None:
    streams = _load(tmp_path)
    assert [s.name for s in streams] == list(STREAM_ORDER)
    assert [len(s) for s in streams] == [3, 3, 3, 2]  # MMLU-Pro: the paper's 3 categories
    for name in STREAM_ORDER:
        spec = SOURCES[name]
        target = stream_file(spec, data_dir)
        assert target.read_bytes() == upstream_files()[name]
        manifest = json.loads(manifest_path(spec, data_dir).read_text())
        assert manifest["revision"] == spec.revision and manifest["size"] == target.stat().st_size
        assert f"/datasets/{spec.repo_id}/resolve/{spec.revision}/{spec.filename}" in hub.downloads()
    assert not list((data_dir / ".tmp").iterdir())  # scratch downloads are cleaned up


def test_cached_files_are_reused_without_network(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _load(tmp_path)
    hub.requests.clear()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    second = _load(tmp_path)
    assert hub.requests == []
    assert [s.samples for s in second] == [s.samples for s in first]


def test_corrupt_file_is_detected_and_fetched_again(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    _load(tmp_path)
    spec = SOURCES["mmlu_pro"]
    target = stream_file(spec, data_dir)
    good = target.read_bytes()
    target.write_bytes(good[: len(good) // 2])  # a partial download
    hub.requests.clear()
    streams = _load(tmp_path)
    assert target.read_bytes() == good
    assert hub.downloads() == [f"/datasets/{spec.repo_id}/resolve/{spec.revision}/{spec.filename}"]
    assert len(streams[2]) == 3


def test_file_without_manifest_is_validated_not_trusted(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    spec = SOURCES["toolbench"]
    target = stream_file(spec, data_dir)
    target.parent.mkdir(parents=True)
    target.write_bytes(b'{"code": "###Instruction: cut')  # copied by hand, truncated
    _, records = materialize(spec, data_dir)
    assert len(records) == 2
    assert target.read_bytes() == upstream_files()["toolbench"]


def test_hand_copied_valid_file_is_adopted_offline(
    hub: FakeHub, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = SOURCES["aime_2024"]
    target = stream_file(spec, data_dir)
    target.parent.mkdir(parents=True)
    target.write_bytes(upstream_files()["aime_2024"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, records = materialize(spec, data_dir)
    assert len(records) == 3 and manifest_path(spec, data_dir).is_file()
    assert hub.requests == []


def test_offline_says_what_is_missing(
    hub: FakeHub, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as caught:
        _load(tmp_path)
    message = str(caught.value)
    for name in STREAM_ORDER:
        spec = SOURCES[name]
        assert f"stream {name!r}" in message and str(stream_file(spec, data_dir)) in message
    assert "HF_HUB_OFFLINE" in message and hub.requests == []


def test_gated_without_token_says_what_to_do(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(DataError) as caught:
        _load(tmp_path)
    message = str(caught.value)
    assert "stream 'gpqa_diamond'" in message and "401" in message
    assert (
        "accept" in message and "HF_TOKEN" in message and "huggingface.co/datasets/Idavidrein/gpqa" in message
    )
    assert "'aime_2024'" not in message  # the other streams were fine


def test_gated_with_token_lacking_access(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_someone_else")
    with pytest.raises(DataError, match=r"gpqa_diamond.*403.*not been granted access"):
        _load(tmp_path)


def test_one_missing_stream_aborts_the_whole_load(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    hub.remove(SOURCES["toolbench"])
    with pytest.raises(DataError) as caught:
        EvoMemorySingleTurn().load(BenchmarkConfig(), tmp_path, list(STREAM_ORDER))
    message = str(caught.value)
    assert "stream 'toolbench'" in message and "torchhub_eval.json" in message
    assert "all four evomemory_single_turn streams are required" in message


def test_unreachable_hub_names_endpoint(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # huggingface_hub's retry backoff
    with pytest.raises(DataError, match=r"127\.0\.0\.1:9 could not be reached"):
        materialize(SOURCES["aime_2024"], tmp_path / "elsewhere")


def test_garbage_from_the_hub_is_never_installed(hub: FakeHub, data_dir: Path) -> None:
    spec = SOURCES["mmlu_pro"]
    hub.put(spec, b"PAR1 this is not parquet")
    with pytest.raises(DataError, match=r"mmlu_pro.*unusable"):
        materialize(spec, data_dir)
    assert not stream_file(spec, data_dir).exists()


def test_concurrent_materialization_downloads_once(hub: FakeHub, data_dir: Path) -> None:
    spec = SOURCES["mmlu_pro"]
    results: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(len(materialize(spec, data_dir)[1]))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and results == [4, 4, 4, 4]
    assert len(hub.downloads()) == 1


def test_data_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVOMEMORY_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_data_dir(None, tmp_path) == default_data_dir()
    assert default_data_dir() == tmp_path / "cache" / "pytest-evomemory" / "evomemory" / "single_turn"
    assert resolve_data_dir("d", tmp_path / "runs") == (tmp_path / "runs" / "d").resolve()
    monkeypatch.setenv("EVOMEMORY_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir("d", tmp_path) == (tmp_path / "env").resolve()
