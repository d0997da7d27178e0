"""history/: an earlier run's files, moved aside by a new run instead of deleted."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ..core.errors import system_reason, system_remedy
from .jsonl import read_json
from .layout import HISTORY, RUN_DOCUMENT, RUN_FILES, TRANSCRIPTS, RunDirError


def move_previous_run_aside(run_dir: Path) -> Path | None:
    """A new run keeps an earlier run's files under ``history/`` instead of deleting them.

    A move the system refuses (a full disk while ``history/`` is made) is one line
    naming it; every earlier file is then either where it was or in ``history/``."""
    try:
        return _move_aside(run_dir)
    except OSError as error:
        raise RunDirError(
            f"cannot move the earlier run in {run_dir} aside to {run_dir / HISTORY}: {system_reason(error)}; its "
            f"files are kept (in place, or under {HISTORY}/): {system_remedy(error)}, then run again"
        ) from None


def _move_aside(run_dir: Path) -> Path | None:
    present = [name for name in RUN_FILES if (run_dir / name).exists()]
    transcripts = run_dir / TRANSCRIPTS
    if not present and not (transcripts.is_dir() and any(transcripts.iterdir())):
        return None
    previous = read_json(run_dir / RUN_DOCUMENT) or {}
    stamp = history_name(previous.get("started"))
    target = run_dir / HISTORY / stamp
    suffix = 1
    while target.exists():
        suffix += 1
        target = run_dir / HISTORY / f"{stamp}-{suffix}"
    target.mkdir(parents=True)
    for name in present:
        os.replace(run_dir / name, target / name)
    if transcripts.is_dir():
        os.replace(transcripts, target / TRANSCRIPTS)
    return target


#: A timestamp as run.json records it (``utc_now``): nothing else names a history entry.
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?")


def history_name(started: object) -> str:
    """The name of an earlier run's directory under ``history/``: made here, never
    taken from an artefact. The run's recorded start, when it is a strict ISO
    timestamp, gives the time (``2026-12-02T101500Z``, in UTC); anything else
    (``"../../x"``, an absolute path, a number) gives this moment's."""
    moment = datetime.now(UTC)
    if isinstance(started, str) and _TIMESTAMP.fullmatch(started):
        try:
            parsed = datetime.fromisoformat(started.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            moment = parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H%M%SZ")


__all__ = ["history_name", "move_previous_run_aside"]
