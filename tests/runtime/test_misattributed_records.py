"""Run files that are whole and add up, but belong to another run or name other
tasks: ``evomemory report``, ``compare``, ``table``, ``merge`` and ``run --resume``
refuse them in one line naming the files, instead of showing one run's numbers
under another's settings or pairing a task with another task's result.

Complements test_record_damage.py (lines that are no record, records that do not
add up to summary.json): these damages keep every count right.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import CONFIGS, REPO, SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN

LIMIT = ["--limit", "3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two finished runs of different configs (a, b) and the two shards of a's session."""
    root = tmp_path_factory.mktemp("runs")
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), *LIMIT, "--output-dir", str(root / "a"), "-q"]) == 0
    assert evomemory(["run", "--config", str(SAMPLE_NO_MEMORY_RUN), *LIMIT, "--output-dir", str(root / "b"), "-q"]) == 0
    for index in (1, 2):
        shard = ["--shard", f"{index}/2", "--output-dir", str(root / f"s{index}")]
        assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), *LIMIT, *shard, "-q"]) == 0
    return root


def _copy(runs: Path, tmp_path: Path) -> Path:
    for name in ("a", "b", "s1", "s2"):
        shutil.copytree(runs / name, tmp_path / name)
    return tmp_path


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], status: int, *expected: str) -> None:
    capsys.readouterr()
    assert evomemory(argv) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(text in err for text in expected), err


def _edit_lines(path: Path, change: Callable[[list[dict[str, object]]], None]) -> None:
    records = [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]
    change(records)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="ascii")


@pytest.mark.parametrize("document", ["run.json", "summary.json"])
def test_a_document_copied_from_another_run_is_refused_by_every_reader(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str
) -> None:
    """run.json of the no-memory run copied into the memory run: report, compare and
    table showed the memory run's numbers under the other's settings, and a resume
    rewrote summary.json naming the no-memory run with the memory run's accuracy."""
    work = _copy(runs, tmp_path)
    shutil.copy(work / "b" / document, work / "a" / document)
    before = {path: path.read_bytes() for path in (work / "a").rglob("*") if path.is_file()}
    says = ("a/summary.json and", "a/run.json are not of one run", "one was copied from another run")
    _refused(capsys, ["report", str(work / "a"), "-o", str(tmp_path / "r.html")], 2, *says)
    _refused(capsys, ["compare", str(work / "b"), str(work / "a"), "-o", str(tmp_path / "c.html")], 2, *says)
    _refused(capsys, ["table", str(work / "a"), str(work / "b")], 2, *says)
    _refused(capsys, ["run", "--resume", str(work / "a"), "-q"], 4, *says)
    assert {path: path.read_bytes() for path in (work / "a").rglob("*") if path.is_file()} == before
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "c.html").exists()


def _swap_first_two(records: list[dict[str, object]]) -> None:
    first, second = records[0], records[1]
    first["task_id"], second["task_id"] = second["task_id"], first["task_id"]


def _rename_first(records: list[dict[str, object]]) -> None:
    records[0]["task_id"] = "not_in_the_stream"


@pytest.mark.parametrize("change", [_swap_first_two, _rename_first], ids=["ids_swapped", "task_not_in_stream"])
def test_scores_that_add_up_but_name_other_tasks_are_refused(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Callable[[list[dict[str, object]]], None]
) -> None:
    """Every count still agrees with summary.json: a comparison paired each task
    with whatever record carried its id, and a merge kept a task that never ran."""
    work = _copy(runs, tmp_path)
    _edit_lines(work / "a" / "scores.jsonl", change)
    _edit_lines(work / "s1" / "scores.jsonl", change)
    says = ("scores.jsonl: the task ids of stream", "are not the tasks run.json records")
    _refused(capsys, ["report", str(work / "a"), "-o", str(tmp_path / "r.html")], 2, *says)
    _refused(capsys, ["compare", str(work / "b"), str(work / "a"), "-o", str(tmp_path / "c.html")], 2, *says)
    merge = ["merge", str(work / "s1"), str(work / "s2"), "--output-dir", str(tmp_path / "m")]
    _refused(capsys, merge, 2, "shard 1/2", *says)
    assert not (tmp_path / "m" / "summary.json").exists()


def _responses_of_another_task(shard: Path) -> None:
    _edit_lines(shard / "responses.jsonl", _rename_first)


def _another_streams_transcript(shard: Path) -> None:
    (mine,) = (shard / "transcripts").glob("*.jsonl")
    (theirs,) = (shard.parent / "s2" / "transcripts").glob("*.jsonl")
    shutil.copy(theirs, mine)


def _summary_cut(shard: Path) -> None:
    data = (shard / "summary.json").read_bytes()
    (shard / "summary.json").write_bytes(data[: len(data) // 2])


def _run_json_of_a_newer_schema(shard: Path) -> None:
    document = json.loads((shard / "run.json").read_text())
    (shard / "run.json").write_text(json.dumps({**document, "schema_version": 99}))


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_responses_of_another_task, "responses.jsonl holds a task turn of 'sample_facts' 'not_in_the_stream', a task with no score"),
        (_another_streams_transcript, "the turns in transcripts/sample_facts.jsonl are not those responses.jsonl records"),
        (_summary_cut, "s1/summary.json is damaged (not a JSON object)"),
        (_run_json_of_a_newer_schema, "s1/run.json has schema version 99, newer than this pytest-evomemory understands (2); upgrade"),
    ],
    ids=["response_of_no_task", "transcript_of_another_stream", "summary_cut", "newer_schema"],
)
def test_merge_refuses_a_shard_whose_files_are_not_its_own(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None], says: str
) -> None:
    """The counts agree; the merge copied another stream's transcript under this
    one's name, and a cut summary.json was reported as a shard "still running"."""
    work = _copy(runs, tmp_path)
    assert {path.stem for path in (work / "s1" / "transcripts").glob("*.jsonl")} == {"sample_facts"}
    damage(work / "s1")
    _refused(capsys, ["merge", str(work / "s1"), str(work / "s2"), "--output-dir", str(tmp_path / "m")], 2, says)
    assert not (tmp_path / "m" / "summary.json").exists()


def test_a_run_json_of_a_newer_schema_is_refused_by_the_reports(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = _copy(runs, tmp_path)
    _run_json_of_a_newer_schema(work / "a")
    _refused(capsys, ["report", str(work / "a"), "-o", str(tmp_path / "r.html")], 2, "a/run.json has schema version 99")
    _refused(capsys, ["table", str(work / "a")], 2, "a/run.json has schema version 99")


def test_the_undamaged_runs_are_read_and_merged(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks refuse only damage: the same files as written pass every reader,
    and the merge counts every task of both shards once."""
    work = _copy(runs, tmp_path)
    assert evomemory(["report", str(work / "a"), "-o", str(tmp_path / "r.html")]) == 0
    assert evomemory(["compare", str(work / "b"), str(work / "a"), "-o", str(tmp_path / "c.html")]) == 0
    assert evomemory(["merge", str(work / "s1"), str(work / "s2"), "--output-dir", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "summary.json").read_text())["overall"]
    whole = json.loads((work / "a" / "summary.json").read_text())["overall"]
    assert {key: merged[key] for key in ("tasks", "correct", "stimuli")} == {
        key: whole[key] for key in ("tasks", "correct", "stimuli")
    }


def test_a_resume_runs_again_the_episodes_whose_scores_name_another_position(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupted run whose scores.jsonl had two ids swapped: the resume kept
    each score under the id it carried (one task's result counted as the other's);
    now those episodes run again, said before the resume runs, and the resumed run
    has the uninterrupted run's scores."""
    work = _copy(runs, tmp_path)
    (work / "a" / "summary.json").unlink()  # interrupted
    _edit_lines(work / "a" / "scores.jsonl", _swap_first_two)
    capsys.readouterr()
    assert evomemory(["run", "--resume", str(work / "a")]) == 0
    out = capsys.readouterr()
    assert "is at position 1, the task's is 0 (the file was edited); that episode runs again" in out.out + out.err

    def outcomes(run: Path) -> list[tuple[object, ...]]:
        lines = (run / "scores.jsonl").read_text(encoding="ascii").splitlines()
        return sorted((r["stream"], r["task_id"], r["position"], r["correct"]) for r in map(json.loads, lines))

    assert outcomes(work / "a") == outcomes(runs / "a")
    assert evomemory(["report", str(work / "a"), "-o", str(tmp_path / "r.html")]) == 0


def test_a_file_where_a_streams_snapshot_folder_goes_refuses_the_resume_before_any_task(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The resumed episodes used to run, then every snapshot write failed (ENOTDIR)
    and the run stopped incomplete; the run's own folders were already checked."""
    work = _copy(runs, tmp_path)
    (work / "a" / "summary.json").unlink()  # interrupted
    shutil.rmtree(work / "a" / "memory" / "sample_facts")
    (work / "a" / "memory" / "sample_facts").write_text("x", encoding="ascii")
    before = {path: path.read_bytes() for path in (work / "a").rglob("*") if path.is_file()}
    _refused(
        capsys, ["run", "--resume", str(work / "a"), "-q"], 4,
        "memory/sample_facts is a file where a directory is expected; remove it, or run again without --resume",
    )
    assert {path: path.read_bytes() for path in (work / "a").rglob("*") if path.is_file()} == before


def test_a_comparison_of_runs_that_read_different_data_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs of a stream whose file was edited between them (same ids, other
    targets) were paired task by task without a word: one id named two tasks."""
    sample = REPO / "pytest_evomemory" / "streams" / "sample" / "facts.jsonl"
    lines = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()][:4]
    for name, targets in (("before", None), ("after", "another answer")):
        records = [dict(record, target=targets or record["target"]) for record in lines]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nbenchmark: {{benchmark: files, files: [{{name: facts, path: {name}.jsonl}}]}}\n"
            f"agent: {CONFIGS / 'agents' / 'recall_baseline.yaml'}\n",
            encoding="utf-8",
        )
        argv = ["run", "--config", str(tmp_path / f"{name}.yaml"), "--output-dir", str(tmp_path / name), "-q"]
        assert evomemory(argv) == 0
    capsys.readouterr()
    assert evomemory(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "-o", str(tmp_path / "c.html")]) == 0
    out = capsys.readouterr().out
    assert "warning: facts: after and before read different data (sha256" in out
    document = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert any("read different data" in warning for warning in document["warnings"])
    assert evomemory(["compare", str(tmp_path / "before"), str(tmp_path / "before"), "-o", str(tmp_path / "s.html")]) == 0
    assert "different data" not in capsys.readouterr().out


def test_a_session_manifest_of_a_newer_schema_is_not_resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """arms.json written by a newer plugin was resumed as if this version's layout."""
    configs = ["--config", str(SAMPLE_MEMORY_RUN), "--config", str(SAMPLE_NO_MEMORY_RUN)]
    assert evomemory(["run", *configs, "--limit", "2", "--output-dir", str(tmp_path / "s"), "-q"]) == 0
    manifest = json.loads((tmp_path / "s" / "arms.json").read_text(encoding="utf-8"))
    (tmp_path / "s" / "arms.json").write_text(json.dumps({**manifest, "schema_version": 99}), encoding="utf-8")
    _refused(capsys, ["run", "--resume", str(tmp_path / "s"), "-q"], 4, "s/arms.json has schema version 99, newer than")


def test_merge_refuses_an_events_line_that_is_no_event(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed feedback turn's record edited into another object was passed over:
    the merged summary lost that failure while the shard's own listed it."""
    work = _copy(runs, tmp_path)
    with (work / "s1" / "events.jsonl").open("a", encoding="ascii") as events:
        events.write(json.dumps({"failure": "the feedback turn timed out"}) + "\n")
    merge = ["merge", str(work / "s1"), str(work / "s2"), "--output-dir", str(tmp_path / "m")]
    _refused(capsys, merge, 2, "s1/events.jsonl, record 1 is not a failed or skipped turn")
    assert not (tmp_path / "m" / "summary.json").exists()
