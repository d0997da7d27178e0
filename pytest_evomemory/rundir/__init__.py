"""The run directory: its format, and the only code that reads or writes it.

Layout (schema version in every JSON document, see docs/artefacts.md)::

    run.json                    resolved configs, versions, times, command line
    responses.jsonl             every agent response, task and feedback
    transcripts/<stream>.jsonl  every message and tool call, per stimulus
    scores.jsonl                one scored item per original task
    events.jsonl                failed and skipped feedback turns
    summary.json                metrics, thresholds, completion
    report.html, compare.html   rendered from the files above
    history/<started>/          an earlier run's files, moved aside by a new run
    side-run/                   a run of tasks picked by hand (node ids, -k): a run
                                directory of its own, so the full run stays the result
    .lock                       held by the process that writes the directory

Guarantees (each is tested):

* a new run never destroys an earlier run's results: they move to ``history/``;
* one writer at a time: a second run is refused with a message naming the first;
* the run name cannot leave the output root (no separators, ``..``, NUL);
* no text can split, merge or break a record: records are written as ASCII JSON
  (every other character, lone surrogates and U+2028 included, as a ``\\u`` escape)
  and JSONL is split on ``\\n`` only;
* a write that fails (read-only directory, full disk) stops further writing with
  one clear error instead of ending the session; what was written stays.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from . import boundedread
from .atomicfile import write_atomically
from .errors import ConfigError, named
from .options import MAX_REPEATS, count_problem
from .redaction import dumps_redacted
from .rundocs import (
    DAMAGED_ADVICE as DAMAGED_ADVICE,
)
from .rundocs import (
    SCHEMA_VERSION as SCHEMA_VERSION,
)
from .rundocs import (
    ArmEntryDoc,
    ArmsFile,
    Response,
    RunDoc,
    RunFile,
    Score,
    Summary,
    TranscriptEntry,
)
from .rundocs.base import DamagedDocument, Doc, problem_line, read
from .rundocs.wire import Event, FeedbackSkippedRecord, Record, event_or_none
from .text import inert, shorten
from .validation import (
    CONTROL_CHARACTERS,
    MAX_NAME_BYTES,
    long_name_problem,
    path_problem,
    resolve_path,
    run_name_problem,
)

if TYPE_CHECKING:
    from .streams import Stream

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

_VERSIONED_PACKAGES = (
    "pytest-evomemory", "pytest", "pytest-xdist", "pluggy", "pyyaml", "pydantic",
    "datasets", "huggingface-hub", "httpx2", "math-verify", "pytest-json-report",
)


class RunDirError(ConfigError):
    """The run directory cannot be used (a file, read-only, full, locked, unsafe name)."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    """The versions of the packages a run depends on (run.json records them)."""
    return dict(_package_versions())


@functools.cache
def _package_versions() -> dict[str, str | None]:
    """Read once per process: each lookup scans the installed distributions (about
    20 ms), and a session of many arms starts each arm's run (run.json)."""
    versions: dict[str, str | None] = {}
    for name in _VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = sys.version.split()[0]
    return versions


# --------------------------------------------------------------------------- names


#: In a directory name, these break the one-line messages and reports that quote it.
_NAME_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
#: The longest file name most file systems take (NAME_MAX).
_MAX_NAME_BYTES = MAX_NAME_BYTES


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


def default_run_dir(name: str, root: Path) -> Path:
    return root / DEFAULT_OUTPUT_ROOT / check_run_name(name)


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
    for name, kind in ((MEMORY, "directory"), (TRANSCRIPTS, "directory")):
        problem = place_problem(resolved / name, kind)
        if problem is not None:
            raise RunDirError(
                f"output directory {resolved}: {problem}; remove it or give another {named('output-dir')}",
                option="output-dir",
            )
    return resolved


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


#: What makes a directory a run's (or a session's): an output never goes inside one.
RUN_MARKERS = (RUN_DOCUMENT, ARMS_MANIFEST)


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


def output_path_problem(path: Path, *, own: Iterable[Path] = (), directory: bool = False) -> str | None:
    """Why a command's output ``path`` would overwrite a run, in words, or None.

    The one rule of ``report``, ``table``, ``compare``, ``merge`` and ``init``: an
    output never goes inside a run directory (one holding run.json or arms.json),
    whichever file of it is named, unless it is one of ``own`` (the command's own
    file there, as ``RUN/report.html`` for ``report RUN``). ``directory``: ``path``
    is a directory the command makes or replaces as a whole (merge's output), which
    may itself be a run; only a run around it is refused."""
    resolved = resolve_path(path)
    if resolved in {resolve_path(place) for place in own}:
        return None
    found = enclosing_run(path, itself=not directory)
    if found is None:
        return None
    run, marker = found
    where = "is the run directory" if run == resolved else "is inside the run directory"
    return (
        f"{path} {where} {run} (it holds {marker}): writing there would overwrite or mix with that run's "
        "records; give a path outside every run directory"
    )


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


# --------------------------------------------------------------------------- encoding


def _plain(record: Mapping[str, Any] | RunDoc) -> Mapping[str, Any]:
    return record.written() if isinstance(record, RunDoc) else record


def dumps(record: Mapping[str, Any] | RunDoc) -> str:
    """One record as one line: redacted (no secret reaches a file), ASCII JSON (no
    character can break the line), keys sorted."""
    return dumps_redacted(_plain(record), ensure_ascii=True, sort_keys=True, default=str)


def _document_text(document: Mapping[str, Any] | RunDoc) -> str:
    return dumps_redacted(_plain(document), ensure_ascii=True, indent=2, sort_keys=True, default=str) + "\n"


def write_json_atomically(path: Path, document: Mapping[str, Any] | RunDoc) -> None:
    """Readers (a dashboard polling summary.json) never see half a document."""
    write_atomically(path, _document_text(document), encoding="ascii")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL artefact, skipping a torn last line left by a killed process."""
    return list(iter_jsonl(path))


#: The fields that name a record of a run file: the writer writes one record per
#: value, so a second one is a line copied in, or another run's, never ours.
UNIQUE_KEYS: dict[str, tuple[str, ...]] = {SCORES: ("stream", "task_id"), RESPONSES: ("stream", "task_id", "kind")}
#: A stream's transcript (``transcripts/<stream>.jsonl``): one record per stimulus.
TRANSCRIPT_KEY = ("task_id", "kind")


class DamagedRecords(RunDirError):
    """A line of a run's JSONL file that the writer cannot have left: not JSON or not
    a record, anywhere but at the end (a torn last line is an interruption, not
    damage), or a record the file holds twice. Every reader refuses it in one line."""


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL artefact one at a time (a long run's files need not
    fit in memory), skipping a torn last line left by a killed process.

    Only the last line can be torn (each record is appended whole, ``\\n`` last), so a
    last line without its ``\\n`` that is no record is skipped; any other line that is
    not a JSON object, and a second record under one key (:data:`UNIQUE_KEYS`), is
    :class:`DamagedRecords`: skipping it would drop a result or count one twice.

    The file is opened now, so an unreadable one is refused here, not at the first
    record. Lines are split on ``\\n`` only: ``str.splitlines`` would also split on
    U+2028, U+0085 and other characters that may stand unescaped in a file written by hand.
    """
    return _open_records(path, _mapping)


#: What a line of a record file is read as: a mapping (:func:`iter_jsonl`) or a model.
Item = TypeVar("Item")
_NOT_JSON = "is not valid JSON"
_NOT_OBJECT = "is not a JSON object"


def _mapping(raw: bytes, path: Path, number: int) -> dict[str, Any] | str:
    """A line as a dict, or what it is instead."""
    try:
        value = boundedread.loads(raw.decode("ascii"), depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError:  # a torn line, an integer of 5,000 digits, 40,000 brackets
        return _NOT_JSON
    return value if isinstance(value, dict) else _NOT_OBJECT


#: A run of digits longer than an integer may be (in a string or not: such a line is
#: read by the bounded reader, which tells them apart).
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (boundedread.MAX_INT_DIGITS + 1))


def _reader(model: type[Doc]) -> Callable[[bytes, Path, int], Doc | str]:
    """A line read straight into ``model`` by pydantic's JSON parser (no dict between:
    the report reads 100,000 lines of a long run). Its nesting bound is the bounded
    reader's (:data:`.boundedread.MAX_ARTEFACT_DEPTH`, 200 levels); a line that may
    hold an integer over :data:`.boundedread.MAX_INT_DIGITS` digits goes through the
    bounded reader. A record whose fields are not the writer's is
    :class:`.rundocs.DamagedDocument` naming the file, the record and the key."""

    def parse(raw: bytes, path: Path, number: int) -> Doc | str:
        if len(raw) > boundedread.MAX_INT_DIGITS and _LONG_DIGITS.search(raw):
            value = _mapping(raw, path, number)
            return value if isinstance(value, str) else read(model, path, value, number)
        try:
            return model.model_validate_json(raw)
        except ValidationError as error:
            first = error.errors()[0]
            if first["type"] == "json_invalid":  # or JSON only Python's parser reads (a lone surrogate escaped)
                value = _mapping(raw, path, number)
                return value if isinstance(value, str) else read(model, path, value, number)
            if first["type"] == "model_type" and not first["loc"]:
                return _NOT_OBJECT
            raise DamagedDocument(problem_line(path, error, number)) from None

    return parse


def iter_documents(path: Path, model: type[Doc]) -> Iterator[Doc]:
    """:func:`iter_jsonl`'s records, each read as ``model`` as it is read (a record
    that is not one is :class:`.rundocs.DamagedDocument`, in one line)."""
    return _open_records(path, _reader(model))


def _open_records(path: Path, parse: Callable[[bytes, Path, int], Item | str]) -> Iterator[Item]:
    """The file opened now (an unreadable one is refused here), its records read as they are asked for."""
    def refused(problem: str) -> RunDirError:  # a FIFO never ends, a device never ends a line
        problem = f"{path} {path_problem(path)}" if path.is_dir() else problem
        return RunDirError(f"{problem}; it is not a run's record file: remove it, or give another run directory")

    try:
        handle = boundedread.open_regular(path, what="a run's record file", error=refused)
    except FileNotFoundError:
        return iter(())
    except OSError as error:  # a directory, a link loop, no permission: not a torn line
        problem = path_problem(path) or f"cannot be read ({error.strerror or error})"
        raise RunDirError(f"{path} {problem}; it is not a run's record file: remove it, or give another run directory") from None
    key = UNIQUE_KEYS.get(path.name) or (TRANSCRIPT_KEY if path.parent.name == TRANSCRIPTS else None)
    return _records(handle, path, key, parse)



def _records(handle: IO[bytes], path: Path, key: tuple[str, ...] | None,
             parse: Callable[[bytes, Path, int], Item | str]) -> Iterator[Item]:
    # The hashes of the keys read so far, not the keys: a 20,000-task run's three files
    # would hold 100,000 tuples of strings (about 25 MiB) until the report is written.
    # A hash seen twice is confirmed against the earlier line (:func:`_first_line_of`).
    seen: set[int] = set()
    pending: tuple[int, str] | None = None  # a line that is no record: damage, unless it is the torn last one
    with handle:
        try:
            for number, raw in enumerate(handle, 1):
                if not raw.strip(b" \t\r\n\0"):  # a power cut may leave zeroed blocks at the end
                    continue
                if pending is not None:
                    raise _damaged(path, *pending)
                if not raw.isascii():  # the writer escapes every other character (dumps)
                    raise _damaged(path, number, "holds a byte that is not ASCII (the run writes ASCII JSON)")
                value = parse(raw, path, number)
                if isinstance(value, str):  # no record: what it is instead
                    if raw.endswith(b"\n"):
                        raise _damaged(path, number, value)
                    pending = (number, value)
                    continue
                if key is not None:
                    named = _named(value, key)
                    digest = hash(named)
                    first = _first_line_of(path, key, named, number) if digest in seen else None
                    if first is not None:
                        raise DamagedRecords(
                            f"{path}, line {number}: a second record of {' '.join(_quoted(named))} "
                            f"(the first is line {first}); {DAMAGED_ADVICE}"
                        )
                    seen.add(digest)
                yield value
        except OSError as error:
            raise RunDirError(f"{path} cannot be read ({error.strerror or error}); give another run directory") from None


def _named(record: object, key: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(record, Mapping):
        return tuple(str(record.get(part)) for part in key)
    return tuple(str(getattr(record, part, None)) for part in key)


def _first_line_of(path: Path, key: tuple[str, ...], named: tuple[str, ...], before: int) -> int | None:
    """The line before ``before`` holding the record ``named``, or None (only its
    hash was the same): read again only when a file is about to be refused."""
    with path.open("rb") as again:
        for number, raw in enumerate(again, 1):
            if number >= before:
                return None
            try:
                value = json.loads(raw.decode("ascii"))
            except (ValueError, RecursionError, UnicodeDecodeError):
                continue
            if isinstance(value, dict) and _named(value, key) == named:
                return number
    return None


def _quoted(parts: tuple[str, ...]) -> list[str]:
    return [inert(shorten(repr(part), 80), one_line=True) for part in parts]


def _damaged(path: Path, number: int, what: str) -> DamagedRecords:
    return DamagedRecords(f"{path}, line {number} {what}: it is not a record the run wrote; {DAMAGED_ADVICE}")


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON document of the run directory, or None when absent or not a JSON object.

    Read through the bounded reader: a document that is a device, a FIFO or over the
    size bound is :class:`RunDirError` naming it (it is no run's document, and reading
    it would never end); one over a JSON bound (nesting, integer digits) reads as damaged."""
    try:
        text = boundedread.read_bytes(path, limit=boundedread.DOCUMENT_BYTES, what="a run document", error=RunDirError)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        value = boundedread.loads(text, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --------------------------------------------------------------------------- locking


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
            owner = read_json(self.run_dir / LOCK_OWNER) or {}
            who = (  # its owner is written just after it took the lock
                f"process {owner['pid']} started {owner.get('started', '?')}" if owner.get("pid")
                else "a run that is starting (its owner is not recorded yet)"
            )
            if owner.get("pid") and owner.get("command"):
                who += f" (command '{' '.join(map(str, owner['command']))}')"
            raise RunDirError(
                f"run directory {self.run_dir} is in use by another run: {who}; wait for it to "
                f"finish or give this run another {named('output-dir')}",
                option="output-dir",
            ) from None
        self._handle = handle
        try:
            write_json_atomically(
                self.run_dir / LOCK_OWNER, {"pid": os.getpid(), "started": utc_now(), "command": list(command)}
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


# --------------------------------------------------------------------------- writing


def cannot_write(path: Path, error: OSError) -> RunDirError:
    """One line for a write of the run directory the system refused before any task
    (a full disk, a read-only file system, no permission), naming the file and the
    system's reason: nothing was recorded, so the run is simply started again."""
    import errno

    code = errno.errorcode.get(error.errno or 0)
    return RunDirError(
        f"cannot write {path}: {error.strerror or error}{f' ({code})' if code else ''}; nothing of this run was "
        "written: free space or fix the permissions, then run again"
    )


def move_previous_run_aside(run_dir: Path) -> Path | None:
    """A new run keeps an earlier run's files under ``history/`` instead of deleting them.

    A move the system refuses (a full disk while ``history/`` is made) is one line
    naming it; every earlier file is then either where it was or in ``history/``."""
    try:
        return _move_aside(run_dir)
    except OSError as error:
        import errno

        code = errno.errorcode.get(error.errno or 0)
        raise RunDirError(
            f"cannot move the earlier run in {run_dir} aside to {run_dir / HISTORY}: {error.strerror or error}"
            f"{f' ({code})' if code else ''}; its files are kept (in place, or under {HISTORY}/): free space or fix "
            "the permissions, then run again"
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


class RunWriter:
    """Appends records to the run directory; only one process (the controller) writes.

    JSONL files are appended and flushed per record, so an interrupted run keeps all
    that happened before the interruption; ``scores.jsonl`` is rewritten in stream
    order at the end so that serial and parallel runs produce the same file. The
    first write that fails is kept in :attr:`failure` and ends writing.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._files: dict[str, IO[str]] = {}
        #: per file of records of several streams: the rank of the stream last
        #: appended, and the files whose lines came out of stream order
        self._last_stream: dict[str, str] = {}
        self._interleaved: set[str] = set()
        self.failure: str | None = None
        self._guard(lambda: (self.run_dir / TRANSCRIPTS).mkdir(parents=True, exist_ok=True))

    def fail(self, reason: str) -> None:
        """A run file written elsewhere (a worker's memory snapshot) failed: writing
        ends here too, as if this writer's own write had failed."""
        if self.failure is None:
            self.failure = reason

    def _guard(self, write: Any) -> None:
        if self.failure is not None:
            return
        try:
            write()
        except OSError as error:
            self.failure = (
                f"writing the run directory {self.run_dir} failed: {error.strerror or error}"
                f"{f' ({error.filename})' if error.filename else ''}; results written before "
                "this point are kept"
            )

    def _append(self, relative: str, record: Mapping[str, Any] | RunDoc) -> None:
        def write() -> None:
            handle = self._files.get(relative)
            if handle is None:
                handle = (self.run_dir / relative).open("a", encoding="ascii")
                self._files[relative] = handle
            handle.write(dumps(record) + "\n")
            handle.flush()

        self._guard(write)

    def write_run(self, document: RunFile) -> None:
        self._guard(lambda: write_json_atomically(self.run_dir / RUN_DOCUMENT, document))

    def _note_stream(self, relative: str, stream: object) -> None:
        """Streams interleave in a file when several ran at once (xdist workers,
        ``evomemory run``'s chains); :meth:`finalize_streams` orders it again."""
        if not isinstance(stream, str):
            return
        last = self._last_stream.get(relative)
        if last is not None and last != stream:
            self._interleaved.add(relative)
        self._last_stream[relative] = stream

    def add_response(self, response: Response) -> None:
        """A response: its line in responses.jsonl, its messages in its stream's transcript."""
        self._note_stream(RESPONSES, response.stream)
        line, transcript = response.written_lines()
        self._append(RESPONSES, line)
        self._append(f"{TRANSCRIPTS}/{response.stream}.jsonl", transcript)

    def add_score(self, scored: Score) -> None:
        self._append(SCORES, scored)

    def add_event(self, event: Record) -> None:
        wire = event.wire()
        self._note_stream(EVENTS, wire.get("stream"))
        self._append(EVENTS, wire)

    def finalize_scores(self, scored: Sequence[Score], stream_order: Sequence[str]) -> None:
        """Put scores.jsonl in stream order (arrival order differs under xdist).

        ``scored``: the scores in the order they were written, one line each; only
        their ``stream`` and ``position`` are read. A file already in order (a serial
        run) is left as it is; another is rewritten from its own lines, so a caller
        need not hold 20,000 whole records to have them sorted."""
        self._close(SCORES)
        rank: dict[str, int] = {}
        for index, name in enumerate(stream_order):
            rank.setdefault(name, index)
        keys = [(rank.get(s.stream, len(stream_order)), s.position) for s in scored]
        if all(keys[index] <= keys[index + 1] for index in range(len(keys) - 1)):
            return
        self._guard(lambda: _reorder_lines(self.run_dir / SCORES, sorted(range(len(keys)), key=keys.__getitem__), rank))

    def finalize_streams(self, stream_order: Sequence[str]) -> None:
        """Put responses.jsonl and events.jsonl in stream order, each stream's lines
        in the order they came (one stream runs in order), so a run whose streams ran
        side by side writes the files of a serial run. A line without a stream stays
        after the line before it. Files whose streams never interleaved are left as
        they are."""
        rank = {name: index for index, name in reversed(list(enumerate(stream_order)))}
        for relative in sorted(self._interleaved):
            self._close(relative)
            path = self.run_dir / relative
            if not path.is_file():
                continue

            def rewrite(path: Path = path) -> None:
                lines = path.read_text(encoding="ascii").splitlines(keepends=True)
                keys, previous = [], len(rank)
                for line in lines:
                    stream = json.loads(line).get("stream") if line.strip() else None
                    previous = rank.get(stream, len(rank)) if isinstance(stream, str) else previous
                    keys.append(previous)
                order = sorted(range(len(lines)), key=keys.__getitem__)  # stable: each stream's own order
                write_atomically(path, (lines[index] for index in order), encoding="ascii")

            self._guard(rewrite)
        self._interleaved.clear()

    def restart_from(self, state: ResumeState) -> None:
        """Resume: keep only the completed episodes' records, dropping torn ones."""
        self._interleaved |= {RESPONSES, EVENTS}  # the interrupted run's may have interleaved
        self.close()
        kept = {(r.stream, r.task_id) for r in state.responses}

        def rewrite() -> None:
            _rewrite_jsonl(self.run_dir / RESPONSES, [r.line() for r in state.responses])
            _rewrite_jsonl(self.run_dir / SCORES, state.scores)
            _rewrite_jsonl(self.run_dir / EVENTS, [e.wire() for e in state.events])
            for path in (self.run_dir / TRANSCRIPTS).glob("*.jsonl"):
                stream = path.stem
                entries = _typed(TranscriptEntry, read_jsonl(path))
                _rewrite_jsonl(path, [t for t in entries if t is not None and (stream, t.task_id) in kept])

        self._guard(rewrite)

    def write_records(self, relative: str, records: Iterable[Mapping[str, Any] | RunDoc]) -> None:
        """Write a whole JSONL file of the run at once (the merge of shards' runs)."""
        target = self.run_dir / relative

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            _rewrite_jsonl(target, records)

        self._guard(write)

    def copy_tree(self, source: Path, relative: str) -> None:
        """Copy a folder of another run directory (a shard's memory snapshots) into this one."""
        import shutil

        target = self.run_dir / relative
        self._guard(lambda: shutil.copytree(source, target, dirs_exist_ok=True))

    def write_summary(self, document: Summary) -> None:
        self.close()
        try:
            write_json_atomically(self.run_dir / SUMMARY, document)
        except OSError as error:
            if self.failure is None:
                self.failure = f"writing {self.run_dir / SUMMARY} failed: {error.strerror or error}"

    def _close(self, relative: str) -> None:
        handle = self._files.pop(relative, None)
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass

    def close(self) -> None:
        for relative in list(self._files):
            self._close(relative)


def _rewrite_jsonl(path: Path, records: Iterable[Mapping[str, Any] | RunDoc]) -> None:
    write_atomically(path, (dumps(record) + "\n" for record in records), encoding="ascii")


def _reorder_lines(path: Path, order: Sequence[int], rank: Mapping[str, int]) -> None:
    """Rewrite a JSONL file with its lines in ``order`` (indexes of its lines as
    written), reading each line again as it is written out. A file whose lines are
    not the ones ``order`` counts (changed by a hand) is read whole and sorted
    by stream ``rank`` and position instead."""
    offsets = []
    with path.open("rb") as source:
        where = 0
        for line in source:
            offsets.append(where)
            where += len(line)
        if len(offsets) == len(order):
            def lines() -> Iterator[str]:
                for index in order:
                    source.seek(offsets[index])
                    yield source.readline().decode("ascii", errors="surrogateescape")

            write_atomically(path, lines(), encoding="ascii")
            return
    records = read_jsonl(path)
    records.sort(key=lambda s: (rank.get(s.get("stream"), len(rank)), s.get("position")))  # type: ignore[arg-type]
    _rewrite_jsonl(path, records)


# --------------------------------------------------------------------------- resume


@dataclass
class ResumeState:
    """What an earlier, interrupted run completed."""

    #: stream -> number of leading tasks that are complete
    done: dict[str, int] = field(default_factory=dict)
    #: records to keep, in their original order
    responses: list[Response] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    #: the interrupted run's run.json
    document: RunFile = field(default_factory=RunFile)
    #: what the user is told before the resume runs (a damaged snapshot not trusted)
    notes: list[str] = field(default_factory=list)

    def is_done(self, stream: str, position: int) -> bool:
        return position < self.done.get(stream, 0)

    @property
    def completed_tasks(self) -> int:
        return sum(self.done.values())

    def truncate(self, stream: str, done: int, positions: Mapping[str, int]) -> None:
        """Keep only the first ``done`` completed episodes of ``stream`` (``positions``:
        task id -> position): the episodes after them run again, their records replaced."""
        if done >= self.done.get(stream, 0):
            return
        self.done[stream] = done

        def kept(task_stream: str, task_id: str | None) -> bool:
            return task_stream != stream or positions.get(str(task_id), done) < done

        # a conversation's ingestion turns precede every task: the snapshot the
        # stream continues from holds what they wrote
        self.responses = [r for r in self.responses if r.kind == "ingestion" or kept(r.stream, r.task_id)]
        self.scores = [s for s in self.scores if kept(s.stream, s.task_id)]
        self.events = [e for e in self.events if kept(*event_task(e))]

    def ingested(self, stream: str) -> bool:
        """Whether ``stream``'s conversation ingestion is among the kept records (kept
        only whole): its memory then continues from the snapshot that holds it."""
        return any(r.stream == stream and r.kind == "ingestion" for r in self.responses)

    def forget_ingestion(self, stream: str, ingestion_ids: Sequence[str]) -> None:
        """Drop ``stream``'s ingestion turns: its memory is ingested again (no
        snapshot holds the ingestion any more), and its turns are recorded anew."""
        wanted = set(ingestion_ids)
        self.responses = [
            r for r in self.responses if not (r.stream == stream and r.kind == "ingestion" and r.task_id in wanted)
        ]


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
    resuming the directory can continue every arm of an interrupted session."""
    directory.mkdir(parents=True, exist_ok=True)
    base = directory.resolve()

    def where(run_dir: Path) -> str:
        resolved = run_dir.resolve()
        return str(resolved.relative_to(base)) if base in resolved.parents else str(resolved)

    write_json_atomically(directory / ARMS_MANIFEST, ArmsFile(
        session=session, baseline=arms[0][0], overrides=list(overrides), repeats=repeats,
        arms=[ArmEntryDoc(name=name, run_dir=where(run_dir), config=config) for name, run_dir, config in arms],
    ))


def read_arms_manifest(directory: Path, purpose: str) -> ArmsManifest | None:
    """The arms of the session that wrote ``directory``, or None when it holds no
    manifest (a single run's directory). ``purpose`` begins an error: what reads it
    (the resume option, :func:`.errors.named`, or the merge command)."""
    path = directory / ARMS_MANIFEST
    if not path.exists():
        return None
    document = read_json(path)
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
        _recorded_repeats(document or {}, entries, path, purpose),
    )


_REPLICATE_SUFFIX = re.compile(r"@r([1-9][0-9]{0,5})$")


def _recorded_repeats(document: Mapping[str, Any], entries: Sequence[ArmEntry], path: Path, purpose: str) -> int | None:
    """The manifest's ``repeats``, checked as a record, never taken as an instruction:
    within the range the option allows (:data:`.options.MAX_REPEATS`), and equal to the
    replicates its own entries list for every arm (``<arm>@r1 .. @rN``). Anything else
    is damage naming the file: a resume that obeyed ``repeats: 40`` in a finished
    2-replicate session would run 38 replicates nobody asked for."""
    if "repeats" not in document:
        return None
    repeats = document["repeats"]
    problem = "is text, not a number" if isinstance(repeats, str) else count_problem(repeats, MAX_REPEATS)
    if problem is None:
        replicates: dict[str, set[int]] = {}
        for entry in entries:
            match = _REPLICATE_SUFFIX.search(entry.name)
            base = entry.name[: match.start()] if match else entry.name
            replicates.setdefault(base, set()).add(int(match.group(1)) if match else 0)
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


def arm_dir_allowed(run_dir: Path, directory: Path, own_output_dir: Path | None) -> bool:
    """Whether a manifest's arm directory is one the session's own inputs name: inside
    the manifest's ``directory``, or the arm's run config's ``output_dir``."""
    resolved = run_dir.resolve()
    base = directory.resolve()
    return (base in resolved.parents) or (own_output_dir is not None and resolved == own_output_dir.resolve())


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


def read_run_document(run_dir: Path, purpose: str) -> RunFile:
    path = run_dir / RUN_DOCUMENT
    document = read_json(path)
    if document is None:
        raise RunDirError(
            f"{purpose} {run_dir}: no readable {RUN_DOCUMENT} there; pass the output directory "
            f"of the interrupted run (and, if its run config moved, pass {named('config')} as well)"
        )
    version = document.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        # A newer plugin's records may mean something else: continuing would mix them.
        raise RunDirError(
            f"{purpose} {run_dir}: {path} has schema version {version!r}, which this "
            f"pytest-evomemory (schema {SCHEMA_VERSION}) cannot continue; upgrade pytest-evomemory, or start a new run"
        )
    try:
        return RunFile.model_validate(document)
    except ValidationError as error:
        raise RunDirError(f"{purpose} {run_dir}: {problem_line(path, error)}") from None


def _typed(model: type[Doc], records: Iterable[dict[str, Any]]) -> Iterator[Doc | None]:
    """A JSONL file's records as ``model``; None for one that is not (edited or damaged by hand)."""
    for record in records:
        try:
            yield model.model_validate(record)
        except ValidationError:
            yield None


def load_resume_state(run_dir: Path, streams: Sequence[Stream]) -> ResumeState:
    """Read an interrupted run's artefacts; a torn last line (SIGKILL) is ignored.

    Per stream, the completed episodes are the longest prefix of tasks that each have
    a score and either a feedback response, a failed feedback turn or a skipped one.
    """
    resume = named("resume")
    document = read_run_document(run_dir, resume)
    # A score edited or damaged by hand (a task id that is a list) is treated like a
    # torn line: its episode is incomplete and runs again; so is an event that names
    # no task (a failure that is a string). A response cannot be left out so: its
    # episode would count as complete without it (a turn fewer), so it is refused, as
    # is a line that is no record or a record given twice (:func:`iter_jsonl`).
    responses: list[Response] = []
    for number, wire in enumerate(read_jsonl(run_dir / RESPONSES), 1):
        try:
            responses.append(Response.model_validate(wire))
        except ValidationError as error:
            if error.errors()[0]["loc"][:1] in (("stream",), ("task_id",)):
                raise DamagedRecords(
                    f"{resume} {run_dir}: {run_dir / RESPONSES}, record {number} names no stream and task "
                    f"(its 'stream' or 'task_id' is not text); {DAMAGED_ADVICE}",
                    option="resume",
                ) from None
            raise DamagedRecords(
                f"{resume} {run_dir}: {problem_line(run_dir / RESPONSES, error, number)}", option="resume"
            ) from None
    scores = [s for s in _typed(Score, read_jsonl(run_dir / SCORES)) if s is not None]
    events: list[Event] = []
    for wire in read_jsonl(run_dir / EVENTS):
        event = event_or_none(wire)
        if event is not None:
            events.append(event)
    for transcript in sorted((run_dir / TRANSCRIPTS).glob("*.jsonl")):  # rewritten when the resume starts
        for _ in iter_jsonl(transcript):
            pass
    state = ResumeState(document=document)
    for stream in streams:
        position_of = {sample.task_id: sample.position for sample in stream.samples}
        scored = {s.task_id: s for s in scores if s.stream == stream.name}
        fed_back = {r.task_id for r in responses if r.stream == stream.name and r.kind == "feedback"}
        ended = {task for name, task in map(event_task, events) if name == stream.name}
        done = 0
        for sample in stream.samples:  # a static-memory stream's episode has no feedback turn
            if sample.task_id not in scored or (stream.feedback and not (sample.task_id in fed_back or sample.task_id in ended)):
                break
            done += 1
        state.done[stream.name] = done
        kept_ids = {sample.task_id for sample in stream.samples[:done]}
        answered = kept_ids | _ingested(stream, responses)
        state.responses += [r for r in responses if r.stream == stream.name and r.task_id in answered]
        state.scores += [scored[task_id] for task_id in sorted(kept_ids, key=position_of.__getitem__)]
        state.events += [
            e for e in events if event_task(e)[0] == stream.name and event_task(e)[1] in kept_ids
        ]
    return state


def _ingested(stream: Stream, responses: Sequence[Response]) -> set[str]:
    """A conversation stream's ingestion turns, kept only when every session's turn is
    there (runtime/ingestion.py saves them whole); a partial ingestion runs again."""
    wanted = set(stream.ingestion_ids)
    seen = {r.task_id for r in responses if r.stream == stream.name and r.kind == "ingestion" and r.task_id in wanted}
    return seen if wanted and seen == wanted else set()


def event_task(event: Event) -> tuple[str, str | None]:
    """``(stream, task id)`` of the task an event ended (a failure or a skip)."""
    task = event.skipped if isinstance(event, FeedbackSkippedRecord) else event.failure
    return task.stream, task.task_id
