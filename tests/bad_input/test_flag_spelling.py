"""A refusal of ``evomemory run`` names each option as that command takes it
(``--output-dir``), though the engine's messages are written once, in pytest's
spelling; a quoted ``pytest --evomemory-...`` command stays as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.options import CLI_FLAGS, PYTEST_FLAGS


def test_options_are_spelled_as_the_entry_point_takes_them() -> None:
    text = "give another --evomemory-output-dir, or pass --evomemory-config; run pytest --evomemory-resume=DIR"
    assert CLI_FLAGS.spelled(text) == "give another --output-dir, or pass --config; run pytest --evomemory-resume=DIR"
    assert PYTEST_FLAGS.spelled(text) == text
    assert CLI_FLAGS.spelled("--evomemory-nonsense and --evomemory") == "--evomemory-nonsense and --evomemory"
    # another session's command line, quoted as it was given, is not ours to respell
    held = "in use by another run: process 7 (command 'python -m pytest -q --evomemory-config=run.yaml'); give another --evomemory-output-dir"
    assert CLI_FLAGS.spelled(held) == held.replace("give another --evomemory-output-dir", "give another --output-dir")


def test_evomemory_run_names_its_own_flag_in_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file where the results would go", encoding="utf-8")
    run = tmp_path / "run.yaml"
    run.write_text("benchmark: {benchmark: sample}\nagent: {}\noutput_dir: taken\n", encoding="utf-8")
    assert evomemory(["run", "--config", str(run), "-q"]) == 4
    error = capsys.readouterr().err.strip()
    assert "is a file, not a directory; remove it or give another --output-dir" in error, error
    assert "--evomemory-" not in error and len(error.splitlines()) == 1
