"""The one bounded reader of every file and JSON text the package reads.

Configs, pricing tables, data files, LoCoMo files, caches, run artefacts and what
an endpoint sends all fail in the same ways when they are hostile or damaged: a
symbolic link to ``/dev/zero`` (read whole, it fills memory), a FIFO (read, it
never ends), 200,000 nested brackets (the parser recurses per level), an integer
of 6,000 digits (Python refuses to convert it). Each of these is bounded here,
once, and refused in one line that names the file and the bound, instead of a
``MemoryError``, ``RecursionError`` or ``ValueError`` from deep inside a parser.

Two doors, one set of bounds:

* :func:`read_bytes` / :func:`read_text` / :func:`read_json`: a file, which must be
  a regular file (devices, FIFOs and sockets are refused *before* they are opened,
  and again on the open descriptor), read up to a byte limit;
* :func:`loads`: a JSON text from anywhere (a file, a reply body, a tool call's
  ``arguments``), bounded in nesting depth and integer digits.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from io import BufferedReader
from itertools import accumulate
from pathlib import Path
from typing import Any

from .errors import EvoMemoryError

#: Nesting deeper than this in an input (a config, a task record, a tool call's
#: arguments) is refused: no real input needs it, and parsers recurse per level.
MAX_NESTING_DEPTH = 100
#: What the package itself writes nests a few levels around what it was given (a
#: transcript record around a tool call's arguments): its own documents may be deeper.
MAX_ARTEFACT_DEPTH = 2 * MAX_NESTING_DEPTH
#: Python refuses to convert integers longer than this (``sys.int_info``); we say so first.
MAX_INT_DIGITS = 4300

#: Byte limits by kind of file (a message names the limit it applied).
CONFIG_BYTES = 1_000_000
DOCUMENT_BYTES = 256 * 1024 * 1024
CACHE_BYTES = 64 * 1024 * 1024


class BoundExceeded(ValueError):
    """A JSON text over a bound (depth, integer digits): a ``ValueError``, so every
    caller that already treats unparsable JSON as such treats it alike. ``bound`` is
    which: ``"depth"`` or ``"digits"``."""

    def __init__(self, message: str, bound: str) -> None:
        super().__init__(message)
        self.bound = bound


ErrorFactory = Callable[[str], Exception]


def _default_error(message: str) -> Exception:
    return UnreadableFile(message)


class UnreadableFile(EvoMemoryError):
    """A file the package was asked to read is not one it can read within bounds."""


def _megabytes(limit: int) -> str:
    return f"{limit / (1 << 20):,.1f} MiB" if limit >= (1 << 20) else f"{limit:,} bytes"


def special_file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: Path, *, limit: int, what: str = "this file", error: ErrorFactory = _default_error) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes.

    A device, FIFO or socket (a symbolic link to one included) is refused before it
    is opened, and once more on the open descriptor (a file swapped in between); a
    file that grows past ``limit`` while read is refused at ``limit + 1`` bytes, so
    nothing bigger is ever held. Every refusal is ``error(one line)`` naming the
    file and the bound; ``FileNotFoundError`` passes through for callers that treat
    an absent file as absent.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as problem:
        raise error(f"{path}: cannot be read ({_reason(problem)})") from None
    kind = special_file_kind(info.st_mode)
    if kind is not None:
        raise error(f"{path}: is {kind}, not a regular file; {what} must be a regular file")
    if info.st_size > limit:
        raise error(f"{path}: is {info.st_size:,} bytes, over the limit of {_megabytes(limit)} for {what}")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as problem:
        raise error(f"{path}: cannot be read ({_reason(problem)})") from None
    try:
        kind = special_file_kind(os.fstat(descriptor).st_mode)
        if kind is not None:
            raise error(f"{path}: is {kind}, not a regular file; {what} must be a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise error(f"{path}: is over the limit of {_megabytes(limit)} for {what} (it grew while read)")
        return b"".join(chunks)
    except OSError as problem:
        raise error(f"{path}: cannot be read ({_reason(problem)})") from None
    finally:
        os.close(descriptor)


def open_regular(path: Path, *, what: str = "this file", error: ErrorFactory = _default_error) -> BufferedReader:
    """``path`` opened for reading as a stream (a long JSONL file is read a line at a
    time), when it is a regular file: a device, FIFO or socket is ``error`` before it
    is opened (opening a FIFO would wait for a writer for ever) and again on the
    descriptor. ``FileNotFoundError`` passes through; any other ``OSError`` too."""
    info = os.stat(path)
    kind = special_file_kind(info.st_mode)
    if kind is not None:
        raise error(f"{path}: is {kind}, not a regular file; {what} must be a regular file")
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC)
    kind = special_file_kind(os.fstat(descriptor).st_mode)
    if kind is not None:
        os.close(descriptor)
        raise error(f"{path}: is {kind}, not a regular file; {what} must be a regular file")
    return os.fdopen(descriptor, "rb")


def read_text(path: Path, *, limit: int, what: str = "this file", error: ErrorFactory = _default_error,
              encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded; text that is not ``encoding`` is ``error``."""
    raw = read_bytes(path, limit=limit, what=what, error=error)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as problem:
        raise error(f"{path}: not {encoding.upper()} text (byte {problem.start})") from None


def read_json(path: Path, *, limit: int = DOCUMENT_BYTES, what: str = "this file",
              error: ErrorFactory = _default_error, depth: int = MAX_ARTEFACT_DEPTH) -> Any:
    """:func:`read_text` parsed by :func:`loads`; a text that is no JSON, or over a
    bound, is ``error`` naming the file."""
    text = read_text(path, limit=limit, what=what, error=error, encoding="utf-8-sig")
    try:
        return loads(text, depth=depth)
    except ValueError as problem:
        raise error(f"{path}: {json_problem(problem)}") from None


#: A JSON string, escapes included, matched without backtracking (the unrolled loop).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_OPENING = frozenset("[{")


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text (brackets inside strings ignored).

    The strings are cut out and the brackets counted by C-level loops, so a 3 MB
    file is scanned in milliseconds (a character-by-character loop takes a second)."""
    if text.count("[") + text.count("{") == 0:
        return 0
    brackets = _BRACKETS.findall(_STRING.sub("", text))
    return max(accumulate(1 if bracket in _OPENING else -1 for bracket in brackets), default=0)


def bounded_int(text: str) -> int:
    """``parse_int`` for :func:`json.loads`: longer than :data:`MAX_INT_DIGITS` is refused."""
    digits = len(text.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise BoundExceeded(f"an integer of {digits:,} digits (limit {MAX_INT_DIGITS}); write it as a string", "digits")
    return int(text)


#: :func:`json.loads`'s decoder with :func:`bounded_int` (its state is per call, so threads share it)
_DECODER = json.JSONDecoder(parse_int=bounded_int)


def loads(text: str | bytes, *, depth: int = MAX_NESTING_DEPTH, **hooks: Any) -> Any:
    """``json.loads`` within bounds: nesting deeper than ``depth`` and integers longer
    than :data:`MAX_INT_DIGITS` are :class:`BoundExceeded` (a ``ValueError``), never a
    ``RecursionError``. ``hooks`` are passed on (``object_pairs_hook``, ``parse_constant``)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    # A text with no more opening brackets than ``depth`` cannot nest deeper: a run's
    # records hold a few dozen, and the scan is most of the cost of reading them back.
    if text.count("[") + text.count("{") > depth:
        deepest = nesting_depth(text)
        if deepest > depth:
            raise BoundExceeded(f"nested {deepest:,} levels deep (limit {depth}); flatten it", "depth")
    try:
        if hooks:
            return json.loads(text, parse_int=bounded_int, **hooks)
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        # one decoder for every call: json.loads builds a new one whenever it is given a hook
        return _DECODER.decode(text)
    except RecursionError:  # pragma: no cover - nesting_depth refuses this first
        raise BoundExceeded(f"nested too deeply (limit {depth})", "depth") from None


def json_problem(error: ValueError) -> str:
    """A parse failure in words: the bound it broke, or the syntax error and where."""
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte {error.start})"
    return str(error)[:300]


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error) or type(error).__name__
    if isinstance(error, ValueError):
        return "the path is not valid (it holds a NUL character?)"
    return type(error).__name__


__all__ = [
    "CACHE_BYTES",
    "CONFIG_BYTES",
    "DOCUMENT_BYTES",
    "MAX_ARTEFACT_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NESTING_DEPTH",
    "BoundExceeded",
    "UnreadableFile",
    "bounded_int",
    "json_problem",
    "loads",
    "nesting_depth",
    "open_regular",
    "read_bytes",
    "read_json",
    "read_text",
    "special_file_kind",
]
