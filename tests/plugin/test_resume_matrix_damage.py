"""The resume matrix with damaged snapshot slots (issue 23), through the plugin as a user runs it.

A run of the resume matrix (tests/plugin/test_resume_matrix.py: its agent
repository, its kill -9 from inside the agent, its uninterrupted reference and
its comparison) is killed; then the snapshot slot the resume would restore from
is damaged the ways a power cut or a hand edit leaves it, and the run is resumed
with ``--evomemory-resume``:

* ``truncated``: the bytes that slot added, cut mid-line (the built-ins' shared
  record log; a third-party memory's own state file);
* ``bit-flipped``: one bit of them flipped, the length kept;
* ``emptied``: the slot's state file emptied (the built-ins' manifest);
* ``missing``: the slot removed;
* ``log bit-flipped`` (under ``-n 2``): one bit flipped at the start of the
  built-ins' shared log, which every slot of the stream stands on.

Either the resumed run's scores, every stream's final memory and the recalls
equal the uninterrupted run's (the damaged slot was not trusted: the resume went
back to the newest intact snapshot, or to the stream's start, and ran the
episodes after it again), or the resume is refused: one line naming the stream
and the slot and what to do, a non-zero exit (4, a usage error, when nothing
ran), no traceback, and the journal left as the killed run left it.

The killed run is made once per memory and mode and copied for each damage.
``evomemory run --resume`` passes over a damaged slot as the plugin does, and says so.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import read_jsonl
from .guarantee_project import make_project
from .test_resume_matrix import (
    BUILTIN,
    CONFTEST,
    REPO,
    RUN,
    Outcome,
    final_state,
    inner_runs_are_not_xdist_workers,  # noqa: F401 (an autouse fixture, used by being here)
    logged_recalls,
    reference,
    run,
)


def _newest_slot(stream_dir: Path) -> tuple[Path, int]:
    """The slot with the most episodes: the one a resume of the killed run restores from."""
    labelled = []
    for slot in stream_dir.glob("slot-*"):
        label = json.loads((slot / "episodes.json").read_text(encoding="utf-8"))
        if label.get("episodes"):
            labelled.append((label["episodes"], slot))
    episodes, slot = max(labelled)
    return slot, episodes


def _target(stream_dir: Path) -> tuple[Path, int, int]:
    """The file holding what the newest slot added and where that part starts and ends:
    the shared log's tail for the built-ins, the whole state file otherwise."""
    slot, _ = _newest_slot(stream_dir)
    state = sorted(path for path in (slot / "state").rglob("*") if path.is_file())
    if [path.name for path in state] == ["manifest.json"]:
        log = json.loads(state[0].read_text(encoding="utf-8"))["log"]
        path = stream_dir / "log" / f"records-{log['generation']}.jsonl"
        end = log["bytes"]
        start = path.read_bytes()[: end - 1].rindex(b"\n") + 1  # the last record the slot stands on
        return path, start, end
    return state[0], 0, state[0].stat().st_size


def truncated(stream_dir: Path) -> None:
    path, start, end = _target(stream_dir)
    path.write_bytes(path.read_bytes()[: (start + end) // 2])


def bit_flipped(stream_dir: Path) -> None:
    path, start, end = _target(stream_dir)
    data = bytearray(path.read_bytes())
    data[(start + end) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def emptied(stream_dir: Path) -> None:
    slot, _ = _newest_slot(stream_dir)
    for path in (slot / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"")


def missing(stream_dir: Path) -> None:
    shutil.rmtree(_newest_slot(stream_dir)[0])


def log_bit_flipped(stream_dir: Path) -> None:
    (log,) = (stream_dir / "log").glob("records-*.jsonl")
    data = bytearray(log.read_bytes())
    data[10] ^= 0x01
    log.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": truncated,
    "bit-flipped": bit_flipped,
    "emptied": emptied,
    "missing": missing,
    "log bit-flipped": log_bit_flipped,
}

#: (memory, mode) -> (where the run is killed, the stream it is killed in, episodes it completed there)
KILLED = {
    ("inprocess", "serial"): ("f06/task", "sample_facts", 5),
    ("sqlite", "serial"): ("f06/feedback", "sample_facts", 5),
    ("consolidating", "xdist"): ("f05/feedback", "sample_facts", 4),
    ("sqlite", "xdist"): ("c05/task", "sample_choice", 4),
}
SERIAL_DAMAGE = ("truncated", "bit-flipped", "emptied", "missing")
#: each damage once through the plugin, the two built-ins taking turns (every damage of
#: every backend is tested at the memory level: tests/memory/test_snapshot_integrity.py)
CASES = [
    *(pytest.param(memory, "serial", damage, id=f"{memory}-serial-{damage}")
      for memory, damage in zip(("inprocess", "sqlite") * 2, SERIAL_DAMAGE, strict=True)),
    pytest.param("consolidating", "xdist", "bit-flipped", id="consolidating-xdist-bit-flipped"),
    pytest.param("sqlite", "xdist", "log bit-flipped", id="sqlite-xdist-log-bit-flipped"),
]

#: (memory, mode) -> a copy of the killed run's directory and recall log
_KILLED_RUNS: dict[tuple[str, str], Path] = {}


def killed_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, memory: str, mode: str,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The matrix's run killed at its kill point (made once, kept as a copy)."""
    if (memory, mode) not in _KILLED_RUNS:
        kill_at, _, _ = KILLED[memory, mode]
        monkeypatch.setenv("RECALL_LOG", str(pytester.path / "recalls.log"))
        monkeypatch.setenv("KILL_AT", kill_at)
        xdist = ["-n", "2"] if mode == "xdist" else []
        killed = run(pytester, "--evomemory-config=run.yaml", "--evomemory-output-dir=out", *xdist)
        assert killed.ret != 0, killed.stdout.str()
        monkeypatch.delenv("KILL_AT")
        kept = tmp_path_factory.mktemp(f"killed-{memory}-{mode}")
        shutil.copytree(pytester.path / "out", kept / "out")
        shutil.copy(pytester.path / "recalls.log", kept / "recalls.log")
        _KILLED_RUNS[memory, mode] = kept
        return pytester.path / "out"
    kept = _KILLED_RUNS[memory, mode]
    shutil.copytree(kept / "out", pytester.path / "out")
    shutil.copy(kept / "recalls.log", pytester.path / "recalls.log")
    return pytester.path / "out"


@pytest.mark.slow
@pytest.mark.parametrize(("memory", "mode", "damage"), CASES)
def test_a_damaged_snapshot_slot_resumes_to_the_uninterrupted_run_or_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
    memory: str, mode: str, damage: str,
) -> None:
    pytester.makeconftest(CONFTEST)
    (pytester.path / "run.yaml").write_text(RUN.format(memory=BUILTIN.get(memory, BUILTIN["inprocess"])), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path) + ":" + str(REPO))
    monkeypatch.setenv("MATRIX_MEMORY", memory)
    monkeypatch.setenv("OUT_DIR", str(pytester.path / "out"))
    monkeypatch.delenv("KILL_AT", raising=False)
    expected = reference(pytester, monkeypatch, memory)

    out = killed_run(pytester, monkeypatch, memory, mode, tmp_path_factory)
    _, stream, completed = KILLED[memory, mode]
    stream_dir = out / "memory" / stream
    slot, episodes = _newest_slot(stream_dir)
    assert episodes == completed  # the slot the resume restores from
    DAMAGE[damage](stream_dir)
    journal = (out / "scores.jsonl").read_bytes()

    log = pytester.path / "recalls.log"
    monkeypatch.setenv("RECALL_LOG", str(log))
    resumed_from = len(logged_recalls(log))
    final = run(pytester, "--evomemory-resume=out", *(["-n", "2"] if mode == "xdist" else []))
    output = final.stdout.str() + final.stderr.str()
    assert "Traceback" not in output, output

    if final.ret != 0:  # refused: one line naming the stream and the slot, and what to do
        refusals = [line for line in output.splitlines() if f"stream {stream!r}" in line and slot.name in line]
        assert refusals, output
        assert "without --evomemory-resume" in refusals[0]
        assert (out / "scores.jsonl").read_bytes() == journal  # nothing ran, nothing was misattributed
        assert final.ret == 4, output
        return

    got = Outcome(out, log)
    assert got.scores == expected.scores
    assert got.memories == expected.memories
    assert got.recalls == expected.recalls
    assert len(read_jsonl(out / "scores.jsonl")) == 24  # each task scored once: the re-run episodes replaced
    # the resume said which slot it did not trust, and ran again what came after the slot it trusted;
    # under -n 2 the journal may end one episode short of the newest slot (the kill lets it lag by
    # one, see test_resume_matrix.py): the resume then restores the slot the journal names, never
    # reads the damaged one and has nothing to say of it
    journaled = sum(1 for line in journal.splitlines() if line.strip() and json.loads(line)["stream"] == stream)
    if journaled >= episodes:
        assert any(slot.name in line and f"stream {stream!r}" in line for line in output.splitlines()), output
    else:
        assert mode == "xdist" and journaled == episodes - 1, (journaled, episodes)
    stream_recalls = [(s, task) for s, task, _ in logged_recalls(log)[resumed_from:] if s == stream]
    first = stream_recalls[0][1]
    assert int(first[1:]) <= completed, stream_recalls  # the damaged slot's episode ran again


def test_evomemory_run_resumes_past_a_damaged_slot_and_says_which(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's resume of a complete run whose last snapshot was cut short runs
    that episode again, to the same scores and memory, and names the slot."""
    monkeypatch.chdir(make_project(pytester, monkeypatch))
    assert evomemory(["run", "--config", "run.yaml", "--output-dir", "out", "-q"]) == 0
    out = pytester.path / "out"
    stream_dir = out / "memory" / "sample_facts"
    scores = sorted(read_jsonl(out / "scores.jsonl"), key=lambda s: (s["stream"], s["task_id"]))
    memory = final_state(stream_dir, 3)
    slot, _ = _newest_slot(stream_dir)
    truncated(stream_dir)
    capsys.readouterr()

    assert evomemory(["run", "--resume", "out", "-q"]) == 0
    err = capsys.readouterr().err
    assert (
        f"evomemory: stream 'sample_facts': the memory snapshot after episode 3 is not restored ({slot.name}: "
        in err
    ), err
    assert "resuming from the newest intact snapshot, after episode 2: episode 3 runs again" in err
    again = sorted(read_jsonl(out / "scores.jsonl"), key=lambda s: (s["stream"], s["task_id"]))
    assert [(s["task_id"], s["correct"], s["extracted"]) for s in again] == [
        (s["task_id"], s["correct"], s["extracted"]) for s in scores
    ]
    assert final_state(stream_dir, 3) == memory
