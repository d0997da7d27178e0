"""Materialization: first-use download, offline reuse, pins, refusals, gating, abort."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.core.errors import DataError
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.streams.evomemory import EvoMemorySingleTurn, catalog, load_stream
from pytest_evomemory.streams.evomemory.catalog import STREAM_ORDER, STREAMS
from pytest_evomemory.streams.evomemory.materialize import (
    default_data_dir,
    manifest_path,
    materialize,
    resolve_data_dir,
    stream_file,
)
from pytest_evomemory.streams.evomemory.sources import HubFile
from pytest_evomemory.streams.evomemory.stream import ConvertOptions

from .conftest import AIME_RECORDS, MMLU_RECORDS, FakeHub, parquet_bytes, pin_to, upstream_files


def _load(tmp_path: Path, **settings: object) -> list[Stream]:
    config = BenchmarkConfig(benchmark="evomemory_single_turn", **settings)  # type: ignore[arg-type]
    return load_benchmark(config, tmp_path)


def _sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _place(data_dir: Path, name: str, content: bytes) -> Path:
    target = stream_file(STREAMS[name], data_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return target


def _edited_mmlu_pro() -> bytes:
    """The invented MMLU-Pro file with one answer changed: parses fine, wrong bytes."""
    records = [dict(record) for record in MMLU_RECORDS]
    records[2]["answer"], records[2]["answer_index"] = "D", 3
    return parquet_bytes(records)


def test_the_catalog_pins() -> None:
    """The pins themselves, as verified against the genuine upstream files (issue 15)."""
    mmlu, gpqa = STREAMS["mmlu_pro"].source, STREAMS["gpqa_diamond"].source
    assert mmlu.revision == "b189ec765aa7ed75c8acfea42df31fdae71f97be"
    assert (mmlu.size, mmlu.sha256) == (
        4_144_185,
        "0e24a191921c2f453518a537a8b2117bd137e7714d4ef1565e9ba06c1ecb9ad8",
    )
    assert gpqa.revision.startswith("633f5ee") and (gpqa.size, gpqa.sha256) == (
        1_373_492,
        "41d1213cd7a4998605a26c2798500652572007161b3a92817ba46b35befcd305",
    )
    assert not STREAMS["aime_2024"].source.pinned and not STREAMS["toolbench"].source.pinned


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"revision": "main"}, "40-hex commit"),
        ({"sha256": "0E24", "size": 1}, "64 lower-case hex"),
        ({"sha256": "0" * 64}, "both size and sha256"),
    ],
)
def test_a_malformed_pin_fails_at_declaration(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(STREAMS["aime_2024"].source, **change)  # type: ignore[arg-type]


def test_first_use_downloads_every_stream_in_upstream_layout(
    hub: FakeHub, data_dir: Path, tmp_path: Path
) -> None:
    streams = _load(tmp_path)
    assert [s.name for s in streams] == list(STREAM_ORDER)
    assert [len(s) for s in streams] == [3, 3, 3, 2]  # MMLU-Pro: the paper's 3 categories
    for name in STREAM_ORDER:
        spec = STREAMS[name]
        target = stream_file(spec, data_dir)
        assert target.read_bytes() == upstream_files()[name]
        manifest = json.loads(manifest_path(spec, data_dir).read_text())
        assert manifest["revision"] == spec.source.revision and manifest["size"] == target.stat().st_size
        assert manifest["sha256"] == _sha(target.read_bytes())
        assert manifest["verified"] is spec.source.pinned
        source = spec.source
        assert f"/datasets/{source.repo_id}/resolve/{source.revision}/{source.filename}" in hub.downloads()
    assert not list((data_dir / ".tmp").iterdir())  # scratch downloads are cleaned up


def test_provenance_of_each_stream(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    streams = {s.name: s for s in _load(tmp_path, limit=2)}
    mmlu = streams["mmlu_pro"].provenance
    content = upstream_files()["mmlu_pro"]
    assert mmlu == {
        "repository": "TIGER-Lab/MMLU-Pro",
        "revision": STREAMS["mmlu_pro"].source.revision,
        "file": "data/test-00000-of-00001.parquet",
        "path": str(stream_file(STREAMS["mmlu_pro"], data_dir)),
        "size": len(content),
        "sha256": _sha(content),
        "pinned": True,
        "verified": True,
        "rows_read": 4,
        "tasks_converted": 3,
        "tasks_selected": 2,
        "settings": {"categories": ["economics", "engineering", "philosophy"]},
        "breakdown": "category",
    }
    assert streams["gpqa_diamond"].provenance["settings"] == {"seed": 0}
    aime = streams["aime_2024"].provenance
    assert aime["verified"] is False and aime["pinned"] is False
    assert aime["sha256"] == _sha(upstream_files()["aime_2024"]) and aime["settings"] == {}
    assert streams["mmlu_pro"].breakdown == "category" and streams["aime_2024"].breakdown is None


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
    assert [s.provenance for s in second] == [s.provenance for s in first]


@pytest.mark.parametrize("name", ["mmlu_pro", "gpqa_diamond"])
def test_a_wrong_hand_placed_file_is_refused_with_both_hashes(
    hub: FakeHub, data_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    genuine = upstream_files()[name]
    wrong = _edited_mmlu_pro() if name == "mmlu_pro" else genuine.replace(b"Bluezine", b"Bluezene")
    target = _place(data_dir, name, wrong)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as caught:
        materialize(STREAMS[name], data_dir)
    message = str(caught.value)
    assert f"stream {name!r}" in message and str(target) in message
    assert _sha(wrong) in message and _sha(genuine) in message  # both hashes
    assert f"({len(wrong)} bytes)" in message and f"({len(genuine)} bytes)" in message
    assert "evomemory data fetch" in message and f"delete {target}" in message
    assert "\n" not in message
    assert target.read_bytes() == wrong  # the user's file is never replaced silently
    assert hub.requests == []


def test_an_edited_answer_is_refused_not_adopted(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    """Issue 15: an edited MMLU-Pro answer used to be adopted silently."""
    _load(tmp_path)
    target = _place(data_dir, "mmlu_pro", _edited_mmlu_pro())
    with pytest.raises(DataError, match=r"mmlu_pro.*is not the pinned file.*sha256 is " + _sha(target.read_bytes())):
        _load(tmp_path)


def test_a_truncated_pinned_file_is_refused(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    _load(tmp_path)
    target = stream_file(STREAMS["mmlu_pro"], data_dir)
    good = target.read_bytes()
    target.write_bytes(good[: len(good) // 2])
    hub.requests.clear()
    with pytest.raises(DataError, match=rf"{len(good) // 2} bytes\), the pin is sha256 {_sha(good)}"):
        _load(tmp_path)
    assert hub.downloads() == []


def test_an_unpinned_file_that_changed_since_recorded_is_refused(
    hub: FakeHub, data_dir: Path, tmp_path: Path
) -> None:
    _load(tmp_path)
    target = stream_file(STREAMS["toolbench"], data_dir)
    recorded = target.read_bytes()
    changed = recorded.replace(b"fruit_r18", b"fruit_r50")
    target.write_bytes(changed)
    with pytest.raises(DataError) as caught:
        _load(tmp_path)
    message = str(caught.value)
    assert "stream 'toolbench'" in message and "changed since it was recorded" in message
    assert _sha(changed) in message and _sha(recorded) in message


def test_an_unreadable_hand_placed_file_is_refused(hub: FakeHub, data_dir: Path) -> None:
    target = _place(data_dir, "toolbench", b'{"code": "###Instruction: cut')  # copied by hand, truncated
    with pytest.raises(DataError, match=r"'toolbench'.*is unreadable.*line 1 is not valid JSON.*delete"):
        materialize(STREAMS["toolbench"], data_dir)
    assert target.read_bytes() == b'{"code": "###Instruction: cut' and hub.downloads() == []


@pytest.mark.parametrize("name", ["aime_2024", "mmlu_pro"])
def test_hand_copied_good_file_is_adopted_offline(
    hub: FakeHub, data_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    _place(data_dir, name, upstream_files()[name])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local, records = materialize(STREAMS[name], data_dir)
    assert len(records) in {3, 4} and hub.requests == []
    manifest = json.loads(manifest_path(STREAMS[name], data_dir).read_text())
    assert manifest["sha256"] == local.sha256 == _sha(upstream_files()[name])
    assert manifest["verified"] is local.verified is STREAMS[name].source.pinned


def test_an_older_pins_download_is_replaced(hub: FakeHub, data_dir: Path, tmp_path: Path) -> None:
    """Moving a pin (MMLU-Pro 497c01e -> b189ec7) refreshes our own cached download."""
    _load(tmp_path)
    manifest_file = manifest_path(STREAMS["mmlu_pro"], data_dir)
    manifest = json.loads(manifest_file.read_text())
    manifest["revision"] = "497c01e319905c102d71cac17c1eb89be1d79f39"
    manifest_file.write_text(json.dumps(manifest))
    target = _place(data_dir, "mmlu_pro", _edited_mmlu_pro())  # the old revision's bytes
    hub.requests.clear()
    (stream,) = _load(tmp_path, streams=["mmlu_pro"])
    assert target.read_bytes() == upstream_files()["mmlu_pro"] and len(hub.downloads()) == 1
    assert stream.provenance["verified"] is True
    assert json.loads(manifest_file.read_text())["revision"] == STREAMS["mmlu_pro"].source.revision


def test_a_download_that_differs_from_the_pin_is_never_installed(hub: FakeHub, data_dir: Path) -> None:
    genuine = upstream_files()["mmlu_pro"]
    served = _edited_mmlu_pro()
    hub.put(STREAMS["mmlu_pro"], served)  # e.g. a mirror set via HF_ENDPOINT
    with pytest.raises(DataError) as caught:
        materialize(STREAMS["mmlu_pro"], data_dir)
    message = str(caught.value)
    assert _sha(served) in message and _sha(genuine) in message and hub.url in message
    assert "not installed" in message and "HF_ENDPOINT" in message
    assert not stream_file(STREAMS["mmlu_pro"], data_dir).exists()
    assert not list((data_dir / ".tmp").iterdir())


def test_pins_are_read_from_the_catalog_at_load_time(
    hub: FakeHub, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no pin, the same wrong bytes load, recorded as unverified."""
    pin_to(monkeypatch, "mmlu_pro", None)
    hub.put(catalog.STREAMS["mmlu_pro"], _edited_mmlu_pro())
    (stream,) = _load(tmp_path, streams=["mmlu_pro"])
    assert stream.provenance["verified"] is False
    assert stream.provenance["sha256"] == _sha(_edited_mmlu_pro())


def test_offline_says_what_is_missing(
    hub: FakeHub, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as caught:
        _load(tmp_path)
    message = str(caught.value)
    for name in STREAM_ORDER:
        assert f"stream {name!r}" in message and str(stream_file(STREAMS[name], data_dir)) in message
    assert "HF_HUB_OFFLINE" in message and "evomemory data fetch" in message and hub.requests == []


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
    hub.remove(STREAMS["toolbench"])
    with pytest.raises(DataError) as caught:
        EvoMemorySingleTurn().load(BenchmarkConfig(), tmp_path, list(STREAM_ORDER))
    message = str(caught.value)
    assert "stream 'toolbench'" in message and "torchhub_eval.json" in message
    assert "all 4 evomemory_single_turn streams are required" in message


def test_unreachable_hub_names_endpoint(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # huggingface_hub's retry backoff
    with pytest.raises(DataError, match=r"127\.0\.0\.1:9 could not be reached"):
        materialize(STREAMS["aime_2024"], tmp_path / "elsewhere")


def test_garbage_from_the_hub_is_never_installed(hub: FakeHub, data_dir: Path) -> None:
    spec = STREAMS["aime_2024"]  # unpinned: only parsing can tell
    hub.put(spec, b"PAR1 this is not parquet")
    with pytest.raises(DataError, match=r"aime_2024.*unusable"):
        materialize(spec, data_dir)
    assert not stream_file(spec, data_dir).exists()


def test_concurrent_materialization_downloads_once(hub: FakeHub, data_dir: Path) -> None:
    spec = STREAMS["mmlu_pro"]
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


def test_hub_file_where_is_short() -> None:
    source = HubFile("o/r", "a" * 40, "f.csv", "csv")
    assert source.where == "o/r@aaaaaaaaaaaa:f.csv" and source.page_url == "https://huggingface.co/datasets/o/r"


def _refused_port() -> str:
    """An endpoint on 127.0.0.1 where nothing listens: connecting fails at once."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_an_unreachable_hub_is_probed_once_and_no_stream_waits_for_retries(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network: one short probe, no download attempt (each would retry for half a
    minute), and one line per stream under the cause, said once."""
    from pytest_evomemory.streams.evomemory import hub as hub_module

    endpoint = _refused_port()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    probes: list[float] = []
    real_probe = hub_module.probe_hub
    monkeypatch.setattr(hub_module, "probe_hub", lambda timeout=5.0: probes.append(timeout) or real_probe(timeout))

    def no_download(*args: object) -> None:
        raise AssertionError("a download was attempted although the hub cannot be reached")

    monkeypatch.setattr(sys.modules[stream_file.__module__], "download", no_download)
    with pytest.raises(DataError) as caught:
        EvoMemorySingleTurn().load(BenchmarkConfig(), tmp_path, list(STREAM_ORDER))
    assert len(probes) == 1
    head, *lines = str(caught.value).splitlines()
    assert "all 4 evomemory_single_turn streams are required and 4 could not be loaded" in head
    assert head.count(endpoint) == 1 and "could not be reached" in head and "HF_HUB_OFFLINE=1" in head
    assert [line.split("'")[1] for line in lines] == list(STREAM_ORDER)
    assert all(line.startswith("  stream '") and line.endswith(" is missing") for line in lines)


def test_a_download_that_loses_the_connection_stops_the_other_streams_trying(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx2

    calls: list[str] = []

    def lost(source: object, directory: Path) -> Path:
        calls.append(str(source))
        raise httpx2.ConnectError("[Errno 101] Network is unreachable")

    monkeypatch.setattr(sys.modules[stream_file.__module__], "download", lost)
    with pytest.raises(DataError) as caught:
        EvoMemorySingleTurn().load(BenchmarkConfig(), tmp_path, list(STREAM_ORDER))
    assert len(calls) == 1  # the hub answered the probe, then the first download lost it
    lines = str(caught.value).splitlines()
    assert len(lines) == 5  # the header, then one line per stream
    assert lines[1].startswith("  stream 'aime_2024': cannot download") and "Network is unreachable" in lines[1]
    for line in lines[2:]:
        assert "is missing and cannot be downloaded" in line and "could not be reached (ConnectError" in line


def test_hf_hub_offline_probes_nothing(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_evomemory.streams.evomemory import hub as hub_module

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_module, "probe_hub", lambda timeout=5.0: pytest.fail("probed although offline"))
    with pytest.raises(DataError) as caught:
        EvoMemorySingleTurn().load(BenchmarkConfig(), tmp_path, list(STREAM_ORDER))
    lines = str(caught.value).splitlines()
    assert len(lines) == 5 and all("HF_HUB_OFFLINE is set" in line for line in lines[1:])


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(float("nan"), r"task '60': the target 'nan' is not an integer"), (None, r"record 0: field 'answer' is empty")],
    ids=["nan_answer", "missing_answer"],
)
def test_a_hand_copied_file_with_an_unusable_answer_names_the_file_and_the_way_out(
    hub: FakeHub, data_dir: Path, monkeypatch: pytest.MonkeyPatch, answer: object, expected: str
) -> None:
    """An AIME answer cell that is NaN was read as the target 'nan' and every answer
    scored wrong; an empty one named neither the file nor what to do."""
    records = [dict(record) for record in AIME_RECORDS]
    for record in records:  # a column of numbers, one of them missing (NaN), as a spreadsheet export writes
        record["answer"] = None if answer is None else float(record["answer"])
    records[0]["answer"] = answer
    target = _place(data_dir, "aime_2024", parquet_bytes(records))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match=expected + r".*\(in " + re.escape(str(target)) + r"\); delete "):
        load_stream(STREAMS["aime_2024"], data_dir, ConvertOptions(), None)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("verified file replaced by a directory", r"test-00000-of-00001.parquet is a directory where a file is expected"),
        ("manifest replaced by a directory", r"evomemory-source.json is a directory where a file is expected"),
        ("stream folder replaced by a file", r"mmlu_pro/data \(or a folder on its way\) is a file where a directory"),
        ("download folder replaced by a file", r"\.tmp \(or a folder on its way\) is a file where a directory"),
    ],
)
def test_a_data_cache_damaged_by_hand_is_one_line_naming_the_place(
    hub: FakeHub, data_dir: Path, tmp_path: Path, damage: str, message: str
) -> None:
    """An OSError from the cache was a traceback (IsADirectoryError, FileExistsError)."""
    _load(tmp_path)
    target = stream_file(STREAMS["mmlu_pro"], data_dir)
    if damage.startswith("verified file"):
        target.unlink()
        target.mkdir()
        (target / "x").write_text("x")
    elif damage.startswith("manifest"):
        manifest = manifest_path(STREAMS["mmlu_pro"], data_dir)
        manifest.unlink()
        manifest.mkdir()
    elif damage.startswith("stream folder"):
        shutil.rmtree(target.parent)
        target.parent.write_text("x")
    else:
        shutil.rmtree(data_dir / ".tmp", ignore_errors=True)
        (data_dir / ".tmp").write_text("x")
        target.unlink()
    with pytest.raises(DataError, match=message) as refused:
        _load(tmp_path)
    assert "\n" not in str(refused.value) and "remove or replace what is in the way" in str(refused.value)
