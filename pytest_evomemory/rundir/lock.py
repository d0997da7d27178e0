"""One writer per run directory (:class:`RunLock`), the failed-episode count the
writers of one run share (:class:`SharedErrorCount`), and the removal of what a
refused session claimed (:func:`remove_claims`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from ..core import boundedread
from ..core.errors import named
from .jsonl import read_json, write_json_atomically
from .layout import ERROR_COUNT, LOCK, LOCK_OWNER, RunDirError, cannot_write
from .writer import utc_now


class LockOwner(BaseModel):
    """.lock.owner: who holds a run directory's lock, for the message a second run
    gets. Read as it was written, whatever it holds (a damaged one still names what it can)."""

    model_config = ConfigDict(defer_build=True)

    pid: Any = None
    started: Any = "?"
    command: Any = None


class RunLock:
    """One writer per run directory, released on any exit (the OS drops the lock
    when the process dies, even on kill -9)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._handle: IO[str] | None = None
        #: the directories taking the lock made (deepest first): a session that wrote
        #: nothing into them leaves none behind (``-k`` that selects no task)
        self._made: list[Path] = []

    def acquire(self, command: Sequence[str] = ()) -> None:
        import fcntl

        self._made = [path for path in (self.run_dir, *self.run_dir.parents) if not path.exists()]
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            handle = (self.run_dir / LOCK).open("a+", encoding="utf-8")
        except OSError as error:  # a full disk, a read-only file system
            raise cannot_write(self.run_dir / LOCK, error) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            owner = LockOwner.model_validate(read_json(self.run_dir / LOCK_OWNER) or {})
            who = (  # its owner is written just after it took the lock
                f"process {owner.pid} started {owner.started}" if owner.pid
                else "a run that is starting (its owner is not recorded yet)"
            )
            if owner.pid and owner.command:
                who += f" (command '{' '.join(map(str, owner.command))}')"
            raise RunDirError(
                f"run directory {self.run_dir} is in use by another run: {who}; wait for it to "
                f"finish or give this run another {named('output-dir')}",
                option="output-dir",
            ) from None
        self._handle = handle
        try:
            write_json_atomically(
                self.run_dir / LOCK_OWNER,
                LockOwner(pid=os.getpid(), started=utc_now(), command=list(command)).model_dump(),
            )
        except OSError as error:
            self.release()
            raise cannot_write(self.run_dir / LOCK_OWNER, error) from None

    def release(self) -> None:
        if self._handle is None:
            return
        try:
            (self.run_dir / LOCK_OWNER).unlink(missing_ok=True)
            if self._made and [entry.name for entry in self.run_dir.iterdir()] == [LOCK]:
                # made for this session, which wrote nothing: removed while still held,
                # so no other session can have taken the lock on this file
                (self.run_dir / LOCK).unlink()
                for directory in self._made:
                    directory.rmdir()  # stops at the first that holds something
        except OSError:
            pass
        self._handle.close()  # closing drops the flock
        self._handle = None


class SharedErrorCount:
    """Failed episodes counted across xdist workers, so ``--evomemory-max-errors``
    stops a parallel run at (about) the same count as a serial one: each worker adds
    its failed episodes under an flock and stops once the total reaches the limit.
    Touched only when a limit is set, once per failed episode and once per task."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ERROR_COUNT

    def clear(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass

    def add(self, count: int) -> int:
        import fcntl

        try:
            with self.path.open("a+", encoding="ascii") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                handle.seek(0)
                total = int(handle.read(64).strip() or 0) + count
                handle.seek(0)
                handle.truncate()
                handle.write(str(total))
                return total
        except (OSError, ValueError):
            return count

    def read(self) -> int:
        try:
            text = boundedread.read_text(self.path, limit=64, what="the error count", encoding="ascii")
            return int(text.strip() or 0)
        except (OSError, ValueError, boundedread.UnreadableFile):
            return 0



def remove_claims(created: Sequence[Path]) -> None:
    """After a refusal: the directories this session created (innermost first) hold
    nothing but its lock; remove them (one that holds anything else stays)."""
    for directory in created:
        for name in (LOCK, LOCK_OWNER):
            try:
                (directory / name).unlink(missing_ok=True)
            except OSError:
                pass
        try:
            directory.rmdir()
        except OSError:
            pass  # not empty: something besides the lock was written there


__all__ = ["RunLock", "SharedErrorCount", "remove_claims"]
