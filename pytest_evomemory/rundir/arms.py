"""arms.json: which arms a session ran, where, from which configs; written beside
them so that a resume of the directory continues every arm, and read back as a
record that is checked, never obeyed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..config import split_label
from ..core.errors import named
from ..options import MAX_REPEATS, count_problem
from ..rundocs import ARMS_SCHEMA_VERSION, ArmEntryDoc, ArmsFile
from .jsonl import read_json, write_json_atomically
from .layout import ARMS_MANIFEST, RunDirError, cannot_write
from .paths import recorded_arm_dir, recorded_config_path
from .reader import newer_schema


@dataclass(frozen=True)
class ArmEntry:
    """One arm of a session, as its manifest records it. ``run_dir`` is relative to
    the manifest's directory when the arm lives inside it (it always does when the
    session was given an output directory), else where the arm's config put it."""

    name: str
    run_dir: str
    config: str


@dataclass(frozen=True)
class ArmsManifest:
    """Which arms a session ran (first = baseline), from which configs, with which
    ``set`` overrides, and the session's id (each arm's run.json records it too)."""

    entries: tuple[ArmEntry, ...]
    overrides: tuple[str, ...]
    session: str | None
    #: the command line's replicates per arm (``repeats``), if it gave them
    repeats: int | None = None


def write_arms_manifest(
    directory: Path, arms: Sequence[tuple[str, Path, str]], overrides: Sequence[str], session: str,
    repeats: int | None = None,
) -> None:
    """Record a session's arms ``(name, run directory, config)`` beside them, so that
    resuming the directory can continue every arm of an interrupted session. A write
    the system refuses (a full disk, a read-only or vanished directory) is a
    :class:`.RunDirError` naming the manifest: it is written before the first record,
    so nothing of the session is recorded yet."""
    path = directory / ARMS_MANIFEST
    try:
        directory.mkdir(parents=True, exist_ok=True)
        base = directory.resolve()

        def where(run_dir: Path) -> str:
            resolved = run_dir.resolve()
            return str(resolved.relative_to(base)) if base in resolved.parents else str(resolved)

        write_json_atomically(path, ArmsFile(
            session=session, baseline=arms[0][0], overrides=list(overrides), repeats=repeats,
            arms=[ArmEntryDoc(name=name, run_dir=where(run_dir), config=config) for name, run_dir, config in arms],
        ))
    except OSError as error:
        raise cannot_write(path, error) from None


def read_arms_manifest(directory: Path, purpose: str) -> ArmsManifest | None:
    """The arms of the session that wrote ``directory``, or None when it holds no
    manifest (a single run's directory). ``purpose`` begins an error: what reads it
    (the resume option, :func:`.errors.named`, or the merge command)."""
    path = directory / ARMS_MANIFEST
    if not path.exists():
        return None
    document = read_json(path)
    newer = newer_schema(path, document, ARMS_SCHEMA_VERSION)
    if newer is not None:  # a newer plugin's session: its arms may be laid out otherwise
        raise RunDirError(f"{purpose} {directory}: {newer}")
    try:
        manifest = ArmsFile.model_validate(document)
    except ValidationError:
        manifest = None
    if manifest is None or any(not arm.model_fields_set >= {"name", "run_dir", "config"} for arm in manifest.arms):
        raise RunDirError(
            f"{purpose} {directory}: {path} is not a readable arms manifest; resume each arm's "
            f"directory on its own ({named('resume')}=DIR/<arm>)"
        )
    entries = tuple(
        ArmEntry(
            str(arm.name),
            recorded_arm_dir(directory, arm.run_dir, path, purpose),
            recorded_config_path(arm.config, f"{path}: an arm's 'config'"),
        )
        for arm in manifest.arms
    )
    return ArmsManifest(
        entries,
        tuple(str(item) for item in manifest.overrides),
        manifest.session if isinstance(manifest.session, str) else None,
        _recorded_repeats(manifest, entries, path, purpose),
    )


def _recorded_repeats(manifest: ArmsFile, entries: Sequence[ArmEntry], path: Path, purpose: str) -> int | None:
    """The manifest's ``repeats``, checked as a record, never taken as an instruction:
    within the range the option allows (:data:`.options.MAX_REPEATS`), and equal to the
    replicates its own entries list for every arm (``<arm>@r1 .. @rN``). Anything else
    is damage naming the file: a resume that obeyed ``repeats: 40`` in a finished
    2-replicate session would run 38 replicates nobody asked for."""
    if "repeats" not in manifest.model_fields_set:
        return None
    repeats = manifest.repeats
    problem = "is text, not a number" if isinstance(repeats, str) else count_problem(repeats, MAX_REPEATS)
    if problem is None:
        replicates: dict[str, set[int]] = {}
        for entry in entries:
            base, replicate = split_label(entry.name)
            replicates.setdefault(base, set()).add(replicate or 0)
        listed = {base: sorted(found) for base, found in replicates.items()}
        wanted = list(range(1, int(repeats) + 1))
        wrong = next((base for base, found in listed.items() if found != wanted), None)
        if wrong is not None:
            problem = (
                f"is {repeats!r} but the manifest lists arm {wrong!r} with replicates "
                f"{', '.join(f'r{n}' for n in listed[wrong] if n) or 'none'}"
            )
    if problem is None:
        return int(repeats)
    raise RunDirError(
        f"{purpose}: {path}: 'repeats' {problem} (a whole number from 1 to {MAX_REPEATS} that matches the arms it "
        f"lists); the file was edited or damaged: restore it, or resume each replicate's directory on its own"
    )


def inside(directory: Path, relative: str) -> bool:
    """Whether a manifest's run directory entry names a folder inside ``directory``."""
    if Path(relative).is_absolute():
        return False
    base = directory.resolve()
    target = (directory / relative).resolve()
    return base in target.parents


__all__ = ["ArmEntry", "ArmsManifest", "inside", "read_arms_manifest", "write_arms_manifest"]
