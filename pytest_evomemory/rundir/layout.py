"""The run directory's names: its files and folders, and what marks a directory as a run's.

Every other module of :mod:`pytest_evomemory.rundir` (and, through the package, the
rest of the code) names a run's files by these constants, never by a literal.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError, system_reason, system_remedy

RUN_DOCUMENT = "run.json"
RESPONSES = "responses.jsonl"
SCORES = "scores.jsonl"
EVENTS = "events.jsonl"
SUMMARY = "summary.json"
REPORT = "report.html"
COMPARISON = "compare.html"
COMPARISON_DATA = "compare.json"
TRANSCRIPTS = "transcripts"
HISTORY = "history"
#: Where a run of hand-picked tasks goes, inside the run directory it would replace.
SIDE_RUN = "side-run"
LOCK = ".lock"
LOCK_OWNER = ".lock.owner"
ERROR_COUNT = ".errors"
#: In the directory holding a session's arms: which arms, where, from which configs.
ARMS_MANIFEST = "arms.json"
#: A repeated session's comparison across replicates (reporting/replicates.py).
REPLICATES_DATA = "replicates.json"
REPLICATES_PAGE = "replicates.html"

#: Files of a run, moved aside together when a new run starts in the directory.
RUN_FILES = (RUN_DOCUMENT, RESPONSES, SCORES, EVENTS, SUMMARY, REPORT, COMPARISON, COMPARISON_DATA)
#: Where a stream's memory snapshots go (``memory/<stream>/``).
MEMORY = "memory"
#: What the directory holding a session's arms holds beside them (by default the
#: output root, where single runs' directories live too): never an arm's name, nor a
#: run's (validation.OUTPUT_ROOT_FILES, which the run name rule reads, is this list).
ARMS_DIRECTORY_FILES = (ARMS_MANIFEST, COMPARISON, COMPARISON_DATA, REPLICATES_DATA, REPLICATES_PAGE)
#: Every name a run directory, or the directory holding a session's arms, may hold
#: (lower case; compared case-folded: macOS and Windows file systems fold case).
#: The arms directory's own files are never an arm's name; the rest are not when the
#: arms directory also holds a run (:func:`holds_a_run`), whose files and folders an
#: arm's directory of that name would be.
RESERVED_NAMES = frozenset(
    name.lower() for name in (*RUN_FILES, *ARMS_DIRECTORY_FILES, TRANSCRIPTS, HISTORY, SIDE_RUN, MEMORY, LOCK, LOCK_OWNER, ERROR_COUNT)
)


def holds_a_run(directory: Path) -> bool:
    """Whether ``directory`` holds a run's own files (it is, or was, a run directory;
    an arms directory holds directories named like its arms, which may be anything)."""
    return any((directory / name).is_file() for name in (RUN_DOCUMENT, SUMMARY, SCORES, RESPONSES))


DEFAULT_OUTPUT_ROOT = "evomemory-results"

#: What makes a directory a run's (or a session's): an output never goes inside one.
RUN_MARKERS = (RUN_DOCUMENT, ARMS_MANIFEST)


class RunDirError(ConfigError):
    """The run directory cannot be used (a file, read-only, full, locked, unsafe name)."""


def cannot_write(path: Path, error: OSError) -> RunDirError:
    """One line for a write of the run directory the system refused before any task
    (a full disk, a read-only file system, no permission), naming the file and the
    system's reason: nothing was recorded, so the run is simply started again."""
    return RunDirError(
        f"cannot write {path}: {system_reason(error)}; nothing of this run was written: {system_remedy(error)}, "
        "then run again"
    )


__all__ = [
    "ARMS_DIRECTORY_FILES", "ARMS_MANIFEST", "COMPARISON", "COMPARISON_DATA", "DEFAULT_OUTPUT_ROOT", "ERROR_COUNT",
    "EVENTS", "HISTORY", "LOCK", "LOCK_OWNER", "MEMORY", "REPLICATES_DATA", "REPLICATES_PAGE", "REPORT",
    "RESERVED_NAMES", "RESPONSES", "RUN_DOCUMENT", "RUN_FILES", "RUN_MARKERS", "SCORES", "SIDE_RUN", "SUMMARY",
    "TRANSCRIPTS", "RunDirError", "cannot_write", "holds_a_run",
]
