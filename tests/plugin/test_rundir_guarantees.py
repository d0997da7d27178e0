"""What the run directory guarantees (issue 14, section 3), through pytest as a user
runs it: earlier results survive, one writer at a time, safe run names, honest
completion, and clear errors when the directory cannot be written.

Sessions run in this process (``pytester.runpytest``; under ``-n 2`` the workers are
processes anyway); a run that must be signalled or held open while another starts
runs in the background."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.plugin.items import ITEMS_MODULE

from ..conftest import read_jsonl
from .guarantee_project import calls, importable_by_xdist_workers, make_project, start_pytest, wait_for

RUN_DIR = Path("evomemory-results") / "g"


def summary_of(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = make_project(pytester, monkeypatch)
    importable_by_xdist_workers(pytester)
    return path


# --------------------------------------------------------------------------- fewer tasks


@pytest.mark.parametrize(
    ("args", "runs_tasks"),
    [
        (["--evomemory-min-accuracy=lots"], False),  # a usage error
        (["-m", "not evomemory"], False),
        (["--collect-only"], False),
        (["-k", "f01"], True),
        (["--evomemory-limit=1"], True),
        (["NODEID"], True),
        pytest.param(["-k", "f01 or c01", "-n", "2"], True, marks=pytest.mark.slow),
    ],
    ids=["usage-error", "not-evomemory", "collect-only", "k", "limit", "node-id", "k-xdist"],
)
def test_a_run_of_fewer_tasks_never_destroys_an_earlier_complete_run(
    pytester: pytest.Pytester, project: Path, args: list[str], runs_tasks: bool
) -> None:
    pytester.runpytest("--evomemory-config=run.yaml").assert_outcomes(passed=6)
    run_dir = project / RUN_DIR
    complete = {name: (run_dir / name).read_bytes() for name in ("scores.jsonl", "summary.json", "responses.jsonl")}
    if args == ["NODEID"]:
        args = [f"{ITEMS_MODULE}::test_task[sample_facts/f02]"]
    pytester.runpytest("--evomemory-config=run.yaml", *args)
    if runs_tasks and "--evomemory-limit=1" in args:
        # a limit is the new run's plan (complete): the earlier run moves aside, byte for byte
        (kept,) = (run_dir / "history").iterdir()
        assert {name: (kept / name).read_bytes() for name in complete} == complete
        assert summary_of(run_dir)["completion"]["complete"] is True
        # both stay usable: compare the earlier run with the new one, report the old one
        assert evomemory(["compare", str(kept), str(run_dir), "-o", str(project / "c.html")]) == 0
        assert evomemory(["report", str(kept)]) == 0
    elif runs_tasks:
        # -k and a node id pick tasks by hand: a side run of its own, the full run stays the result
        assert {name: (run_dir / name).read_bytes() for name in complete} == complete
        assert not (run_dir / "history").exists()
        side = run_dir / "side-run"
        assert summary_of(side)["completion"]["complete"] is False
        assert evomemory(["compare", str(run_dir), str(side), "-o", str(project / "c.html")]) == 0
    else:
        assert {name: (run_dir / name).read_bytes() for name in complete} == complete
        assert not (run_dir / "history").exists()


def test_resume_and_compare_work_beside_the_history_of_earlier_runs(pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.runpytest("--evomemory-config=run.yaml").assert_outcomes(passed=6)
    reference = (project / RUN_DIR / "scores.jsonl").read_text()
    monkeypatch.setenv("ACTIONS", json.dumps({"c02/task": "interrupt"}))
    interrupted = pytester.runpytest("--evomemory-config=run.yaml", no_reraise_ctrlc=True)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    monkeypatch.delenv("ACTIONS")
    resumed = pytester.runpytest(f"--evomemory-resume={RUN_DIR}")
    assert resumed.ret == 0, resumed.stdout.str()
    run_dir = project / RUN_DIR
    assert (run_dir / "scores.jsonl").read_text() == reference
    assert summary_of(run_dir)["completion"]["complete"] is True
    (kept,) = (run_dir / "history").iterdir()
    assert (kept / "scores.jsonl").read_text() == reference
    assert evomemory(["compare", str(kept), str(run_dir), "-o", str(project / "c.html")]) == 0


# --------------------------------------------------------------------------- one writer


@pytest.mark.slow
def test_a_second_concurrent_run_is_refused_naming_the_first_and_kill_9_frees_the_directory(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "wait"}))
    first = start_pytest(project, "--evomemory-config=run.yaml")  # in the background, as another terminal
    try:
        wait_for(project / "waiting", first)
        monkeypatch.delenv("ACTIONS")
        second = pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml")
        assert second.ret == pytest.ExitCode.USAGE_ERROR
        assert f"is in use by another run: process {first.pid} started" in second.stderr.str()
        assert "--evomemory-config=run.yaml" in second.stderr.str()
        assert "Traceback" not in second.stderr.str() + second.stdout.str()
    finally:
        first.kill()  # SIGKILL: no handler runs, the OS drops the lock
        first.wait()
    third = pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml")
    assert third.ret == 0, third.stdout.str() + third.stderr.str()
    assert summary_of(project / RUN_DIR)["completion"]["complete"] is True


# --------------------------------------------------------------------------- run names


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../escape", "/tmp/abs", "x\\y", "nul\0byte"])
def test_a_run_name_that_would_leave_the_output_root_is_refused_and_nothing_is_deleted(
    pytester: pytest.Pytester, project: Path, name: str
) -> None:
    (project / "run.yaml").write_text(
        json.dumps({"name": name, "benchmark": {"benchmark": "sample", "limit": 1}, "agent": {"kind": "recall_baseline"}}), encoding="utf-8"
    )
    for place in (project, project / "evomemory-results"):
        place.mkdir(exist_ok=True)
        (place / "scores.jsonl").write_text("mine\n")
        (place / "summary.json").write_text("{}\n")
    result = pytester.runpytest("--evomemory-config=run.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*key 'name': run name*"])
    assert "Traceback" not in result.stderr.str()
    for place in (project, project / "evomemory-results"):
        assert (place / "scores.jsonl").read_text() == "mine\n"
        assert (place / "summary.json").read_text() == "{}\n"
    assert sorted(os.listdir(project / "evomemory-results")) == ["scores.jsonl", "summary.json"]
    assert evomemory(["run", "--config", str(project / "run.yaml")]) == 4
    assert (project / "scores.jsonl").read_text() == "mine\n"


# --------------------------------------------------------------------------- completion


def test_x_marks_the_run_incomplete_a_threshold_cannot_pass_it_and_report_accepts_it(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f02/task": "raise"}))
    result = pytester.runpytest("--evomemory-config=run.yaml", "-x", "--evomemory-min-accuracy=0")
    result.assert_outcomes(passed=1, failed=1)
    completion = summary_of(project / RUN_DIR)["completion"]
    assert completion == {
        "complete": False, "tasks_planned": 6, "tasks_run": 2,
        "reason": completion["reason"],
    }
    assert completion["reason"] == "stopped early by -x/--maxfail: stopping after 1 failures"
    summary = summary_of(project / RUN_DIR)
    assert summary["thresholds_met"] is False and summary["passed"] is False
    result.stdout.fnmatch_lines(["*the run is incomplete*2 of 6*"])
    assert evomemory(["report", str(project / RUN_DIR)]) == 0


def test_an_incomplete_run_never_passes_a_threshold(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest("--evomemory-config=run.yaml", "-k", "f01 or c01", "--evomemory-min-accuracy=0")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = summary_of(project / RUN_DIR / "side-run")  # -k picks tasks by hand: a side run
    assert summary["completion"]["tasks_run"] == 2 and summary["thresholds_met"] is False
    result.stdout.fnmatch_lines(["*thresholds are not passed by an incomplete run*"])


def test_ctrl_c_marks_the_run_incomplete(pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f03/task": "interrupt"}))
    result = pytester.runpytest("--evomemory-config=run.yaml", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    completion = summary_of(project / RUN_DIR)["completion"]
    assert (completion["complete"], completion["tasks_run"], completion["tasks_planned"]) == (False, 2, 6)
    assert "Ctrl-C" in completion["reason"]
    assert evomemory(["report", str(project / RUN_DIR)]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_sigterm_still_writes_the_summary_of_an_incomplete_run(project: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({"f03/task": "wait"}))
    process = start_pytest(project, "--evomemory-config=run.yaml", *workers)
    wait_for(project / "waiting", process)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode != 0
    assert "INTERNALERROR" not in output
    summary = summary_of(project / RUN_DIR)
    completion = summary["completion"]
    assert completion["complete"] is False and "SIGTERM" in completion["reason"], output
    assert completion["tasks_run"] < 6 and summary["passed"] is False
    assert evomemory(["report", str(project / RUN_DIR)]) == 0


@pytest.mark.parametrize(
    "workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)]
)
def test_max_errors_stops_a_parallel_run_as_it_stops_a_serial_one(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("ACTIONS", json.dumps({f"{t}/task": "raise" for t in ("f01", "f02", "f03", "c01", "c02", "c03")}))
    result = pytester.runpytest("-p", "no:randomly", "--evomemory-config=run.yaml", "--evomemory-max-errors=2", *workers)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output  # pytest's code for a stop
    completion = summary_of(project / RUN_DIR)["completion"]
    assert completion["complete"] is False and "--evomemory-max-errors" in completion["reason"], output
    # a worker already running its stream's next task may finish it; no more
    assert 2 <= completion["tasks_run"] <= 3, output
    assert len([line for line in calls(project) if line.endswith("/task")]) <= 3


# --------------------------------------------------------------------------- output dir


def test_an_output_directory_that_is_a_file_is_a_clear_usage_error(pytester: pytest.Pytester, project: Path) -> None:
    (project / "out").write_text("not a directory")
    result = pytester.runpytest("--evomemory-config=run.yaml", "--evomemory-output-dir=out/run")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*out is a file, not a directory*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert (project / "out").read_text() == "not a directory"


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs unshare -rm and a tmpfs mount")


def _run_on_tmpfs(project: Path, options: str, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a private mount namespace whose output directory is a small tmpfs."""
    out = project / "tmpfs"
    out.mkdir()
    script = (
        f"mount -t tmpfs -o size={options} tmpfs {out} && "
        f"{sys.executable} -m pytest -p no:randomly -p no:cacheprovider --evomemory-config=run.yaml "
        f"--evomemory-output-dir={out}/run {' '.join(args)}"
    )
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=project, capture_output=True, text=True, timeout=300)


@needs_tmpfs
def test_a_read_only_output_directory_is_a_clear_usage_error(project: Path) -> None:
    # a read-only mount: refused even for root, who ignores file modes
    result = _run_on_tmpfs(project, "64k,ro")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "is not writable; give a writable --evomemory-output-dir" in output
    assert "INTERNALERROR" not in output and "Traceback" not in output


@needs_tmpfs
def test_a_full_disk_gives_one_clear_error_and_keeps_what_was_written(project: Path) -> None:
    # room for run.json and the first records, not for the whole run
    (project / "run.yaml").write_text(
        (project / "run.yaml").read_text().replace("limit: 3", "limit: 12"), encoding="utf-8"
    )
    result = _run_on_tmpfs(project, "12k")
    output = result.stdout + result.stderr
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert "No space left on device" in output, output
    assert result.returncode == pytest.ExitCode.INTERRUPTED, output  # stopped early, resumable
    assert "results written before this point are kept" in output


def test_a_write_failure_mid_run_keeps_earlier_results_and_the_summary(pytester: pytest.Pytester, project: Path) -> None:
    """Without a tmpfs: a conftest makes appends fail after the first episodes."""
    pytester.makeconftest("""
        import errno
        import pytest_evomemory.runtime.run as run

        ORIGINAL = run.RunWriter

        class Full(ORIGINAL):
            appended = 0
            def _append(self, relative, record, stream=None):
                Full.appended += 1
                if Full.appended > 6:
                    def fail():
                        raise OSError(errno.ENOSPC, "No space left on device", relative)
                    self._guard(fail)
                    return
                super()._append(relative, record, stream)

        # patched for this session only: later in-process runs share the module
        def pytest_configure(config):
            run.RunWriter = Full

        def pytest_unconfigure(config):
            run.RunWriter = ORIGINAL
    """)
    result = pytester.runpytest("--evomemory-config=run.yaml")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert result.ret == pytest.ExitCode.INTERRUPTED  # the session stops: nothing more could be kept
    result.stdout.fnmatch_lines(["*writing the run directory*No space left on device*results written before this point are kept*"])
    run_dir = project / RUN_DIR
    assert len(read_jsonl(run_dir / "responses.jsonl")) == 3  # written before the failure: kept
    summary = summary_of(run_dir)  # still written: the disk "freed up"
    assert summary["passed"] is False and summary["completion"]["complete"] is False
    assert summary["overall"]["tasks"] < 6
