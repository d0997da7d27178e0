"""A run's record files edited or damaged after they were written, through every
reader in-process: ``evomemory run --resume``, ``merge``, ``report`` and ``compare``.

Only the last line of a record file can be torn (each record is appended whole,
its newline last); any other line that is no record, and a second record of one
task, is refused in one line naming the file (resume: exit 4 before any task;
the offline commands: exit 2), never skipped (a turn or a score lost while its
episode counts as complete) or counted twice. A finished run's records must add up
to its summary.json: a merge or a comparison of records emptied, cut or edited
after the run is refused instead of computed on them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import SAMPLE_MEMORY_RUN

CONFIG = ["--config", str(SAMPLE_MEMORY_RUN), "--limit", "3"]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="ascii").splitlines(keepends=True)


def _insert(line: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        lines = _lines(path)
        path.write_text("".join([*lines[:1], line, *lines[1:]]), encoding="utf-8")

    return damage


def _repeat_first(path: Path) -> None:
    lines = _lines(path)
    path.write_text("".join([*lines, lines[0]]), encoding="ascii")


def _not_ascii(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:20] + b"\xff" + data[20:])


DAMAGE = {
    "not_json": (_insert('{"stream": "sample_facts", "task_id"\n'), "line 2 is not valid JSON"),
    "not_an_object": (_insert("[1, 2]\n"), "line 2 is not a JSON object"),
    "not_ascii": (_not_ascii, "line 1 holds a byte that is not ASCII"),
    "line_twice": (_repeat_first, "a second record of"),
}
FILES = ["scores.jsonl", "responses.jsonl", "transcripts/sample_facts.jsonl"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("records") / "run"
    assert evomemory(["run", *CONFIG, "--output-dir", str(run_dir), "-q"]) == 0
    return run_dir


def _one_line(capsys: pytest.CaptureFixture[str], *expected: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(text in err for text in expected), err


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_line_no_writer_leaves_is_refused_by_every_reader(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, damage: str
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    change, says = DAMAGE[damage]
    change(run_dir / file)
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    capsys.readouterr()
    assert evomemory(["run", "--resume", str(run_dir), "-q"]) == 4
    _one_line(capsys, file, says, "the file was edited or damaged")
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before
    if file == "scores.jsonl":  # compare pairs the scores; report reads every file
        assert evomemory(["compare", str(finished), str(run_dir), "-o", str(tmp_path / "c.html")]) == 2
        _one_line(capsys, file, "the file was edited or damaged")
    assert evomemory(["report", str(run_dir), "-o", str(tmp_path / "r.html")]) == 2
    _one_line(capsys, file, "the file was edited or damaged")
    assert not (tmp_path / "r.html").exists()


def test_a_torn_last_line_is_an_interruption_and_resumes_to_the_same_run(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    (run_dir / "summary.json").unlink()
    for name in ("scores.jsonl", "responses.jsonl"):
        data = (run_dir / name).read_bytes()
        (run_dir / name).write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 40])  # the last line cut
    assert evomemory(["run", "--resume", str(run_dir), "-q"]) == 0
    assert (run_dir / "scores.jsonl").read_text() == (finished / "scores.jsonl").read_text()
    whole = json.loads((finished / "summary.json").read_text())["overall"]
    resumed = json.loads((run_dir / "summary.json").read_text())["overall"]
    assert {key: resumed[key] for key in ("tasks", "correct", "stimuli", "agent_turns")} == {
        key: whole[key] for key in ("tasks", "correct", "stimuli", "agent_turns")
    }


def test_a_resumed_response_naming_no_task_is_refused(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Skipped, its episode would still count as complete, a turn short."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    lines = _lines(run_dir / "responses.jsonl")
    lines[0] = json.dumps({**json.loads(lines[0]), "task_id": ["f01"]}) + "\n"
    (run_dir / "responses.jsonl").write_text("".join(lines), encoding="ascii")
    capsys.readouterr()
    assert evomemory(["run", "--resume", str(run_dir), "-q"]) == 4
    _one_line(capsys, "responses.jsonl, record 1 names no stream and task")


def _empty(path: Path) -> None:
    path.write_text("", encoding="ascii")


def _flip_first(path: Path) -> None:
    lines = _lines(path)
    record = json.loads(lines[0])
    lines[0] = json.dumps({**record, "correct": not record["correct"]}) + "\n"
    path.write_text("".join(lines), encoding="ascii")


def _drop_first(path: Path) -> None:
    path.write_text("".join(_lines(path)[1:]), encoding="ascii")


@pytest.mark.parametrize(
    ("file", "change", "says"),
    [
        ("responses.jsonl", _empty, "summary.json counts stimuli 6, the records 0"),
        ("scores.jsonl", _flip_first, "summary.json counts correct"),
        ("scores.jsonl", _drop_first, "summary.json counts tasks 3, the records 2"),
        ("transcripts/sample_facts.jsonl", _drop_first, "transcripts/sample_facts.jsonl holds 5 turns"),
    ],
    ids=["responses_emptied", "score_flipped", "score_removed", "transcript_cut"],
)
def test_merge_refuses_a_finished_shard_whose_records_do_not_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    file: str, change: Callable[[Path], None], says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for index in (1, 2):
        assert evomemory(["run", *CONFIG, "--shard", f"{index}/2", "--output-dir", f"s{index}", "-q"]) == 0
    stream = json.loads((tmp_path / "s1" / "run.json").read_text())["streams"][0]["name"]
    change(tmp_path / "s1" / file.replace("sample_facts", stream))
    capsys.readouterr()
    assert evomemory(["merge", "s1", "s2", "--output-dir", "merged"]) == 2
    _one_line(capsys, "shard 1/2", "do not add up to its summary.json", says.replace("sample_facts", stream))
    assert not (tmp_path / "merged").exists()  # refused before anything is written


def test_report_and_compare_refuse_records_that_do_not_add_up_to_the_summary(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for file, change in (("scores.jsonl", _drop_first), ("responses.jsonl", _empty), ("scores.jsonl", _flip_first)):
        run_dir = tmp_path / f"run-{file}-{change.__name__}"
        shutil.copytree(finished, run_dir)
        change(run_dir / file)
        capsys.readouterr()
        assert evomemory(["report", str(run_dir), "-o", str(tmp_path / "r.html")]) == 2
        _one_line(capsys, f"{file} does not add up to its summary.json")
        assert not (tmp_path / "r.html").exists()
        if file == "scores.jsonl":
            assert evomemory(["compare", str(finished), str(run_dir), "-o", str(tmp_path / "c.html")]) == 2
            _one_line(capsys, f"{file} does not add up to its summary.json")
