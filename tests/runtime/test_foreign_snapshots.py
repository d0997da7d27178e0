"""A stream's memory snapshots copied in from another run are never restored.

``memory/<stream>/`` of another run of another config (the same stream and memory
system, another ``top_k``; another replicate's seed) verifies byte for byte, but
holds a memory the run's recorded episodes never built: a resume that would
continue the stream from it is refused in one line (exit 4, before any task,
nothing changed), while a run's own snapshots resume as before. In-process
(``evomemory run``); the interrupted run is a finished one whose summary is gone
and whose last score and response were torn (a kill mid-write).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import SAMPLE_MEMORY_RUN

STREAM = "sample_facts"
CONFIG = ["--config", str(SAMPLE_MEMORY_RUN), "--stream", STREAM, "--limit", "3", "-q"]


def _interrupt(run_dir: Path) -> None:
    """The run as a kill during its last task leaves it: no summary, the last lines torn."""
    (run_dir / "summary.json").unlink()
    for name in ("scores.jsonl", "responses.jsonl"):
        data = (run_dir / name).read_bytes()
        (run_dir / name).write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 40])


def _swap_memory(run_dir: Path, source: Path) -> Path:
    """``run_dir``'s memory/<stream>/ replaced by ``source``'s; where its own went."""
    own = run_dir / "memory" / STREAM
    kept = run_dir.parent / f"{run_dir.name}-own-memory"
    shutil.move(own, kept)
    shutil.copytree(source / "memory" / STREAM, own)
    return kept


def _files(run_dir: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}


def _refused(run_dir: Path, resume: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _files(run_dir)
    capsys.readouterr()
    assert evomemory(["run", "--resume", str(resume), "-q"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for text in (str(run_dir / "memory" / STREAM), f"stream {STREAM!r}", "written by another run's config",
                 f"put back this run's own memory/{STREAM}/ directory, or run again without --resume"):
        assert text in err, err
    assert _files(run_dir) == before  # nothing ran, nothing was written


def _resumes_to(run_dir: Path, resume: Path, whole: bytes) -> None:
    assert evomemory(["run", "--resume", str(resume), "-q"]) == 0
    assert (run_dir / "scores.jsonl").read_bytes() == whole
    assert json.loads((run_dir / "summary.json").read_text())["completion"]["complete"] is True


def test_snapshots_of_another_configs_run_are_refused_and_the_runs_own_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert evomemory(["run", *CONFIG, "--output-dir", str(a)]) == 0
    assert evomemory(["run", *CONFIG, "--set", "memory.top_k=1", "--output-dir", str(b)]) == 0
    whole = (a / "scores.jsonl").read_bytes()
    _interrupt(a)
    own = _swap_memory(a, b)
    _refused(a, a, capsys)
    shutil.rmtree(a / "memory" / STREAM)
    shutil.move(own, a / "memory" / STREAM)
    _resumes_to(a, a, whole)


def test_a_replicate_resumes_its_own_snapshots_and_refuses_a_siblings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert evomemory(["run", *CONFIG, "--repeats", "2", "--output-dir", str(out)]) == 0
    r1 = out / "r1"
    whole = (r1 / "scores.jsonl").read_bytes()
    _interrupt(r1)
    own = _swap_memory(r1, out / "r2")  # the same tasks and memory system, another seed
    _refused(r1, out, capsys)
    shutil.rmtree(r1 / "memory" / STREAM)
    shutil.move(own, r1 / "memory" / STREAM)
    _resumes_to(r1, out, whole)
