"""One strict parser of an arm's label (``<arm>@r<i>``), serving both readers of it:
the session's (:func:`config.replicate_of`, :func:`config.arm_name`: which configs a
resumed session loads) and the arms manifest's check of its ``repeats``
(:func:`rundir.read_arms_manifest`). A label reads as a replicate's only as
:func:`config.arm_label` forms it; a loose parser would take ``@r01`` for replicate 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.config import arm_label, arm_name, replicate_of, split_label
from pytest_evomemory.rundir import ResumeSource, RunDirError, read_arms_manifest

#: Labels a loose parser (``@r`` then digits, or anything after ``@``) would read as a replicate's.
NOT_REPLICATES = ["memory@r01", "memory@r1234567", "memory@r", "memory@rx", "memory@r-1", "memory@r 2", "memory@r2x"]


@pytest.mark.parametrize("index", [1, 2, 10, 100, 999_999])
def test_a_label_the_session_forms_reads_back_as_its_arm_and_replicate(index: int) -> None:
    label = arm_label("memory", index)
    assert split_label(label) == ("memory", index)
    assert (arm_name(label), replicate_of(label)) == ("memory", index)


@pytest.mark.parametrize("label", NOT_REPLICATES)
def test_a_label_not_formed_by_the_session_is_no_replicate_and_names_itself_whole(label: str) -> None:
    assert split_label(label) == (label, None)
    assert replicate_of(label) is None
    assert arm_name(label) == label


def test_a_plain_run_name_is_its_own_arm() -> None:
    assert split_label("memory") == ("memory", None)


def _manifest(directory: Path, names: list[str], repeats: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    arms = [{"name": name, "run_dir": f"d{i}", "config": f"c{i}.yaml"} for i, name in enumerate(names)]
    document = {"schema_version": 1, "baseline": names[0], "repeats": repeats, "arms": arms}
    (directory / "arms.json").write_text(json.dumps(document), encoding="ascii")


def test_a_manifest_whose_arms_are_its_replicates_gives_its_repeats(tmp_path: Path) -> None:
    _manifest(tmp_path, ["memory@r1", "memory@r2", "control@r1", "control@r2"], 2)
    manifest = read_arms_manifest(tmp_path, "--evomemory-resume")
    assert manifest is not None and manifest.repeats == 2


@pytest.mark.parametrize("second", ["memory@r02", "memory@r", "memory@rx", "memory@r0000002", "memory@r1234567"])
def test_a_manifest_listing_a_replicate_the_session_never_forms_is_damage(tmp_path: Path, second: str) -> None:
    """A loose parser would count ``memory@r02`` as replicate 2 and obey ``repeats: 2``."""
    _manifest(tmp_path, ["memory@r1", second], 2)
    with pytest.raises(RunDirError, match=r"'repeats' is 2 but the manifest lists arm 'memory' with replicates r1 \("):
        read_arms_manifest(tmp_path, "--evomemory-resume")


def test_a_resumed_session_loads_each_arms_config_once_and_a_label_it_never_formed_as_its_own(tmp_path: Path) -> None:
    """The session's caller: a repeated session's manifest lists each config once per
    replicate, and the resume loads it once (replicate 1); an entry whose label is no
    replicate's (``@r02``, ``@r``) is an arm of its own, loaded as such, never taken
    for a second replicate and dropped."""
    names = ["memory@r1", "memory@r2", "control@r1", "control@r2", "odd@r02", "bare@r"]
    _manifest(tmp_path, names, 2)
    document = json.loads((tmp_path / "arms.json").read_text(encoding="ascii"))
    del document["repeats"]  # the labels alone, as a manifest without the option records them
    (tmp_path / "arms.json").write_text(json.dumps(document), encoding="ascii")
    manifest = read_arms_manifest(tmp_path, "--evomemory-resume")
    assert manifest is not None
    source = ResumeSource(tmp_path, tuple(e.config for e in manifest.entries), (), None, (), manifest)
    assert source.arm_configs == ("c0.yaml", "c2.yaml", "c4.yaml", "c5.yaml")
