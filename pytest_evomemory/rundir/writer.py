"""Writing a run: :class:`RunWriter` appends its records and writes its documents;
the times and package versions a run records.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from io import FileIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..rundocs import Response, RunDoc, RunFile, Score, TranscriptEntry
from ..rundocs.wire import Record
from ..util.atomicfile import write_atomically
from .jsonl import dumps, read_jsonl, rewrite_jsonl, typed, write_json_atomically
from .layout import EVENTS, RESPONSES, RUN_DOCUMENT, SCORES, SUMMARY, TRANSCRIPTS

if TYPE_CHECKING:
    from ..rundocs.summary import Summary
    from .resumestate import ResumeState

_VERSIONED_PACKAGES = (
    "pytest-evomemory", "pytest", "pytest-xdist", "pluggy", "pyyaml", "pydantic",
    "datasets", "huggingface-hub", "httpx2", "math-verify", "pytest-json-report",
)


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


#: the run files that hold records of several streams (each transcript is one stream's)
_SEVERAL_STREAMS = (RESPONSES, EVENTS)


class _Appended:
    """The lines a writer appended to a file of several streams' records, in order:
    each one's stream and length (a few bytes a line, not the records), so that
    :meth:`RunWriter.finalize_streams` orders the file without parsing every line again."""

    def __init__(self) -> None:
        self._names: dict[str | None, int] = {}
        self._streams = array("I")
        self._sizes = array("Q")

    def add(self, stream: object, size: int) -> None:
        name = stream if isinstance(stream, str) else None
        number = self._names.get(name)
        if number is None:
            number = self._names[name] = len(self._names)
        self._streams.append(number)
        self._sizes.append(size)

    def are(self, lines: Sequence[str], size: int) -> bool:
        """Whether ``lines`` (the file's, ``size`` characters in all) are the ones
        appended: as many, as long in all. A line added, removed or cut since (by a
        hand, another process) sends the file to be read for its streams instead."""
        return len(lines) == len(self._sizes) and sum(self._sizes) == size

    def streams(self) -> Iterator[str | None]:
        names = list(self._names)
        return (names[number] for number in self._streams)


class RunWriter:
    """Appends records to the run directory; only one process (the controller) writes.

    JSONL files are appended and flushed per record, so an interrupted run keeps all
    that happened before the interruption; ``scores.jsonl`` is rewritten in stream
    order at the end so that serial and parallel runs produce the same file. The
    first write that fails is kept in :attr:`failure` and ends writing.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._files: dict[str, FileIO] = {}
        #: per file of records of several streams: the rank of the stream last
        #: appended, and the files whose lines came out of stream order
        self._last_stream: dict[str, str] = {}
        self._interleaved: set[str] = set()
        #: per such file, the lines this writer appended (:class:`_Appended`); None once
        #: the file holds lines it did not append (a resume's kept records)
        self._lines: dict[str, _Appended | None] = {}
        self.failure: str | None = None
        #: the directory this writer writes (device, inode): kept files follow it if it
        #: is moved or removed, while a write by name would land in whatever took its place
        self._place: tuple[int, int] | None = None
        self._gone = False
        self._guard(lambda: (self.run_dir / TRANSCRIPTS).mkdir(parents=True, exist_ok=True))
        self._place = _place_of(run_dir)

    def _moved(self) -> bool:
        """True once the run directory is no longer the one this writer began in
        (removed, moved or replaced while the run wrote it): the records kept since
        went with it, and a summary or run.json written by name would describe results
        that are not beside it. Writing ends then, with that reason unless an earlier
        failure's is kept. One ``stat``: looked at per task and before each write by name."""
        if self._place is None:
            return False
        if _place_of(self.run_dir) == self._place:
            return False
        self._place = None
        self._gone = True
        self.close()
        if self.failure is None:
            self.failure = (
                f"the run directory {self.run_dir} was removed or moved while the run wrote it: what it wrote went "
                "with it, and nothing more is written; start the run again (or resume it where it was moved to)"
            )
        return True

    def fail(self, reason: str) -> None:
        """A run file written elsewhere (a worker's memory snapshot) failed: writing
        ends here too, as if this writer's own write had failed."""
        if self.failure is None:
            self.failure = reason

    def _guard(self, write: Any) -> None:
        if self.failure is not None or self._moved():
            return
        try:
            write()
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError) -> None:
        """Keep the first failed write's reason: writing ends here."""
        if self.failure is None:
            self.failure = (
                f"writing the run directory {self.run_dir} failed: {error.strerror or error}"
                f"{f' ({error.filename})' if error.filename else ''}; results written before "
                "this point are kept"
            )

    def _append(self, relative: str, record: Mapping[str, Any] | RunDoc, stream: object = None) -> None:
        """One record, appended whole by one ``write`` of the unbuffered file (what a
        text file's write and flush came to, without its two layers of buffers);
        ``stream``: the record's, in a file of several streams' records."""
        if self.failure is not None:
            return
        line = (dumps(record) + "\n").encode("ascii")
        if relative in _SEVERAL_STREAMS:
            self._note_stream(relative, stream, len(line))
        try:
            handle = self._files.get(relative)
            if handle is None:
                handle = self._files[relative] = FileIO(self.run_dir / relative, "a")
            written = handle.write(line)
            while written < len(line):  # a short write (interrupted): the rest, as a flush would
                written += handle.write(line[written:])
        except OSError as error:
            self._failed(error)

    def write_run(self, document: RunFile) -> None:
        self._guard(lambda: write_json_atomically(self.run_dir / RUN_DOCUMENT, document))

    def _note_stream(self, relative: str, stream: object, size: int) -> None:
        """Streams interleave in a file when several ran at once (xdist workers,
        ``evomemory run``'s chains); :meth:`finalize_streams` orders it again. Said
        of the line of ``size`` bytes being appended (:meth:`_append`)."""
        if relative not in self._lines:
            self._lines[relative] = _Appended()
        appended = self._lines[relative]
        if appended is not None:
            appended.add(stream, size)
        if not isinstance(stream, str):
            return
        last = self._last_stream.get(relative)
        if last is not None and last != stream:
            self._interleaved.add(relative)
        self._last_stream[relative] = stream

    def add_response(self, response: Response) -> None:
        """A response: its line in responses.jsonl, its messages in its stream's transcript."""
        line, transcript = response.written_lines()
        self._append(RESPONSES, line, response.stream)
        self._append(f"{TRANSCRIPTS}/{response.stream}.jsonl", transcript)

    def add_score(self, scored: Score) -> None:
        if self.failure is None and not self._moved():  # looked at once per task
            self._append(SCORES, scored)

    def add_event(self, event: Record) -> None:
        wire = event.wire()
        self._append(EVENTS, wire, wire.get("stream"))

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
            self._guard(functools.partial(_order_by_stream, path, rank, self._lines.get(relative)))
        self._interleaved.clear()
        self._lines.clear()  # the files are in order now, as no append left them

    def restart_from(self, state: ResumeState) -> None:
        """Resume: keep only the completed episodes' records, dropping torn ones."""
        self._interleaved |= {RESPONSES, EVENTS}  # the interrupted run's may have interleaved
        self._lines.update(dict.fromkeys(_SEVERAL_STREAMS))  # lines this writer did not append
        self.close()
        kept = {(r.stream, r.task_id) for r in state.responses}

        def rewrite() -> None:
            rewrite_jsonl(self.run_dir / RESPONSES, [r.line() for r in state.responses])
            rewrite_jsonl(self.run_dir / SCORES, state.scores)
            rewrite_jsonl(self.run_dir / EVENTS, [e.wire() for e in state.events])
            for path in (self.run_dir / TRANSCRIPTS).glob("*.jsonl"):
                stream = path.stem
                entries = typed(TranscriptEntry, read_jsonl(path))
                rewrite_jsonl(path, [t for t in entries if t is not None and (stream, t.task_id) in kept])

        self._guard(rewrite)

    def write_records(self, relative: str, records: Iterable[Mapping[str, Any] | RunDoc]) -> None:
        """Write a whole JSONL file of the run at once (the merge of shards' runs)."""
        target = self.run_dir / relative
        if relative in _SEVERAL_STREAMS:
            self._lines[relative] = None  # lines this writer did not append

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            rewrite_jsonl(target, records)

        self._guard(write)

    def copy_tree(self, source: Path, relative: str) -> None:
        """Copy a folder of another run directory (a shard's memory snapshots) into this one."""
        import shutil

        target = self.run_dir / relative
        self._guard(lambda: shutil.copytree(source, target, dirs_exist_ok=True))

    def write_summary(self, document: Summary) -> None:
        self.close()
        if self._gone or self._moved():
            return  # not beside results it does not describe
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



def _place_of(directory: Path) -> tuple[int, int] | None:
    """The directory's device and inode, or None where it cannot be looked at."""
    try:
        found = os.stat(directory)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _order_by_stream(path: Path, rank: Mapping[str, int], appended: _Appended | None) -> None:
    """Rewrite a JSONL file of several streams' records with each stream's lines
    together in ``rank`` order, each stream's in the order they came (a stable sort);
    a line without a stream stays after the line before it. The lines' streams are
    the ones ``appended`` noted while they are the file's lines, else read from them."""
    text = path.read_text(encoding="ascii")
    lines = text.splitlines(keepends=True)
    if appended is not None and appended.are(lines, len(text)):
        streams: Iterable[object] = appended.streams()  # the lines this writer appended
    else:  # lines it did not write (changed by a hand): read for their streams
        streams = (json.loads(line).get("stream") if line.strip() else None for line in lines)
    keys, previous = [], len(rank)
    for stream in streams:
        previous = rank.get(stream, len(rank)) if isinstance(stream, str) else previous
        keys.append(previous)
    order = sorted(range(len(lines)), key=keys.__getitem__)  # stable: each stream's own order
    write_atomically(path, (lines[index] for index in order), encoding="ascii")


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
    rewrite_jsonl(path, records)


__all__ = ["RunWriter", "package_versions", "utc_now"]
