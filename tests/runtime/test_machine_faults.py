"""The machine refusing a write the session makes beside its arms' runs (a full disk,
a read-only or vanished directory): one line naming the file, nothing recorded that
a resume would read as whole, no traceback.

Runtime-level: ``evomemory run`` in process, the baseline agent (no model), the
system's refusal injected where the session writes (the machine-level cases, a real
small tmpfs and real signals, are in tests/plugin/test_process_faults.py)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.rundir import arms as arms_module


def _full(*_: Any, **__: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("chains", ["1", "4"])
def test_a_session_whose_arms_manifest_cannot_be_written_is_refused_before_any_task(
    tmp_path: Path, write_run_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], chains: str,
) -> None:
    """arms.json goes before the first record: a session that cannot write it could
    not be resumed, so it records nothing and says which file (was an internal error,
    exit 3, with the streams' chains running on)."""
    configs = [write_run_config("a"), write_run_config("b")]
    monkeypatch.setattr(arms_module, "write_json_atomically", _full)
    out = tmp_path / "out"
    status = evomemory(["run", "-q", "--chains", chains, "--output-dir", str(out),
                        *(word for config in configs for word in ("--config", str(config)))])
    said = capsys.readouterr()
    assert status == 4, said.out + said.err
    assert f"cannot write {out / 'arms.json'}: No space left on device (ENOSPC)" in said.out + said.err
    assert "internal error" not in said.out + said.err and "Traceback" not in said.out + said.err
    assert not out.exists() or not any(out.rglob("*.jsonl")), "nothing recorded"


@pytest.mark.parametrize(("command", "status"), [("run", 2), ("report", 130)])
def test_ctrl_c_before_a_session_took_the_interrupts_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, status: int,
) -> None:
    """Ctrl-C while the command loads (its imports take most of a second) printed the
    traceback of whichever import it landed in; 'run' exits as an interrupted session."""
    from pytest_evomemory import cli
    from pytest_evomemory.runtime.outcome import EXIT_INTERRUPTED

    def interrupted() -> Any:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    assert cli.main([command, "somewhere"]) == status
    said = capsys.readouterr()
    assert said.err.strip() == "evomemory: interrupted" and said.out == ""
    assert cli.INTERRUPTED_RUN == EXIT_INTERRUPTED  # one status for an interrupted run, said twice


@pytest.mark.parametrize("how", ["removed", "moved"])
def test_a_run_directory_removed_or_moved_mid_run_stops_the_run_and_gets_no_summary(
    tmp_path: Path, how: str,
) -> None:
    """The writer's kept files follow a moved or removed directory, so its appends
    went on silently into it; the end then wrote summary.json and run.json by name
    into a new directory holding no results. Now the next task's score notices, the
    writer stops with one reason naming the directory, and writes nothing by name."""
    from pytest_evomemory.rundir.writer import RunWriter
    from pytest_evomemory.rundocs import Score

    run_dir = tmp_path / "run"
    writer = RunWriter(run_dir)
    score = Score(stream="s", position=0, task_id="t0", correct=True, answer="a", expected="a")
    writer.add_score(score)
    if how == "moved":
        run_dir.rename(tmp_path / "elsewhere")
    else:
        (run_dir / "scores.jsonl").unlink()
        (run_dir / "transcripts").rmdir()
        run_dir.rmdir()
    writer.add_score(score.model_copy(update={"position": 1, "task_id": "t1"}))
    assert writer.failure is not None and f"the run directory {run_dir} was removed or moved" in writer.failure
    writer.write_summary(None)  # type: ignore[arg-type]  # never read: nothing is written by name
    assert not run_dir.exists()
    if how == "moved":
        assert len((tmp_path / "elsewhere" / "scores.jsonl").read_text().splitlines()) == 1


def test_chains_at_once_raise_the_soft_descriptor_limit_or_are_refused_below_the_hard_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of descriptors, a grid failed wherever it opened its next file: a snapshot's
    log (the run stopped, saying to free space), or a lazy import at the session's end
    (an internal error). The soft limit is raised to what the chains need; a hard limit
    below it is one line before any task."""
    import resource

    from pytest_evomemory.core.errors import ConfigError
    from pytest_evomemory.runtime.chains import BASE_DESCRIPTORS, DESCRIPTORS_PER_CHAIN, check_descriptors

    limits = {"now": (40, 4096)}
    monkeypatch.setattr(resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _, value: limits.__setitem__("now", value))
    need = BASE_DESCRIPTORS + DESCRIPTORS_PER_CHAIN * 12
    check_descriptors(12, "--chains")
    assert limits["now"] == (2 * need, 4096)
    check_descriptors(1, "--chains")  # enough already: left as it is
    assert limits["now"] == (2 * need, 4096)
    limits["now"] = (40, 64)
    with pytest.raises(ConfigError) as refused:
        check_descriptors(12, "--chains")
    assert str(refused.value) == (
        f"12 chain(s) at once need about {need} open files, and this process may open 64 (ulimit -n): raise the "
        f"limit, or run at most {(64 - BASE_DESCRIPTORS) // DESCRIPTORS_PER_CHAIN} at once (--chains 4)"
    )
    assert limits["now"] == (40, 64)


@pytest.mark.slow
def test_a_grid_under_a_low_hard_descriptor_limit_is_refused_before_any_task(
    tmp_path: Path, write_run_config: Callable[..., Path],
) -> None:
    """A real limit, set in the child before it starts: one line, exit 4, nothing written."""
    import resource
    import subprocess
    import sys

    configs = [write_run_config(f"a{index}") for index in range(4)]

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))

    result = subprocess.run(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", "-q", "--chains", "8", "--output-dir", str(tmp_path / "out"),
         *(word for config in configs for word in ("--config", str(config)))],
        cwd=tmp_path, capture_output=True, text=True, preexec_fn=low, timeout=120,
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "8 chain(s) at once need about 96 open files, and this process may open 40 (ulimit -n)" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()


def test_out_of_descriptors_says_to_raise_the_limit_not_to_free_space(tmp_path: Path) -> None:
    from pytest_evomemory.core.errors import ArtefactWriteError
    from pytest_evomemory.rundir.layout import cannot_write

    emfile = OSError(errno.EMFILE, "Too many open files")
    for said in (str(cannot_write(tmp_path / "x", emfile)), str(ArtefactWriteError.from_os_error(tmp_path / "x", emfile))):
        assert "Too many open files (EMFILE)" in said and "raise the limit of open files (ulimit -n)" in said
        assert "free space" not in said
    full = str(cannot_write(tmp_path / "x", OSError(errno.ENOSPC, "No space left on device")))
    assert "(ENOSPC)" in full and "free space or fix the permissions" in full


def test_a_task_whose_process_crashed_runs_again_on_resume(
    tmp_path: Path, write_run_config: Callable[..., Path], capsys: pytest.CaptureFixture[str],
) -> None:
    """An xdist worker killed during a feedback turn is recorded as that feedback's
    failure (the controller has no record of it); the resume kept it as the agent's
    failure for good, where a kill of the whole run is resumed to the uninterrupted
    result. Written here as the controller writes it (Collector.crashed): the resume
    runs that episode and every later one of its stream again."""
    import json

    from pytest_evomemory.rundocs.records import CRASHED

    config = write_run_config("g")
    reference, out = tmp_path / "reference", tmp_path / "out"
    for where in (reference, out):
        assert evomemory(["run", "-q", "--limit", "4", "--config", str(config), "--output-dir", str(where)]) == 0
    responses = out / "responses.jsonl"
    lines = responses.read_text().splitlines()
    lost = [line for line in lines if '"feedback"' in line and '"f02"' in line]
    assert len(lost) == 1
    responses.write_text("".join(f"{line}\n" for line in lines if line not in lost))
    failure = {"phase": "feedback", "position": 1, "stream": "sample_facts", "task_id": "f02",
               "reason": f"{CRASHED}: worker 'gw0' crashed while running 'evomemory::test_task[sample_facts/f02]'"}
    with (out / "events.jsonl").open("a") as events:
        events.write(json.dumps({"failure": failure, "type": "feedback_error"}) + "\n")
    capsys.readouterr()
    assert evomemory(["run", "-q", "--resume", str(out)]) == 0, capsys.readouterr()
    assert (out / "scores.jsonl").read_text() == (reference / "scores.jsonl").read_text()
    assert not (out / "events.jsonl").exists() or CRASHED not in (out / "events.jsonl").read_text()
    assert len((out / "responses.jsonl").read_text().splitlines()) == len(lines)
