"""``evomemory data fetch|verify|where`` against the hub stand-in on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_evomemory.cli import main
from pytest_evomemory.streams.evomemory.catalog import STREAM_ORDER, STREAMS
from pytest_evomemory.streams.evomemory.materialize import manifest_path, stream_file

from .conftest import AIME_RECORDS, FakeHub, parquet_bytes, upstream_files

REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    status = main(["data", *argv])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def test_fetch_then_verify_offline(
    hub: FakeHub, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = _run(capsys, "fetch")
    assert (status, err) == (0, [])
    assert [line.split("\t")[0] for line in out] == list(STREAM_ORDER)
    for line in out:
        name, pin, digest, rows, path = line.split("\t")
        content = upstream_files()[name]
        assert rows == {"aime_2024": "3 rows", "gpqa_diamond": "3 rows", "mmlu_pro": "4 rows"}.get(
            name, "2 rows"
        )
        assert digest == f"sha256 {hashlib.sha256(content).hexdigest()}"
        assert Path(path) == stream_file(STREAMS[name], data_dir) and Path(path).read_bytes() == content
        assert pin == ("verified" if STREAMS[name].source.pinned else "unverified (no pinned hash; sha256 recorded)")
    assert len(hub.downloads()) == 4
    hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _run(capsys, "verify")[:2] == (0, out)
    assert _run(capsys, "fetch")[:2] == (0, out)  # nothing left to download
    assert hub.requests == []


def test_verify_refuses_a_wrong_file_and_a_missing_one(
    hub: FakeHub, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "fetch", "--stream", "mmlu_pro")[0] == 0
    target = stream_file(STREAMS["mmlu_pro"], data_dir)
    genuine = target.read_bytes()
    target.write_bytes(genuine + b"\0")
    hub.requests.clear()
    status, out, err = _run(capsys, "verify", "--stream", "mmlu_pro", "--stream", "toolbench")
    assert status == 1 and out == [] and len(err) == 2
    assert err[0].startswith("evomemory data: error: stream 'mmlu_pro': ")
    assert hashlib.sha256(genuine + b"\0").hexdigest() in err[0]
    assert hashlib.sha256(genuine).hexdigest() in err[0]
    assert "stream 'toolbench'" in err[1] and "missing" in err[1] and "evomemory data fetch" in err[1]
    assert hub.requests == []  # verify never downloads
    # fetch does not overwrite the refused file either: deleting it is the user's call
    status, _, err = _run(capsys, "fetch", "--stream", "mmlu_pro")
    assert status == 1 and "is not the pinned file" in err[0] and hub.downloads() == []
    target.unlink()
    assert _run(capsys, "fetch", "--stream", "mmlu_pro")[0] == 0 and target.read_bytes() == genuine


def test_fetch_reports_each_failing_stream_and_fetches_the_rest(
    hub: FakeHub, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    status, out, err = _run(capsys, "fetch")
    assert status == 1
    assert [line.split("\t")[0] for line in out] == ["aime_2024", "mmlu_pro", "toolbench"]
    assert len(err) == 1 and "gpqa_diamond" in err[0] and "HF_TOKEN" in err[0]


def test_where_prints_paths_without_touching_anything(
    hub: FakeHub, data_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = _run(capsys, "where")
    assert (status, err) == (0, [])
    assert out[0] == f"data_dir\t{data_dir}"
    assert out[1:] == [f"{name}\t{stream_file(STREAMS[name], data_dir)}\tmissing" for name in STREAM_ORDER]
    assert not data_dir.exists() and hub.requests == []
    other = tmp_path / "elsewhere"
    status, out, _ = _run(capsys, "where", "--data-dir", str(other), "--stream", "toolbench")
    assert out == [f"data_dir\t{other}", f"toolbench\t{other / 'toolbench' / 'torchhub_eval.json'}\tmissing"]


def test_a_run_config_gives_data_dir_and_streams(
    hub: FakeHub, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVOMEMORY_DATA_DIR")
    config_dir = tmp_path / "configs"
    config_dir.mkdir()
    run = config_dir / "run.yaml"
    run.write_text(
        "name: r\nbenchmark:\n  benchmark: evomemory_single_turn\n  streams: [toolbench]\n"
        "  data_dir: ../cache\nagent:\n  kind: recall_baseline\nmemory:\n  backend: inprocess\n"
    )
    status, out, err = _run(capsys, "fetch", "--config", str(run))
    assert (status, err) == (0, [])
    assert len(out) == 1 and out[0].endswith(str(tmp_path / "cache" / "toolbench" / "torchhub_eval.json"))
    assert manifest_path(STREAMS["toolbench"], tmp_path / "cache").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--stream", "locomo"], "unknown stream(s) 'locomo'; available: aime_2024"),
        (["where", "--config", "nowhere.yaml"], "nowhere.yaml"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    hub: FakeHub, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == [] and len(err) == 1 and message in err[0]


def test_a_benchmark_without_upstream_files_is_a_usage_error(
    hub: FakeHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = tmp_path / "run.yaml"
    run.write_text("name: r\nbenchmark:\n  benchmark: sample\nagent:\n  kind: recall_baseline\n")
    status, _, err = _run(capsys, "fetch", "--config", str(run))
    assert status == 2 and "benchmark 'sample' has no upstream data files" in err[0]


def test_missing_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["data"])
    assert caught.value.code == 2
    assert "evomemory data: error:" in capsys.readouterr().err


def test_the_console_command(hub: FakeHub, data_dir: Path) -> None:
    """As CI runs it: a separate process, configured only by the environment (so with
    the catalog's own record count: the stand-in serves 30 invented AIME rows)."""
    thirty = [dict(AIME_RECORDS[index % 3], id=100 + index) for index in range(30)]
    hub.put(STREAMS["aime_2024"], parquet_bytes(thirty))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "pytest_evomemory.cli", "data", "fetch", "--stream", "aime_2024"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("aime_2024\tunverified") and result.stderr == ""
    assert stream_file(STREAMS["aime_2024"], data_dir).read_bytes() == parquet_bytes(thirty)


def test_the_benchmarks_with_upstream_files_come_from_the_registry(
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """``--benchmark``'s choices are the registry's benchmarks with upstream files
    (``BenchmarkSpec.upstream_files``), not a list kept beside it."""
    from pytest_evomemory.streams import BENCHMARKS, BenchmarkSpec, get_source

    BENCHMARKS.register("mirror", BenchmarkSpec("mirror", lambda: get_source("sample"), upstream_files=True))
    request.addfinalizer(lambda: BENCHMARKS.unregister("mirror"))
    with pytest.raises(SystemExit) as refused:
        main(["data", "where", "--benchmark", "sample"])
    assert refused.value.code == 2
    assert "(choose from 'evomemory_single_turn', 'locomo', 'mirror')" in capsys.readouterr().err
    # a benchmark with upstream files that neither downloader knows is refused in one line
    status, out, err = _run(capsys, "where", "--benchmark", "mirror")
    assert (status, out) == (2, [])
    assert err == ["evomemory data: error: benchmark 'mirror' has no upstream data files to fetch"]
