"""``benchmark: locomo`` with ``path:``: the user's own file in LoCoMo's format, read as
it is (no download, no pin) through the reader the pinned file goes through. Driven
in process through ``evomemory run`` (:func:`pytest_evomemory.cli.main`); the user's
file is the bundled sample (written for this package, no LoCoMo content) copied, or
edited, in LoCoMo's README layout."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory.cli import main
from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.locomo import SAMPLE_FILE


def _config(directory: Path, benchmark: dict[str, Any]) -> Path:
    """A run config in ``directory`` with the recall baseline and the in-process memory."""
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "name": "mine", "benchmark": benchmark,
        "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"},
        "memory": {"backend": "inprocess"},
    }
    path = directory / "mine.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _user_file(path: Path, edit: Any = None) -> Path:
    """The sample's conversations written to ``path`` (``edit`` may change the list first)."""
    document = json.loads(SAMPLE_FILE.read_text(encoding="utf-8"))
    if edit is not None:
        edit(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def _scores(run_dir: Path) -> dict[tuple[str, str], tuple[Any, ...]]:
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return {
        (row["stream"], row["task_id"]): (row["value"], row["correct"], row["details"]["f1"], row["extracted"])
        for row in rows
    }


def test_a_user_file_holding_the_samples_content_scores_as_the_sample_with_its_own_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the path is relative to the config, not to the directory the command runs in
    data = _user_file(tmp_path / "project" / "data" / "mine.json")
    config = _config(tmp_path / "project", {"benchmark": "locomo", "path": "data/mine.json"})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    sample, mine = tmp_path / "sample", tmp_path / "mine"
    assert main(["run", "-q", "--config", "locomo_sample_memory", "--output-dir", str(sample)]) == 0
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(mine)]) == 0, capsys.readouterr()

    assert _scores(mine) == _scores(sample) and len(_scores(mine)) == 15
    run = json.loads((mine / "run.json").read_text(encoding="utf-8"))
    assert [stream["name"] for stream in run["streams"]] == ["conv-sample-1", "conv-sample-2"]
    provenance = run["streams"][0]["provenance"]
    assert provenance["file"] == str(data.resolve())
    assert provenance["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert (provenance["pinned"], provenance["verified"], provenance["repository"]) == (False, False, None)
    assert run["run"]["benchmark"]["path"] == "data/mine.json"  # as written: a moved checkout resumes


def test_limit_and_ingest_apply_to_a_user_file_as_to_the_pinned_one(tmp_path: Path) -> None:
    data = _user_file(tmp_path / "mine.json")
    config = BenchmarkConfig(benchmark="locomo", path=data.name, limit=2, ingest="agent", streams=["conv-sample-2"])
    (stream,) = load_benchmark(config, tmp_path)
    assert stream.name == "conv-sample-2" and [s.task_id for s in stream.samples] == ["q001", "q002"]
    assert stream.ingestion_ids  # ingest: agent gives ingestion turns


def test_a_zip_of_one_file_per_conversation_is_read_as_the_pinned_zip(tmp_path: Path) -> None:
    document = json.loads(SAMPLE_FILE.read_text(encoding="utf-8"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for number, sample in enumerate(document, 1):
            archive.writestr(f"convs/{number}.json", json.dumps({**sample["conversation"], "qa": sample["qa"]}))
    (tmp_path / "mine.zip").write_bytes(buffer.getvalue())
    streams = load_benchmark(BenchmarkConfig(benchmark="locomo", path="mine.zip"), tmp_path)
    assert [(stream.name, len(stream.samples)) for stream in streams] == [("conv-1", 9), ("conv-2", 6)]


def _drop_answer(document: list[dict[str, Any]]) -> None:
    del document[1]["qa"][2]["answer"]


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (lambda path: _user_file(path, _drop_answer), "mine.json: conv-sample-2: qa[2]: a category"),
        (lambda path: path.write_text("[{", encoding="utf-8"), "mine.json: unreadable (JSONDecodeError"),
        (lambda path: None, "mine.json does not exist; check 'path'"),
    ],
    ids=["question-without-answer", "not-json", "missing"],
)
def test_a_malformed_user_file_is_refused_before_any_task_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write: Any, expected: str
) -> None:
    (tmp_path / "data").mkdir()
    write(tmp_path / "data" / "mine.json")
    config = _config(tmp_path, {"benchmark": "locomo", "path": "data/mine.json"})
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and str(tmp_path / "data" / "mine.json") in err, err
    assert "Traceback" not in err and not (tmp_path / "out" / "scores.jsonl").exists()


@pytest.mark.parametrize(
    ("benchmark", "expected"),
    [
        ({"benchmark": "locomo", "path": "mine.txt"}, "key 'path'"),
        ({"benchmark": "locomo", "path": "mine.json", "data_dir": "cache"}, "key 'data_dir'"),
        ({"benchmark": "locomo_sample", "path": "mine.json"}, "key 'path' is read only by benchmark locomo"),
    ],
    ids=["other-suffix", "with-data-dir", "under-locomo-sample"],
)
def test_a_path_the_benchmark_cannot_read_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmark: dict[str, Any], expected: str
) -> None:
    _user_file(tmp_path / "mine.json")
    config = _config(tmp_path, benchmark)
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(tmp_path / "out")]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err


def test_a_resume_on_an_edited_user_file_is_refused_and_on_the_same_file_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _user_file(tmp_path / "mine.json")
    config = _config(tmp_path, {"benchmark": "locomo", "path": "mine.json", "streams": ["conv-sample-2"]})
    out = tmp_path / "out"
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(out), "--limit", "2"]) == 0
    assert main(["run", "-q", f"--resume={out}"]) == 0  # the same bytes: the run goes on
    kept = data.read_bytes()

    def edit(document: list[dict[str, Any]]) -> None:
        document[1]["qa"][0]["answer"] = "another answer"

    _user_file(data, edit)
    capsys.readouterr()
    assert main(["run", "-q", f"--resume={out}"]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"data file {data.resolve()} changed since the interrupted run" in err, err
    data.write_bytes(kept)
    shutil.rmtree(out / "history", ignore_errors=True)
    assert main(["run", "-q", f"--resume={out}"]) == 0


def test_a_resume_on_an_edited_files_stream_is_refused_as_for_a_locomo_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check is one for every unpinned local file (rundir/resumestate.py):
    ``benchmark: files`` streams are refused the same way."""
    data = tmp_path / "tasks.jsonl"
    data.write_text('{"id": "t1", "prompt": "2+2?", "target": "4"}\n', encoding="utf-8")
    config = _config(tmp_path, {"benchmark": "files", "files": [{"name": "mine", "path": "tasks.jsonl"}]})
    out = tmp_path / "out"
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(out)]) in (0, 1)
    data.write_text('{"id": "t1", "prompt": "2+3?", "target": "5"}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["run", "-q", f"--resume={out}"]) == 4
    assert "stream 'mine': its data file" in capsys.readouterr().err
