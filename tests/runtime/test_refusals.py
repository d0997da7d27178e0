"""What can be known before the first task is refused then, by both entry points,
with exit 4, one line and nothing written: a factory whose result is not an Agent or
a MemorySystem (found at the first build of a stream, before any result is recorded),
and a resume whose memory cannot restore (no snapshot kept: found by the preflight,
before any memory is built). A damaged slot is no refusal: the resume continues from
the newest intact one (tests/plugin/test_resume_matrix_damage.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory
from tests.plugin.guarantee_project import make_project

ENTRIES = pytest.mark.parametrize("entry", ["pytest", "cli"])

#: An agent factory named in the agent config (``kind: module:function``) whose
#: result is not an Agent.
NOT_AN_AGENT = '''
def create(config, memory):
    return {"respond": "not a method"}
'''

NOT_A_MEMORY = '''
import pytest


class Notes:
    """Keeps notes, but is no MemorySystem: no retain, recall, tools or default_top_k."""

    def reset(self):
        pass

    def close(self):
        pass


def open_notes(config, context):
    return Notes()


@pytest.fixture(scope="session")
def evomemory_memory_factory():
    return open_notes
'''


def entry_run(entry: str, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    """Run the session in this process through ``entry``; its exit status and output."""
    if entry == "pytest":
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *(f"--evomemory-{o}" for o in options))
        return int(result.ret), result.stdout.str() + result.stderr.str()
    status = evomemory(["run", "-q", *(f"--{o}" for o in options)])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def files(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = make_project(pytester, monkeypatch)
    monkeypatch.chdir(path)
    return path


def _agent_factory(pytester: pytest.Pytester, project: Path, module: str, source: str) -> None:
    """bad.yaml: the project's run config with its agent built by ``module:create``."""
    pytester.makepyfile(**{module: source})
    (project / "bad.yaml").write_text(
        (project / "run.yaml").read_text().replace("scripted_agent:create", f"{module}:create"), encoding="utf-8"
    )


@ENTRIES
def test_an_agent_factory_returning_no_agent_is_refused_before_the_first_task(
    entry: str, pytester: pytest.Pytester, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent_factory(pytester, project, "not_an_agent", NOT_AN_AGENT)
    status, output = entry_run(entry, pytester, capsys, "config=bad.yaml")
    assert status == 4, output
    line = "agent factory 'not_an_agent:create' returned a dict, which does not implement the Agent protocol: " \
        "it lacks respond, reset"
    assert output.count(line) == 1, output  # one line, not one per stream or task
    assert "Traceback" not in output
    assert not (project / "evomemory-results").exists()  # nothing was written, not even the directory


@pytest.mark.parametrize("workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)])
def test_a_conftest_memory_factory_returning_no_memory_is_refused_in_the_controller(
    pytester: pytest.Pytester, project: Path, workers: list[str]
) -> None:
    pytester.makeconftest(NOT_A_MEMORY)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *workers, "--evomemory-config=run.yaml")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "evomemory: error: memory factory conftest:open_notes (from the evomemory_agent_factory / " \
        "evomemory_memory_factory fixtures) returned a conftest.Notes, which does not implement the " \
        "MemorySystem protocol: it lacks default_top_k, retain, recall, tools" in output
    assert "passed" not in output and "failed" not in output and "Traceback" not in output
    assert not (project / "evomemory-results").exists()


def _interrupted_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run stopped early by --max-errors after two episodes of its first stream."""
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    assert evomemory(["run", "-q", "--config", "run.yaml", "--max-errors", "1"]) == 2
    monkeypatch.delenv("ACTIONS")
    run_dir = project / "evomemory-results" / "g"
    assert json.loads((run_dir / "summary.json").read_text())["completion"]["complete"] is False
    return run_dir


@ENTRIES
def test_a_resume_whose_memory_cannot_restore_is_refused_and_writes_nothing(
    entry: str, pytester: pytest.Pytester, project: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir = _interrupted_run(project, monkeypatch)
    memory = run_dir / "memory"
    # what a memory without snapshot/restore leaves: no snapshot at all
    for path in sorted(memory.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    memory.rmdir()
    says = "the interrupted run kept no memory snapshot of it"
    before = files(run_dir)
    capsys.readouterr()
    status, output = entry_run(entry, pytester, capsys, f"resume={run_dir}")
    assert status == 4, output
    assert says in output and output.count(says) == 1, output
    assert "Traceback" not in output
    assert files(run_dir) == before  # nothing new written, nothing moved aside
    assert os.listdir(project / "evomemory-results") == ["g"]


#: An agent factory whose result depends on the stream: an Agent for the first, not
#: for the second (counted in a file: both entry points import the module afresh).
SECOND_NOT_AN_AGENT = '''
import os
from scripted_agent import create as scripted


def create(config, memory):
    path = os.path.join(os.environ["PROJECT"], "built.log")
    with open(path, "a") as log:
        log.write("built\\n")
    with open(path) as log:
        builds = len(log.read().splitlines())
    return scripted(config, memory) if builds == 1 else {"respond": "not a method"}
'''


@ENTRIES
def test_a_factory_refused_after_results_were_recorded_fails_that_stream_once(
    entry: str, pytester: pytest.Pytester, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent_factory(pytester, project, "second_not_an_agent", SECOND_NOT_AN_AGENT)
    status, output = entry_run(entry, pytester, capsys, "config=bad.yaml")
    assert status == 1, output  # the session ran and failed; it is not refused
    summary = json.loads((project / "evomemory-results" / "g" / "summary.json").read_text())
    [failure] = summary["failed_episodes"]
    assert (failure["stream"], failure["phase"]) == ("sample_choice", "start"), failure
    assert "returned a dict, which does not implement the Agent protocol" in failure["reason"]
    assert {name: stream["tasks"] for name, stream in summary["streams"].items()} == {"sample_facts": 3, "sample_choice": 0}
    assert "Traceback" not in output and "evomemory: error" not in output  # no refusal


#: Where the run and its memory write, made unusable by something already there.
PLACES = {
    "a directory where the sqlite file goes": ("memory/sample_choice.sqlite3/", "is a directory where a file is expected"),
    "a file where the run's memory folder goes": ("memory", "memory is a file where a directory is expected"),
    "a file where the run's transcripts folder goes": ("transcripts", "transcripts is a file where a directory is expected"),
    "a file on the way to sqlite.path": ("stores", "stores is a file where a directory is expected"),
}


@pytest.mark.parametrize("entry", ["pytest", "cli"])
@pytest.mark.parametrize("place", list(PLACES))
def test_a_place_the_run_or_its_memory_cannot_write_is_refused_before_the_first_task(
    entry: str, place: str, pytester: pytest.Pytester, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found at open, it failed every stream's start (exit 1, "free space ... then
    resume", which could not help); it is known before the first task: exit 4, one line."""
    blocker, message = PLACES[place]
    run_dir = project / "evomemory-results" / "g"
    config = (project / "run.yaml").read_text().replace("{backend: inprocess}", "{backend: sqlite}")
    if blocker == "stores":
        config = config.replace("{backend: sqlite}", "{backend: sqlite, sqlite: {path: 'stores/{stream}.db'}}")
    (project / "sql.yaml").write_text(config)
    (run_dir / blocker).parent.mkdir(parents=True)
    if blocker.endswith("/"):
        (run_dir / blocker).mkdir()
    else:
        (run_dir / blocker).write_text("in the way")
    if blocker == "stores":  # an earlier run's directory (one holding only the user's files is refused as such)
        (run_dir / "run.json").write_text("{}")
    before = files(run_dir)
    status, output = entry_run(entry, pytester, capsys, "config=sql.yaml")
    assert status == 4, output
    assert message in output and "Traceback" not in output
    assert not (project / "calls.log").exists()  # no task ran
    assert files(run_dir) == before  # nothing written
