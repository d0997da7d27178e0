"""Resuming an interrupted session: what it was, read once from its directory.

A resume continues exactly the session that was interrupted, or refuses: the same
run configs (each arm's fingerprint is checked against its run.json), the same
``set`` overrides, limit and stream selection (re-applied unless the command line
gives them again), the same arms, and only the arms that session itself started
(an arm whose run.json another session wrote is started afresh, never adopted).

Nothing read here is used as a path to write to: an arm's directory is the one
:class:`.placement.Placement` derives from the session's own config and options,
which the manifest is checked against; the manifest's run directory entries only
say whether an arm lived inside the session's directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..config import replicate_of
from ..core.errors import named
from ..core.validation import long_name_problem
from ..options import SHARD_UNITS, SessionOptions
from ..rundocs import RunFile
from .arms import ArmsManifest, inside, read_arms_manifest
from .layout import RUN_DOCUMENT, RunDirError
from .paths import recorded_config_path
from .reader import read_run_document

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
            if inside(directory, entry.run_dir) and (directory / entry.run_dir / RUN_DOCUMENT).exists()
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


class _Selection(BaseModel):
    """run.json's ``run.selection``: the limit and streams the command line gave, as
    recorded (each checked where it is used: a damaged one is not the command line's)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    limit: Any = None
    streams: Any = None


def _recorded_selection(documents: list[RunFile]) -> tuple[int | None, tuple[str, ...]]:
    """The limit and streams the interrupted run's command line gave, when every arm
    agrees on them (a limit or stream list from the config file is the config's own:
    the config is read again, and a changed one is refused as a changed config)."""
    selections = [_Selection.model_validate(_mapping(document.run.selection)) for document in documents]
    if not selections:
        return None, ()
    limit: int | None = None
    if len({json.dumps(selection.limit) for selection in selections}) == 1:
        value = selections[0].limit
        if isinstance(value, int) and not isinstance(value, bool):
            limit = value
    streams: tuple[str, ...] = ()
    if len({json.dumps(selection.streams) for selection in selections}) == 1:
        names = selections[0].streams
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


def with_recorded(options: SessionOptions, resume: ResumeSource) -> SessionOptions:
    """The resumed session's options: what it recorded, unless given again; a shard
    other than the recorded one is refused: the directory holds that share's records,
    and would be relabelled as another share of the session (a merge would then
    count its earlier records as the new share's)."""
    shard_by = options.shard_by if "shard_by" in options.given else resume.shard_by
    shard = options.shard if "shard" in options.given else resume.shard
    if shard != resume.shard or (shard is not None and shard_by != resume.shard_by):
        recorded = "the whole session" if resume.shard is None else (
            f"shard {resume.shard[0]}/{resume.shard[1]} by {resume.shard_by}"
        )
        asked = "the whole session" if shard is None else f"shard {shard[0]}/{shard[1]} by {shard_by}"
        raise RunDirError(
            f"{named('resume')} {resume.directory} ran {recorded}, and this command asks for {asked}; a resume "
            f"runs the share it recorded: leave {named('shard')} and {named('shard-by')} out, or start a new run "
            f"in another {named('output-dir')}",
            option="shard",
        )
    return replace(
        options,
        settings=options.settings if "set" in options.given else resume.overrides,
        repeats=options.repeats if "repeats" in options.given else resume.repeats,
        limit=options.limit if "limit" in options.given else resume.limit,
        streams=options.streams if "stream" in options.given else resume.streams,
        shard=options.shard if "shard" in options.given else resume.shard,
        shard_by=options.shard_by if "shard_by" in options.given else resume.shard_by,
    )


def started_by(run_dir: Path) -> str | None:
    """The session that wrote the run directory's run.json (None: none recorded)."""
    return read_run_document(run_dir, RESUME).session


__all__ = ["ResumeSource", "read_resume_source", "started_by", "with_recorded"]
