"""Arm names that are artefact names are refused before the first task.

With several ``--evomemory-config`` arms, each arm's directory is ``<dir>/<arm
name>`` beside the session's ``arms.json``, ``compare.html`` and ``compare.json``;
an arm named like one of them (or like anything a run directory holds) would end
the session after every paid task ran. The reserved names come from rundir/layout.py, the
one owner of the directory's format.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.validation import OUTPUT_ROOT_FILES
from pytest_evomemory.rundir import ARMS_DIRECTORY_FILES, RESERVED_NAMES
from pytest_evomemory.runtime.arm import check_arm_names
from pytest_evomemory.testing.fixtures import ServerFactory

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, tiny_run_config


def _named(directory: Path, base_url: str, name: str, file: str) -> Path:
    run = tiny_run_config(directory, base_url)
    path = directory / file
    path.write_text(run.read_text().replace("name: badinput", f"name: {name!r}", 1))
    return path


def test_the_reserved_names_are_what_the_directories_hold() -> None:
    arms_files = {"arms.json", "compare.html", "compare.json", "replicates.json", "replicates.html"}
    assert set(ARMS_DIRECTORY_FILES) == arms_files == set(OUTPUT_ROOT_FILES)
    assert {"history", "memory", "transcripts", ".lock", "run.json", "summary.json", "scores.jsonl",
            "report.html", *ARMS_DIRECTORY_FILES} <= RESERVED_NAMES


@pytest.mark.parametrize("name", [*ARMS_DIRECTORY_FILES, "ARMS.JSON", "Compare.Html"])
def test_the_arms_directorys_own_files_never_name_an_arm(tmp_path: Path, name: str) -> None:
    """They cannot even name a run: its directory would sit beside them in the output root."""
    with pytest.raises(ConfigError, match=r"is the name of a file the output root holds") as caught:
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", name, "b.yaml"))
    assert caught.value.key == "name" and "\n" not in str(caught.value)


RUN_ENTRIES = sorted(RESERVED_NAMES - set(ARMS_DIRECTORY_FILES) - {".lock", ".lock.owner", ".errors"})


@pytest.mark.parametrize("name", [*RUN_ENTRIES, "History", "MEMORY"])
def test_a_run_entry_cannot_name_an_arm_where_the_arms_directory_holds_a_run(tmp_path: Path, name: str) -> None:
    configs = [
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", "control", "a.yaml")),
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", name, "b.yaml")),
    ]
    fresh, former_run = tmp_path / "fresh", tmp_path / "former-run"
    fresh.mkdir()
    (former_run / "transcripts").mkdir(parents=True)
    (former_run / "run.json").write_text("{}", encoding="utf-8")
    assert check_arm_names(configs, fresh) == ["control", name]  # nothing there to collide with
    assert check_arm_names(configs) == ["control", name]
    with pytest.raises(ConfigError, match=rf"run name {name!r} cannot name an arm: .*former-run holds a run") as caught:
        check_arm_names(configs, former_run)
    assert caught.value.key == "name" and "\n" not in str(caught.value)


def test_two_arms_whose_names_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    configs = [
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", "Memory-Arm", "a.yaml")),
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", "control", "b.yaml")),
        load_run_config(_named(tmp_path, "http://127.0.0.1:9/v1", "MEMORY-ARM", "c.yaml")),
    ]
    with pytest.raises(ConfigError, match="two arms are named 'MEMORY-ARM'"):
        check_arm_names(configs)


@pytest.mark.parametrize("name", ["compare.json", "transcripts"])
def test_the_session_refuses_before_any_model_call(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """``arms`` held a single run before (``--evomemory-output-dir=arms``): an arm named
    ``transcripts`` would be that run's transcripts directory."""
    server = scripted_openai_server()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    (pytester.path / "arms" / "transcripts").mkdir(parents=True)
    (pytester.path / "arms" / "run.json").write_text("{}", encoding="utf-8")
    control = _named(pytester.path, server.base_url, "control", "control.yaml")
    hostile = _named(pytester.path, server.base_url, name, "hostile.yaml")
    result = pytester.runpytest(
        f"--evomemory-config={control}", f"--evomemory-config={hostile}", "--evomemory-output-dir=arms",
        "-p", "no:randomly", "-p", "no:cacheprovider",
    )
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*hostile.yaml: *run name {name!r} *"])
    assert server.requests == []
    assert sorted(path.name for path in (pytester.path / "arms").iterdir()) == ["run.json", "transcripts"]
