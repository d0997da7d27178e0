"""A refusal of ``evomemory run`` names each option as that command takes it
(``--output-dir``): the engine names the option by identity and the command spells
it (tests/test_options_by_identity.py checks every kind through both doors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evomemory.cli import main as evomemory


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
