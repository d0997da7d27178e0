"""Nothing read from a run directory names a path.

An artefact is data: the previous run's ``run.json`` ``started`` value, an arms
manifest's ``run_dir`` and ``config``, ``run.json``'s ``run.path``. Each place
such a value could reach a path either makes the name itself (history entries) or
accepts only what the user's own inputs name, refusing the rest with one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.core.errors import named
from pytest_evomemory.rundir import (
    HISTORY,
    RUN_FILES,
    RunDirError,
    move_previous_run_aside,
    read_arms_manifest,
)
from pytest_evomemory.rundir.history import history_name
from pytest_evomemory.rundir.paths import recorded_config_path
from pytest_evomemory.rundir.placement import arm_dir_allowed

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, tiny_run_config

HOSTILE_STARTS = [
    "../../../x", "../x", "..", ".", "/tmp/absolute-x", "a/b", "a\\b", "x\x00y", "\x1b[2J", "", " ", 12, None,
    ["2026"], {"a": 1}, "2026-12-02T10:15:00+00:00/../../x", "2026-13-45T99:99:99", "9" * 400,
]


@pytest.mark.parametrize("started", HOSTILE_STARTS, ids=[repr(s)[:30] for s in HOSTILE_STARTS])
def test_a_history_entry_is_named_by_the_writer_whatever_run_json_says(tmp_path: Path, started: object) -> None:
    run_dir = tmp_path / "out" / "run"
    run_dir.mkdir(parents=True)
    for name in RUN_FILES:
        (run_dir / name).write_text(json.dumps({"started": started}) if name == "run.json" else "{}\n")
    before = sorted(p for p in tmp_path.rglob("*"))
    target = move_previous_run_aside(run_dir)
    assert target is not None and target.parent == run_dir / HISTORY
    assert sorted(p.name for p in target.iterdir()) == sorted(RUN_FILES)
    created = sorted(set(tmp_path.rglob("*")) - set(before))
    assert all(run_dir / HISTORY in path.parents or path == run_dir / HISTORY for path in created)
    assert not any((run_dir / name).exists() for name in RUN_FILES)


@pytest.mark.parametrize(
    ("started", "name"),
    [
        ("2026-12-02T10:15:00+00:00", "2026-12-02T101500Z"),
        ("2026-12-02T10:15:00Z", "2026-12-02T101500Z"),
        ("2026-12-02T12:15:00+02:00", "2026-12-02T101500Z"),
        ("2026-12-02T10:15:00.123456", "2026-12-02T101500Z"),
    ],
)
def test_a_strict_timestamp_still_gives_the_name(started: str, name: str) -> None:
    assert history_name(started) == name


def test_a_run_json_pointing_outside_moves_nothing_outside(
    pytester: pytest.Pytester, scripted_openai_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user meets it: the previous run's run.json was edited to send the next
    run's move outside the output directory; the next run keeps everything inside."""
    from pytest_evomemory.testing.scripted_server import echo_policy

    server = scripted_openai_server(echo_policy)  # type: ignore[operator]
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url)
    first = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert first.ret == 0
    results = pytester.path / "results"
    document = json.loads((results / "run.json").read_text())
    escape = pytester.path / "escaped"
    for started in ("../../escaped/x", str(escape / "y")):
        document["started"] = started
        (results / "run.json").write_text(json.dumps(document))
        again = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
        assert_no_internal_error(again)
        assert again.ret == 0
    assert not escape.exists() and not (pytester.path.parent / "escaped").exists()
    entries = list((results / HISTORY).iterdir())
    assert len(entries) == 2 and all((entry / "scores.jsonl").is_file() for entry in entries)


def _manifest(directory: Path, run_dirs: list[object], configs: list[object] | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    configs = configs or [str(directory / f"{i}.yaml") for i in range(len(run_dirs))]
    arms = [{"name": f"a{i}", "run_dir": d, "config": c} for i, (d, c) in enumerate(zip(run_dirs, configs, strict=True))]
    (directory / "arms.json").write_text(json.dumps({"schema_version": 1, "baseline": "a0", "arms": arms}))


@pytest.mark.parametrize(
    "run_dir",
    ["../elsewhere", "a/../../b", "..", ".", "", "  ", "x\x00y", "x\ny", 5, None, ["a"]],
    ids=["parent", "dotdot-inside", "dotdot", "dot", "empty", "blank", "nul", "newline", "number", "null", "list"],
)
def test_an_arms_manifest_cannot_send_an_arm_outside(tmp_path: Path, run_dir: object) -> None:
    _manifest(tmp_path / "arms", ["a0", run_dir])
    with pytest.raises(RunDirError, match=r"names the arm directory .* which is not a directory inside it") as caught:
        read_arms_manifest(tmp_path / "arms", named("resume"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "config",
    ["/etc/passwd", "../secrets.txt", "run.yaml\x00.txt", "", 7, None, "conf.yaml.bak"],
    ids=["etc-passwd", "txt", "nul", "empty", "number", "null", "bak"],
)
def test_an_arms_manifest_names_only_run_config_files(tmp_path: Path, config: object) -> None:
    _manifest(tmp_path / "arms", ["a0", "a1"], [str(tmp_path / "ok.yaml"), config])
    with pytest.raises(RunDirError, match=r"an arm's 'config' is .*which is not a run config file"):
        read_arms_manifest(tmp_path / "arms", named("resume"))
    with pytest.raises(RunDirError, match=r"key 'run.path' is .*not a run config file"):
        recorded_config_path(config, "run.json: key 'run.path'")


def test_an_absolute_arm_directory_must_be_the_arms_own_output_dir(tmp_path: Path) -> None:
    directory = tmp_path / "arms"
    inside, own, other = directory / "a1", tmp_path / "mine", tmp_path / "elsewhere"
    assert arm_dir_allowed(inside, directory, None)
    assert arm_dir_allowed(own, directory, own)
    assert not arm_dir_allowed(other, directory, own)
    assert not arm_dir_allowed(directory, directory, None)  # the manifest's own directory is no arm's
    (directory / "link").parent.mkdir(parents=True, exist_ok=True)
    (directory / "link").symlink_to(other)
    assert not arm_dir_allowed(directory / "link", directory, None)  # a link inside that leads outside


def test_resuming_arms_whose_manifest_points_outside_is_refused_in_one_line(pytester: pytest.Pytester) -> None:
    from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN

    out = pytester.path / "arms"
    outside = pytester.path / "outside"
    _manifest(out, ["sample_no_memory", str(outside)], [str(SAMPLE_NO_MEMORY_RUN), str(SAMPLE_MEMORY_RUN)])
    result = pytester.runpytest("-p", "no:randomly", "--evomemory-resume=arms")
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "evomemory" in line]
    assert len(errors) == 1 and "neither inside it nor that arm's output_dir" in errors[0]
    assert not outside.exists()


def test_resuming_a_run_whose_run_json_names_another_file_is_refused(pytester: pytest.Pytester) -> None:
    out = pytester.path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema_version": 1, "run": {"path": "/etc/passwd"}}))
    result = pytester.runpytest("-p", "no:randomly", "--evomemory-resume=out")
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*run.json: key 'run.path' is '/etc/passwd', which is not a run config file*"])
    assert "root:" not in result.stdout.str() + result.stderr.str()
