"""Checks of names and paths: a run name, an output directory, a place a run will
write, an output that would land inside a run, and a path an artefact records.

Each returns the problem in words or raises :class:`.layout.RunDirError` in one
line, before anything is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..core.boundedread import special_file_kind
from ..core.errors import named
from ..core.validation import (
    CONTROL_CHARACTERS,
    long_name_problem,
    resolve_path,
    run_name_problem,
)
from .layout import (
    ARMS_MANIFEST,
    LOCK,
    MEMORY,
    RESERVED_NAMES,
    RUN_MARKERS,
    TRANSCRIPTS,
    RunDirError,
    holds_a_run,
)

#: In a directory name, these break the one-line messages and reports that quote it.
_NAME_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")


def check_run_name(name: str) -> str:
    """A run name is one path component inside the output root, nothing else."""
    problem = run_name_problem(name)
    if problem:
        raise RunDirError(
            f"run config: key 'name': run name {name!r} {problem}; the run name becomes one "
            "directory under the output root, so use letters, digits, '-', '_' or '.' "
            "(or give the output directory option)"
        )
    return name



def check_output_dir(path: Path) -> Path:
    """Refuse an output directory that cannot hold a run, before anything runs."""
    text = str(path)
    if "\0" in text:
        raise RunDirError(f"output directory {text!r} contains a NUL character; give a plain directory path")
    if _NAME_CONTROL.search(text):
        raise RunDirError(
            f"output directory {text!r} contains a control character (a line break, tab or escape) "
            "or an unpaired surrogate; give a plain directory path"
        )
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as error:
        raise RunDirError(f"output directory {text}: cannot resolve it ({error}); give another directory") from None
    too_long = long_name_problem(resolved)
    if too_long is not None:
        raise RunDirError(f"output directory {text[:80]!r}...: {too_long}; give a shorter directory")
    try:
        parent = _nearest_existing(resolved)
    except OSError as error:  # a path too long for the system, an I/O error
        raise RunDirError(
            f"output directory {text[:200]!r}: cannot be checked ({error.strerror or error}); give another directory"
        ) from None
    if parent is not None and not parent.is_dir():
        raise RunDirError(
            f"output directory {resolved}: {parent} is a file, not a directory; "
            f"remove it or give another {named('output-dir')}",
            option="output-dir",
        )
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
        raise RunDirError(
            f"output directory {resolved}: {parent} is not writable; "
            f"give a writable {named('output-dir')}",
            option="output-dir",
        )
    foreign = foreign_entries(resolved)
    if foreign:
        raise RunDirError(
            f"output directory {resolved} already holds files that are no run's ({', '.join(foreign)}); a run "
            "writes run.json, memory/ and transcripts/ there and moves an earlier run's files to history/, so give "
            f"a new or empty {named('output-dir')} (or the directory of an earlier run, to replace it)",
            option="output-dir",
        )
    for name, kind in ((MEMORY, "directory"), (TRANSCRIPTS, "directory")):
        problem = place_problem(resolved / name, kind)
        if problem is not None:
            raise RunDirError(
                f"output directory {resolved}: {problem}; remove it or give another {named('output-dir')}",
                option="output-dir",
            )
    return resolved


def foreign_entries(directory: Path, shown: int = 3) -> list[str]:
    """The first names (at most ``shown``, then ``...``) in ``directory`` that no run
    or session of arms writes, or [] (for a directory that is missing, empty or a run's).

    ``--output-dir .`` in a repository, or ``/``, would otherwise scatter run.json and
    memory/ among the user's own files, and the next run would move their summary.json
    or report.html to history/. Hidden entries (``.git``, ``.DS_Store``) are not counted,
    and a directory holding a run's own file (or its lock: an interrupted run) is a run's,
    whatever else it holds (a memory backend's files, at a path relative to it)."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if not entry.name.startswith("."))
        if holds_a_run(directory) or any((directory / name).exists() for name in (ARMS_MANIFEST, LOCK)):
            return []
    except OSError:
        return []  # missing, or not a directory: the checks around this one say so
    foreign = [name for name in names if name.casefold() not in RESERVED_NAMES]
    return foreign[:shown] + (["..."] if len(foreign) > shown else [])


def place_problem(path: Path, kind: str) -> str | None:
    """Why the run cannot create or replace the ``kind`` ("file" or "directory") at
    ``path``, or None: a file where a directory is expected (on the way or at the
    path), a directory where a file is, or a read-only nearest folder.

    Checked before any task for every place a run writes that it can name up front
    (its own folders, a memory backend's files), so a run that would fail at every
    stream's start is refused once instead, with exit 4."""
    try:
        if path.exists() or path.is_symlink():
            if kind == "file" and path.is_dir():
                return f"{path} is a directory where a file is expected"
            if kind == "directory" and not path.is_dir():
                return f"{path} is a file where a directory is expected"
            return None
        parent = _nearest_existing(path.parent)
        if parent is not None and not parent.is_dir():
            return f"{parent} is a file where a directory is expected (for {path})"
        if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
            return f"{parent} is not writable (for {path})"
        if parent is not None and (problem := filesystem_problem(parent)):
            return f"{parent} {problem} (for {path})"
    except OSError as error:
        return f"{path} cannot be checked ({error.strerror or error})"
    return None


def enclosing_run(path: Path, *, itself: bool = True) -> tuple[Path, str] | None:
    """The run (or session) directory ``path`` lies in, with the file that marks it,
    or None: ``path`` itself when ``itself`` and it is one, else its nearest parent
    holding a run.json or an arms.json (symbolic links resolved)."""
    resolved = resolve_path(path)
    for place in ((resolved,) if itself else ()) + tuple(resolved.parents):
        for marker in RUN_MARKERS:
            try:
                if (place / marker).is_file():
                    return place, marker
            except OSError:
                continue
    return None


def output_path_problem(
    path: Path, *, own: Iterable[Path] = (), directory: bool = False, folder: bool = False
) -> str | None:
    """Why a command's output ``path`` would overwrite a run, or is no file to write, in
    words, or None.

    The one rule of ``report``, ``table``, ``compare``, ``merge`` and ``init``: an
    output never goes inside a run directory (one holding run.json or arms.json),
    whichever file of it is named, unless it is one of ``own`` (the command's own
    file there, as ``RUN/report.html`` for ``report RUN``). ``directory``: ``path``
    is a directory the command makes or replaces as a whole (merge's output), which
    may itself be a run; only a run around it is refused. ``folder``: ``path`` is a
    directory the command writes files into (init's). An output file that exists must
    be a regular file: a page is written beside it and renamed over it, which would
    replace a device (``-o /dev/stdout``), a pipe or a link's target with a file."""
    resolved = resolve_path(path)
    if resolved in {resolve_path(place) for place in own}:
        return None
    found = enclosing_run(path, itself=not directory)
    if found is None:
        kind = _existing_kind(path)
        if kind is not None and (directory or folder) and kind != "a directory":
            return f"{path} is {kind}, not a directory; give a directory"
        if kind is not None and not (directory or folder) and kind != "a regular file":
            return f"{path} is {kind}, not a regular file; give the path of a file to write (new or to replace)"
        return None
    run, marker = found
    where = "is the run directory" if run == resolved else "is inside the run directory"
    return (
        f"{path} {where} {run} (it holds {marker}): writing there would overwrite or mix with that run's "
        "records; give a path outside every run directory"
    )


def _existing_kind(path: Path) -> str | None:
    """What ``path`` is, following links (``"a regular file"``, ``"a directory"``, ``"a
    device"``, ...: :func:`..core.boundedread.special_file_kind`), or None when nothing
    is there (or it cannot be told)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return special_file_kind(mode) or "a regular file"


def filesystem_problem(directory: Path) -> str | None:
    """Why nothing can be written under ``directory`` whatever its permissions say, or
    None: a read-only file system (``os.access`` answers for root as if it were not),
    or one that holds no files at all (/proc, /sys: no blocks)."""
    try:
        info = os.statvfs(directory)
    except (OSError, AttributeError):
        return None
    if info.f_flag & getattr(os, "ST_RDONLY", 1):
        return "is on a read-only file system"
    if (info.f_blocks == 0 and info.f_files == 0) or resolve_path(directory).parts[1:2] in (("proc",), ("sys",)):
        return "is on a file system that holds no files (such as /proc or /sys)"
    return None


def _nearest_existing(path: Path) -> Path | None:
    """``path``, or the nearest of its parents that exists: where a run's new folders
    would be made, and so what must be a writable directory (OSError propagates)."""
    return next((place for place in (path, *path.parents) if place.exists()), None)


def recorded_arm_dir(directory: Path, value: object, source: Path, purpose: str) -> str:
    """An arm's directory as an arms manifest records it: a plain relative path (inside
    ``directory``) or an absolute one (an arm whose run config has its own
    ``output_dir``: the session checks it against that config, see
    :func:`arm_dir_allowed`). A ``..``, a NUL or a control character is refused: the
    manifest is data, and data does not choose where a run writes."""
    text = value if isinstance(value, str) else ""
    candidate = Path(text)
    if (
        not text.strip() or "\0" in text or _NAME_CONTROL.search(text)
        or ".." in candidate.parts or (not candidate.is_absolute() and not candidate.parts)
    ):
        raise RunDirError(
            f"{purpose} {directory}: {source} names the arm directory {str(value)[:120]!r}, which is not a "
            "directory inside it (the manifest was edited or damaged); resume each arm's directory on its own "
            f"({named('resume')}=DIR/<arm>)"
        )
    return text


def recorded_config_path(value: object, source: str) -> str:
    """A run config's path as an artefact records it (an arms manifest, run.json's
    ``run.path``): read, never written, but still only a ``.yaml``/``.yml`` file, so
    a damaged artefact cannot make the resume read (and quote) another file."""
    text = value if isinstance(value, str) else ""
    if not text.strip() or "\0" in text or _NAME_CONTROL.search(text) or not text.endswith((".yaml", ".yml")):
        raise RunDirError(
            f"{source} is {str(value)[:120]!r}, which is not a run config file (.yaml/.yml); the file was edited "
            "or damaged: give the run's config as well"
        )
    return text


__all__ = [
    "check_output_dir", "check_run_name", "enclosing_run", "filesystem_problem",
    "output_path_problem", "place_problem", "recorded_arm_dir", "recorded_config_path",
]
