"""The run directory's codec: one record as one ASCII JSON line, a JSON document
written atomically, and the records of a JSONL file read back (as mappings, or
typed as their :mod:`..rundocs` model) with a torn last line skipped and any
other damage refused in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import ValidationError

from ..core import boundedread
from ..core.validation import path_problem
from ..rundocs import DAMAGED_ADVICE, RunDoc
from ..rundocs.base import DamagedDocument, Doc, problem_line, read
from ..util.atomicfile import write_atomically
from ..util.redaction import RedactedDumps, dumps_redacted
from ..util.text import inert, shorten
from .layout import RESPONSES, SCORES, TRANSCRIPTS, RunDirError


def _plain(record: Mapping[str, Any] | RunDoc) -> Mapping[str, Any]:
    return record.written() if isinstance(record, RunDoc) else record


#: How a record becomes a line (:func:`dumps`), its options given once.
_LINE = RedactedDumps(ensure_ascii=True, sort_keys=True, default=str)


def dumps(record: Mapping[str, Any] | RunDoc) -> str:
    """One record as one line: redacted (no secret reaches a file), ASCII JSON (no
    character can break the line), keys sorted."""
    return _LINE(record.written() if isinstance(record, RunDoc) else record)


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



def rewrite_jsonl(path: Path, records: Iterable[Mapping[str, Any] | RunDoc]) -> None:
    write_atomically(path, (dumps(record) + "\n" for record in records), encoding="ascii")


def typed(model: type[Doc], records: Iterable[dict[str, Any]]) -> Iterator[Doc | None]:
    """A JSONL file's records as ``model``; None for one that is not (edited or damaged by hand)."""
    for record in records:
        try:
            yield model.model_validate(record)
        except ValidationError:
            yield None


__all__ = [
    "TRANSCRIPT_KEY", "UNIQUE_KEYS", "DamagedRecords", "dumps", "iter_documents", "iter_jsonl",
    "read_json", "read_jsonl", "rewrite_jsonl", "typed", "write_json_atomically",
]
