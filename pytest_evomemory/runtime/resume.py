"""Resuming an interrupted session: what it was, read once from its directory.

A resume continues exactly the session that was interrupted, or refuses: the same
run configs (each arm's fingerprint is checked against its run.json), the same
``set`` overrides, limit and stream selection (re-applied unless the command line
gives them again), the same arms, and only the arms that session itself started
(an arm whose run.json another session wrote is started afresh, never adopted).

Nothing read here is used as a path to write to: an arm's directory is the one the
session derives from its own config and options, which the manifest is checked
against; the manifest's run directory entries only say whether an arm lived inside
the session's directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunConfig, replicate_of
from ..errors import named
from ..options import SHARD_UNITS
from ..rundir import (
    RUN_DOCUMENT,
    ArmsManifest,
    RunDirError,
    arm_dir_allowed,
    read_arms_manifest,
    read_run_document,
    recorded_config_path,
)
from ..rundocs import RunFile
from ..validation import long_name_problem

#: The resume option, in a message (the door spells it).
RESUME = named("resume")


@dataclass(frozen=True)
class ResumeSource:
    """The interrupted session in ``directory``: its configs (one per arm) and what
    its command line selected."""

    directory: Path
    configs: tuple[str, ...]
    overrides: tuple[str, ...]
    limit: int | None
    streams: tuple[str, ...]
    #: the arms' manifest (several arms), else None (one run's directory)
    manifest: ArmsManifest | None
    #: the shard ``(I, N)`` the interrupted session ran, if it was one
    shard: tuple[int, int] | None = None
    #: the unit of that shard's plan (``shard-by``)
    shard_by: str = SHARD_UNITS[0]

    @property
    def session(self) -> str | None:
        return self.manifest.session if self.manifest is not None else None

    @property
    def repeats(self) -> int | None:
        """The replicates per arm the interrupted session's command line gave."""
        return self.manifest.repeats if self.manifest is not None else None

    @property
    def arm_configs(self) -> tuple[str, ...]:
        """The run configs to load, one per arm: a repeated session's manifest lists
        each config once per replicate (``<name>@r<i>``), which the session expands again."""
        if self.manifest is None or all(replicate_of(entry.name) is None for entry in self.manifest.entries):
            return self.configs
        return tuple(entry.config for entry in self.manifest.entries if replicate_of(entry.name) in (None, 1))


def read_resume_source(directory: Path) -> ResumeSource:
    """What resuming ``directory`` resumes; :class:`RunDirError` naming what is missing."""
    too_long = long_name_problem(directory)
    if too_long is not None:
        raise RunDirError(
            f"{RESUME} {str(directory)[:80]!r}...: {too_long}; give the directory of the run to resume", option="resume"
        )
    manifest = read_arms_manifest(directory, RESUME)
    if manifest is not None:
        documents = [
            read_run_document(directory / entry.run_dir, RESUME)
            for entry in manifest.entries
            if _inside(directory, entry.run_dir) and (directory / entry.run_dir / RUN_DOCUMENT).exists()
        ]
        limit, streams = _recorded_selection(documents)
        return ResumeSource(
            directory, tuple(entry.config for entry in manifest.entries), manifest.overrides, limit, streams, manifest,
            *_recorded_shard(documents),
        )
    document = read_run_document(directory, RESUME)
    if document.replicate is not None:
        raise RunDirError(
            f"{RESUME} {directory}: this is one replicate of a repeated session; resume the session's directory "
            f"(the one holding its arms.json, {directory.parent}), which continues every replicate",
            option="resume",
        )
    path = document.run.path
    if path is None or path == "":
        raise RunDirError(
            f"{RESUME} {directory}: its run.json names no run config; give the run config as well",
            option="resume",
        )
    path = recorded_config_path(path, f"{RESUME} {directory}: {directory / RUN_DOCUMENT}: key 'run.path'")
    overrides = document.run.overrides
    if overrides is None:
        overrides = []
    if not isinstance(overrides, list) or not all(isinstance(item, str) for item in overrides):
        raise RunDirError(
            f"{RESUME} {directory}: its run.json key 'run.overrides' is not a list of KEY=VALUE strings "
            "(the file was edited or damaged); fix it, or give the overrides yourself",
            option="resume",
        )
    limit, streams = _recorded_selection([document])
    return ResumeSource(directory, (path,), tuple(overrides), limit, streams, None, *_recorded_shard([document]))


def _inside(directory: Path, relative: str) -> bool:
    """Whether a manifest's run directory entry names a folder inside ``directory``."""
    if Path(relative).is_absolute():
        return False
    base = directory.resolve()
    target = (directory / relative).resolve()
    return base in target.parents


def arm_dir_recorded(manifest: ArmsManifest, name: str, directory: Path) -> Path | None:
    """Where the manifest says arm ``name`` lived, resolved, or None if it names none."""
    for entry in manifest.entries:
        if entry.name == name:
            if _inside(directory, entry.run_dir):
                return (directory / entry.run_dir).resolve()
            return Path(entry.run_dir).resolve() if Path(entry.run_dir).is_absolute() else None
    return None


def check_manifest_dirs(resume: ResumeSource, run_configs: Sequence[RunConfig], here: Path) -> None:
    """Each arm directory the arms manifest names must be one the session's own inputs
    name: inside the manifest's directory, or the arm's config's ``output_dir``."""
    if resume.manifest is None:
        return
    directory = resume.directory
    for entry, run_config in zip(resume.manifest.entries, run_configs, strict=False):
        recorded = Path(entry.run_dir)
        run_dir = recorded if recorded.is_absolute() else directory / recorded
        own = here / run_config.output_dir if run_config.output_dir else None
        if not arm_dir_allowed(run_dir, directory, own):
            raise RunDirError(
                f"{RESUME} {directory}: its arms.json names {run_dir} as arm {entry.name!r}'s directory, which is "
                "neither inside it nor that arm's output_dir (the manifest was edited or damaged); resume each "
                f"arm's directory on its own ({RESUME}=DIR/<arm>)",
                option="resume",
            )


def _recorded_selection(documents: list[RunFile]) -> tuple[int | None, tuple[str, ...]]:
    """The limit and streams the interrupted run's command line gave, when every arm
    agrees on them (a limit or stream list from the config file is the config's own:
    the config is read again, and a changed one is refused as a changed config)."""
    benchmarks = [_mapping(document.run.selection) for document in documents]
    if not benchmarks:
        return None, ()
    limit: int | None = None
    if len({json.dumps(benchmark.get("limit")) for benchmark in benchmarks}) == 1:
        value = benchmarks[0].get("limit")
        if isinstance(value, int) and not isinstance(value, bool):
            limit = value
    streams: tuple[str, ...] = ()
    if len({json.dumps(benchmark.get("streams")) for benchmark in benchmarks}) == 1:
        names = benchmarks[0].get("streams")
        if isinstance(names, list) and names and all(isinstance(name, str) for name in names):
            streams = tuple(names)
    return limit, streams


def _recorded_shard(documents: list[RunFile]) -> tuple[tuple[int, int] | None, str]:
    """The shard ``(I, N)`` the interrupted session ran (its run.json's ``shard``), if
    any arm recorded one, and its plan's unit; a resume runs the same shard (the plan
    is checked again)."""
    for document in documents:
        record = document.shard
        if record is not None and 1 <= record.index <= record.count:
            return (record.index, record.count), record.unit
    return None, SHARD_UNITS[0]


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def started_by(run_dir: Path) -> str | None:
    """The session that wrote the run directory's run.json (None: none recorded)."""
    return read_run_document(run_dir, RESUME).session


__all__ = ["ResumeSource", "arm_dir_recorded", "check_manifest_dirs", "read_resume_source", "started_by"]
