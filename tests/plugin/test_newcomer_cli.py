"""Issue 18, the command line: ``--evomemory-set``, ``evomemory --version`` and
``init``, and a wheel that ships the built-in configs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pytest_evomemory
from pytest_evomemory.cli import main
from pytest_evomemory.cli.init import starter_files
from pytest_evomemory.configs import BUILTIN_DIR

from ..conftest import REPO


def run_document(pytester: pytest.Pytester, name: str) -> dict[str, object]:
    document: dict[str, object] = json.loads(
        (pytester.path / "evomemory-results" / name / "run.json").read_text(encoding="utf-8")
    )
    return document


# ----------------------------------------------------------------------------- --evomemory-set


def test_set_overrides_any_key_and_is_recorded_in_run_json(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--evomemory-config=sample_no_memory", "--evomemory-set", "agent.baseline.fallback_answer=teal",
        "--evomemory-set=benchmark.limit=3", "--evomemory-set", "name=renamed",
    )
    result.assert_outcomes(passed=6)
    run = run_document(pytester, "renamed")["run"]
    assert isinstance(run, dict)
    assert run["overrides"] == ["agent.baseline.fallback_answer=teal", "benchmark.limit=3", "name=renamed"]
    assert run["agent"]["baseline"]["fallback_answer"] == "teal" and run["benchmark"]["limit"] == 3
    # f01's target is teal: the overridden fallback answers it.
    scores = (pytester.path / "evomemory-results" / "renamed" / "scores.jsonl").read_text(encoding="utf-8")
    assert json.loads(scores.splitlines()[0])["correct"] is True


def test_set_reaches_into_a_part_that_is_not_set_yet(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = pytester.runpytest(
        "--evomemory-config=sample_memory", "--evomemory-set", "agent.model.model=my-model", "--collect-only", "-q",
    )
    assert result.ret == 0
    from pytest_evomemory.configs import builtin_path
    from pytest_evomemory.configs.load import load_run_config

    config = load_run_config(builtin_path("sample_memory"), ["agent.model.model=my-model", "memory.top_k=2"])
    assert config.agent.model is not None and config.agent.model.model == "my-model"
    assert config.memory.top_k == 2
    # A whole part replaced by another file (given on the command line, so relative to
    # the working directory: docs/configuration.md "Relative paths"), then a key of it.
    monkeypatch.chdir(builtin_path("sample_memory").parent)
    swapped = load_run_config(
        builtin_path("sample_memory"), ["agent=../agents/recall_baseline_no_memory.yaml", "agent.max_steps=2"]
    )
    assert swapped.agent.memory_strategy == "none" and swapped.agent.max_steps == 2
    assert swapped.sources["agent"].endswith("recall_baseline_no_memory.yaml")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("agent.modle.model=x", "*key 'modle': unknown key (did you mean 'model'?); the keys here are: kind, memory_strategy, max_steps, *model, options"),
        ("agnt.kind=x", "*--evomemory-set 'agnt.kind=x': unknown key 'agnt.kind' (did you mean 'agent'?); a key starts with one of benchmark, agent, memory*"),
        ("agent.max_steps=lots", "*key 'max_steps': *integer*"),
        ("agent.kind", "*expected KEY=VALUE*"),
        ("agent.kind.x=1", "*'agent.kind' is not a mapping*"),
    ],
)
def test_a_bad_setting_is_one_usage_error_naming_the_key(pytester: pytest.Pytester, setting: str, message: str) -> None:
    result = pytester.runpytest("--evomemory-config=sample_memory", f"--evomemory-set={setting}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_a_resumed_run_keeps_its_settings(pytester: pytest.Pytester) -> None:
    pytester.runpytest(
        "--evomemory-config=sample_no_memory", "--evomemory-set=agent.baseline.fallback_answer=teal",
        "-k", "f01 or f02",
    ).assert_outcomes(passed=2, deselected=22)
    # -k picked the tasks: a side run, resumed where the session said it wrote it
    result = pytester.runpytest("--evomemory-resume=evomemory-results/sample_no_memory/side-run")
    result.assert_outcomes(passed=22, deselected=2)
    run = run_document(pytester, "sample_no_memory/side-run")["run"]
    assert isinstance(run, dict) and run["overrides"] == ["agent.baseline.fallback_answer=teal"]


# ----------------------------------------------------------------------------- the evomemory command


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"evomemory {pytest_evomemory.__version__}"


def test_init_writes_editable_configs_that_run(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(pytester.path / "configs")]) == 0
    written = sorted(p.relative_to(pytester.path / "configs") for p in (pytester.path / "configs").rglob("*.yaml"))
    assert written == starter_files() and Path("runs/sample_memory.yaml") in written
    # the documented command's config is among them
    assert (pytester.path / "configs" / "runs" / "testing" / "evomemory_single_turn_medium.yaml").is_file()
    printed = capsys.readouterr().out
    assert "pytest --evomemory-config=" in printed
    pytester.runpytest("--evomemory-config=configs/runs/sample_memory.yaml", "--evomemory-limit=1").assert_outcomes(passed=2)
    # the printed comparison command runs both arms
    compare = next(line for line in printed.splitlines() if line.startswith("does memory help?"))
    arms = [word for word in compare.split() if word.startswith("--evomemory-config=")]
    assert len(arms) == 2
    result = pytester.runpytest(*arms, "--evomemory-limit=1")
    result.assert_outcomes(passed=4)
    assert (pytester.path / "evomemory-results" / "compare.json").is_file()
    assert main(["init", str(pytester.path / "configs")]) == 0  # again: nothing to write, nothing touched
    assert "nothing to write: all" in capsys.readouterr().out


def test_init_writes_the_missing_files_and_leaves_the_others_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As its help says: after one file was deleted, init writes that one back."""
    target = tmp_path / "configs"
    assert main(["init", str(target)]) == 0
    edited, deleted = target / "runs" / "sample_memory.yaml", target / "memory" / "sqlite.yaml"
    edited.write_text("# my edits\n" + edited.read_text(encoding="utf-8"), encoding="utf-8")
    shipped = deleted.read_bytes()
    deleted.unlink()
    capsys.readouterr()
    assert main(["init", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"wrote 1 of {len(starter_files())} config files" in out and "left alone" in out
    assert deleted.read_bytes() == shipped and edited.read_text(encoding="utf-8").startswith("# my edits")
    assert main(["init", "--force", str(target)]) == 0  # --force: the shipped files again
    assert not edited.read_text(encoding="utf-8").startswith("# my edits")
    (tmp_path / "blocked").write_text("a file where the directory should be")
    assert main(["init", str(tmp_path / "blocked")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"evomemory: error: {tmp_path / 'blocked'} is a regular file, not a directory; give a")
    assert len(err.strip().splitlines()) == 1


def test_evomemory_run_takes_a_builtin_name_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--config", "sample_memory", "--limit", "1", "-q", "--set", "name=cli_run"])
    assert code == 0
    document = json.loads((tmp_path / "evomemory-results" / "cli_run" / "run.json").read_text(encoding="utf-8"))
    assert document["run"]["overrides"] == ["name=cli_run"]


# ----------------------------------------------------------------------------- the wheel


@pytest.mark.slow
def test_the_wheel_ships_the_builtin_configs_and_they_run_by_name(tmp_path: Path, pytester: pytest.Pytester) -> None:
    """Built from a copy of the sources, so the checkout gets no build/ directory."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "pytest_evomemory", source / "pytest_evomemory", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("pytest_evomemory-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"pytest_evomemory/configs/{p.relative_to(BUILTIN_DIR).as_posix()}" for p in BUILTIN_DIR.rglob("*.yaml")}
    assert shipped and shipped <= names
    # Installed from that wheel, a built-in name runs from a directory with no configs.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env_python = (
        "import sys; sys.path.insert(0, sys.argv[1]); import pytest_evomemory.configs as c; "
        "print(c.builtin_path('sample_memory'))"
    )
    located = subprocess.run([sys.executable, "-c", env_python, str(site)], capture_output=True, text=True, check=True)
    assert located.stdout.strip().startswith(str(site))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
         "--evomemory-config=sample_memory", "--evomemory-limit=1"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, check=False,
        env={**_env_without_pythonpath(), "PYTHONPATH": str(site)},
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert f"from {site}" in run.stdout and "2 passed" in run.stdout


def _env_without_pythonpath() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
