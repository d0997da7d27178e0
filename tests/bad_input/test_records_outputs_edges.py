"""Issue 35, the other classes: artefacts are records (never instructions), one range
per option at every door, outputs never overwrite a run, merge refuses shards that
disagree, the preflight refuses what the session will ask of a memory, and faults at
the edges (a full disk while the earlier run moves aside, a second Ctrl-C) end in one
line. In-process through ``evomemory`` (cheap); one pytester case per door where the
plugin's own handling is what is tested, ``-n 2`` where workers are involved."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from pytest_evomemory.cli import main

from ..conftest import SAMPLE_MEMORY_RUN
from .conftest import assert_no_internal_error

SAMPLE = ["--config", str(SAMPLE_MEMORY_RUN), "--limit", "1"]


def _one_line(capsys: pytest.CaptureFixture[str], *says: str) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and all(part in error for part in says), error
    assert "Traceback" not in error and "internal error" not in error
    return error


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main(["run", "-q", *SAMPLE, "--output-dir", str(run)]) == 0
    return run


# ----------------------------------------------------------------- one range per option


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--repeats", "101"], "--repeats must be at most 100"),
        (["--repeats", "9" * 80], "--repeats must be at most 100"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--limit", "9" * 80], "--limit must be at most 100,000,000"),
        (["--set", "benchmark.repeats=101"], "benchmark.repeats"),
    ],
    ids=["repeats_101", "repeats_80_digits", "repeats_0", "limit_80_digits", "set_repeats_101"],
)
def test_a_count_has_one_range_at_every_door(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], says: str
) -> None:
    assert main(["run", "-q", *SAMPLE, *arguments, "--output-dir", str(tmp_path / "out")]) == 4
    _one_line(capsys, says)
    assert not (tmp_path / "out").exists()


def test_the_pytest_door_has_the_same_range(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-repeats=101")
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evomemory-repeats must be at most 100" in result.stderr.str()


# ----------------------------------------------------------------- artefacts are records


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    session = tmp_path_factory.mktemp("replicated") / "session"
    assert main(["run", "-q", *SAMPLE, "--repeats", "2", "--output-dir", str(session)]) == 0
    return session


@pytest.mark.parametrize("repeats", [40, 101, 0, "2", True, 10**30], ids=["40", "101", "0", "text", "true", "huge"])
def test_an_edited_repeats_in_arms_json_is_damage_not_an_instruction(
    replicated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], repeats: object
) -> None:
    """The issue's example: ``repeats: 40`` in a finished 2-replicate session made the
    resume run 38 replicates nobody asked for."""
    session = tmp_path / "session"
    shutil.copytree(replicated, session)
    manifest = json.loads((session / "arms.json").read_text(encoding="utf-8"))
    (session / "arms.json").write_text(json.dumps({**manifest, "repeats": repeats}), encoding="utf-8")
    capsys.readouterr()
    assert main(["run", "-q", "--resume", str(session)]) == 4
    _one_line(capsys, "arms.json", "'repeats'")
    assert sorted(path.name for path in session.iterdir() if re.fullmatch(r"r\d+", path.name)) == ["r1", "r2"]


# ----------------------------------------------------------------- outputs never overwrite a run


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (["report", "{run}", "-o", "{run}/scores.jsonl"], 2),
        (["report", "{run}", "-o", "{run}"], 2),
        (["report", "{run}", "-o", "{run}/transcripts/page.html"], 2),
        (["table", "{run}", "-o", "{run}/run.json"], 2),
        (["compare", "{run}", "{run}", "-o", "{run}/summary.html"], 2),
        (["merge", "{run}", "--output-dir", "{run}/merged"], 2),
        (["init", "{run}/configs"], 1),
    ],
    ids=["report_scores", "report_dir", "report_transcripts", "table_run_json", "compare", "merge", "init"],
)
def test_no_command_writes_inside_a_run_directory(
    finished: Path, capsys: pytest.CaptureFixture[str], command: list[str], status: int
) -> None:
    before = {path: path.read_bytes() for path in finished.rglob("*") if path.is_file()}
    capsys.readouterr()
    assert main([part.format(run=finished) for part in command]) == status
    _one_line(capsys, str(finished), "run directory")
    assert {path: path.read_bytes() for path in finished.rglob("*") if path.is_file()} == before


def test_a_commands_own_file_in_the_run_is_still_written(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(finished), "-o", str(finished / "report.html")]) == 0


# ----------------------------------------------------------------- merge refuses disagreeing shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shards")
    for index in (1, 2):
        assert main(["run", "-q", *SAMPLE, "--shard", f"{index}/2", "--output-dir", str(root / f"s{index}")]) == 0
    return root


def _edit_version(shard: Path, other: Path) -> None:
    document = json.loads((shard / "run.json").read_text(encoding="utf-8"))
    document["versions"]["pytest-evomemory"] = "0.0.1"
    (shard / "run.json").write_text(json.dumps(document), encoding="utf-8")


def _edit_data(shard: Path, other: Path) -> None:
    """The other shard's stream, loaded here from other bytes."""
    document = json.loads((shard / "run.json").read_text(encoding="utf-8"))
    theirs = json.loads((other / "run.json").read_text(encoding="utf-8"))["streams"][0]
    document["streams"].append({**theirs, "provenance": {**theirs["provenance"], "sha256": "0" * 64}})
    (shard / "run.json").write_text(json.dumps(document), encoding="utf-8")


def _edit_model(shard: Path, other: Path) -> None:
    summary = json.loads((shard / "summary.json").read_text(encoding="utf-8"))
    for parts in summary["ran"].values():
        parts["model"] = {"provider": "openai", "model": "another-model", "endpoint": "http://127.0.0.1:9/v1"}
    (shard / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    theirs = json.loads((other / "summary.json").read_text(encoding="utf-8"))
    for parts in theirs["ran"].values():
        parts["model"] = {"provider": "openai", "model": "one-model", "endpoint": "http://127.0.0.1:9/v1"}
    (other / "summary.json").write_text(json.dumps(theirs), encoding="utf-8")


@pytest.mark.parametrize(
    ("edit", "says"),
    [(_edit_version, "'0.0.1'"), (_edit_data, "data file (sha256)"), (_edit_model, "another-model")],
    ids=["package_version", "data_hash", "model"],
)
def test_merge_refuses_shards_that_disagree_on_what_changes_results(
    shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, says: str
) -> None:
    for name in ("s1", "s2"):
        shutil.copytree(shards / name, tmp_path / name)
    edit(tmp_path / "s2", tmp_path / "s1")  # type: ignore[operator]
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--output-dir", str(tmp_path / "m")]) == 2
    _one_line(capsys, "the shards disagree on", says)
    assert not (tmp_path / "m").exists()


# ----------------------------------------------------------------- the preflight knows what a session needs

PLAIN_MEMORY = '''
from pytest_evomemory.memory import InProcessMemory


class PlainMemory:
    """retain/recall only: no ingest, no recent."""

    def __init__(self):
        self.inner = InProcessMemory()
        self.default_top_k = 4

    def retain(self, content, metadata=None):
        return self.inner.retain(content, metadata)

    def recall(self, query, top_k=None):
        return self.inner.recall(query, top_k)

    def reset(self):
        self.inner.reset()

    def close(self):
        self.inner.close()

    def tools(self):
        return self.inner.tools()


def make(memory_config, context) -> PlainMemory:
    return PlainMemory()
'''

LOCOMO_PLAIN = """
name: plain
benchmark: {benchmark: locomo_sample}
agent: {kind: recall_baseline, memory_strategy: deterministic_recall}
memory: {backend: "plain_memory:make"}
"""


def test_a_capability_the_session_needs_is_refused_once_before_any_task_through_both_doors(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoCoMo with ``ingest: memory`` and a memory without ingest(): asked of the class
    its factory declares, refused once with exit 4 (before: found as each stream
    started, after other arms ran, its message repeated per stream)."""
    pytester.makepyfile(plain_memory=PLAIN_MEMORY)
    (pytester.path / "run.yaml").write_text(LOCOMO_PLAIN, encoding="utf-8")
    pytester.syspathinsert()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    for workers in ([], ["-n", "2"]):
        result = pytester.runpytest("--evomemory-config=run.yaml", "-p", "no:randomly", *workers)
        assert_no_internal_error(result)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        output = result.stdout.str() + result.stderr.str()
        assert output.count("has no ingest(session) method") == 1, output
        assert not (pytester.path / "evomemory-results").exists()
    capsys.readouterr()
    assert main(["run", "-q", "--config", "run.yaml"]) == 4
    _one_line(capsys, "memory PlainMemory has no ingest(session) method", "ingest: agent")


def test_a_missing_embeddings_extra_and_a_memory_path_under_proc_are_refused_before_any_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "sentence_transformers" else real(name, *rest)
    )
    dense = ["--set", "memory.backend=dense"]
    assert main(["run", "-q", *SAMPLE, *dense, "--output-dir", str(tmp_path / "a")]) == 4
    _one_line(capsys, "pip install 'pytest-evomemory[embeddings]'")
    proc = ["--set", "memory.backend=sqlite", "--set", "memory.sqlite.path=/proc/evomemory/{stream}.sqlite3"]
    assert main(["run", "-q", *SAMPLE, *proc, "--output-dir", str(tmp_path / "b")]) == 4
    _one_line(capsys, "/proc", "holds no files")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ----------------------------------------------------------------- faults at the edges


def test_a_full_disk_while_the_earlier_run_moves_aside_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC injected where the history move writes (a tmpfs of a few pages fills at
    the lock file first; see docs/artefacts.md): one line, exit 4, the scores kept."""
    from pytest_evomemory import rundir

    run = tmp_path / "run"
    assert main(["run", "-q", *SAMPLE, "--output-dir", str(run)]) == 0
    scores = (run / "scores.jsonl").read_bytes()

    replace = os.replace

    def full(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        if "history" in Path(target).parts:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        replace(source, target)

    monkeypatch.setattr(rundir.history.os, "replace", full)
    capsys.readouterr()
    assert main(["run", "-q", *SAMPLE, "--output-dir", str(run)]) == 4
    _one_line(capsys, "cannot move the earlier run", "No space left on device (ENOSPC)")
    kept = [path.read_bytes() for path in run.rglob("scores.jsonl")]
    assert kept == [scores]


SECOND_INTERRUPT = '''
import os, signal
from pytest_evomemory.agents.baseline import RecallBaselineAgent
from pytest_evomemory.memory import InProcessMemory

# a process started by a non-interactive shell inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)


class Interrupting(RecallBaselineAgent):
    def respond(self, stimulus, turn):
        if stimulus.task_id == "f02" and stimulus.kind == "task":
            os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C
        return super().respond(stimulus, turn)


class SecondCtrlC(InProcessMemory):
    def close(self):
        os.kill(os.getpid(), signal.SIGINT)  # the second, while the stream is torn down
        super().close()


def agent(config, memory):
    return Interrupting(config, memory)


def memory(memory_config, context) -> SecondCtrlC:
    return SecondCtrlC()
'''

INTERRUPTED_RUN = """
name: interrupted
benchmark: {benchmark: sample}
agent: {kind: "second_interrupt:agent", memory_strategy: deterministic_recall}
memory: {backend: "second_interrupt:memory"}
"""


def test_a_second_ctrl_c_ends_in_the_summary_not_a_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: the second SIGINT is sent while the interrupted stream's memory
    closes (the issue's traceback ran through runtime/stream.py)."""
    pytester.makepyfile(second_interrupt=SECOND_INTERRUPT)
    (pytester.path / "run.yaml").write_text(INTERRUPTED_RUN, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("--evomemory-config=run.yaml", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert_no_internal_error(result)
    assert "interrupted (Ctrl-C)" in result.stdout.str()
    cli = pytester.run(sys.executable, "-m", "pytest_evomemory.cli", "run", "-q", "--config", "run.yaml", "--output-dir", "cli")
    assert_no_internal_error(cli)
    assert cli.ret == 2 and "interrupted (Ctrl-C)" in cli.stdout.str() + cli.stderr.str()
