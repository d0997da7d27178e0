"""Checks shared by every door input comes through: files, JSON lines, task records.

Config files (:mod:`..config`) and data files (:mod:`.benchmarks.jsonl`) are read by
different modules but fail in the same ways: a path that is a directory, a
symbolic-link loop, a byte-order mark, an integer of 5,000 digits, 40,000 nested
brackets, a record of 100 MB. Each such case is decided here once, and turned
into one line naming the file (and line, and task) and saying what to do, instead
of a ``RecursionError`` or ``ValueError`` traceback from deep inside a parser.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..util.text import shorten
from .boundedread import MAX_NESTING_DEPTH, bounded_int, nesting_depth
from .errors import DataError

#: A single task record (one JSONL line) larger than this is refused at load, so a
#: 100 MB prompt never reaches a model. Raise it with ``EVOMEMORY_MAX_RECORD_BYTES``.
DEFAULT_MAX_RECORD_BYTES = 4 * 1024 * 1024
MAX_RECORD_BYTES_ENV = "EVOMEMORY_MAX_RECORD_BYTES"

#: Choice letters run A..Z; a 27th option could not be named by a letter.
MAX_CHOICES = 26

_BOM = b"\xef\xbb\xbf"


def path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file, in words, or ``None`` if it can.

    ``Path.exists()`` says ``False`` for a symbolic-link loop and ``True`` for a
    directory; both would then be reported wrongly ("does not exist", or a read
    error later), so this asks the operating system directly.
    """
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "is a symbolic link loop; point the link at a real file"
        if error.errno == errno.ENAMETOOLONG:
            return "has a name too long for the file system"
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            if path.is_symlink():
                return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
            return "does not exist"
        if error.errno == errno.EACCES:
            return "cannot be read (permission denied); check its permissions"
        return f"cannot be read ({error.strerror or error})"
    except ValueError:  # an embedded NUL byte
        return "is not a valid path (it contains a NUL character)"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file; name the file inside it"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    return None


def resolve_path(path: Path) -> Path:
    """``path`` made absolute with symbolic links resolved where possible.

    ``Path.resolve`` raises ``RuntimeError`` on a symbolic-link loop; the loop is
    reported by :func:`path_problem` instead, on the unresolved absolute path.
    """
    try:
        return path.resolve()
    except (RuntimeError, OSError, ValueError):
        return Path(os.path.abspath(path))


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def not_utf8(raw: bytes, error: UnicodeDecodeError) -> str:
    """Why ``raw`` is no UTF-8 text and what to do, naming UTF-16 (what Windows
    editors and PowerShell's ``>`` write) when it is that."""
    if raw.startswith(_UTF16_BOMS) or (len(raw) > 1 and (raw[1:2] == b"\0" or raw[:1] == b"\0")):
        return "this is UTF-16 text, not UTF-8; save the file as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"
    return f"not UTF-8 text (byte {error.start}); save the file as UTF-8"


def max_record_bytes() -> int:
    """The per-record size limit: ``$EVOMEMORY_MAX_RECORD_BYTES`` or the default."""
    raw = os.environ.get(MAX_RECORD_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_RECORD_BYTES
    if raw.isascii() and raw.isdigit() and len(raw) <= 18 and int(raw) > 0:
        return int(raw)
    # Ignoring it would refuse a big record while the user believes the limit was raised.
    raise DataError(
        f"the environment variable {MAX_RECORD_BYTES_ENV}={raw[:40]!r} is not a whole number of bytes "
        f"above 0; write e.g. {MAX_RECORD_BYTES_ENV}={2 * DEFAULT_MAX_RECORD_BYTES}, or unset it"
    )


def decode_json_line(raw: bytes, where: str, *, first_line: bool = False) -> Any:
    """One JSONL record, or a :class:`DataError` that names ``where`` and the problem.

    A UTF-8 byte-order mark on the first line is accepted (as YAML configs accept
    it). Oversized records, over-long integers and deep nesting are refused
    before or instead of the parser's own ``ValueError``/``RecursionError``.
    """
    if first_line and raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    limit = max_record_bytes()
    if len(raw) > limit:
        raise DataError(
            f"{where}: the record is {len(raw):,} bytes, over the limit of {limit:,}; "
            f"shorten it or raise {MAX_RECORD_BYTES_ENV}"
        )
    kind = _binary_kind(raw) if first_line else None
    if kind is not None:
        raise DataError(f"{where}: this is a {kind} file, not JSON lines; {_BINARY_HINTS[kind]}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: {not_utf8(raw, error)}") from None
    depth = nesting_depth(text)
    if depth > MAX_NESTING_DEPTH:
        raise DataError(f"{where}: nested {depth:,} levels deep (limit {MAX_NESTING_DEPTH}); flatten the record")
    try:
        record = json.loads(
            text, parse_int=bounded_int, parse_constant=_no_constant, object_pairs_hook=unique_keys
        )
    except json.JSONDecodeError as error:
        if first_line and text.strip() in ("[", "{"):
            raise DataError(
                f"{where}: this is a pretty-printed JSON document, not JSON lines; write one object per "
                f"line (e.g. {JQ_HINT})"
            ) from None
        raise DataError(f"{where}: invalid JSON ({error.msg} at column {error.colno}); fix or remove the line") from None
    except ValueError as error:
        raise DataError(f"{where}: {error}") from None
    except RecursionError:  # pragma: no cover - nesting_depth refuses this first
        raise DataError(f"{where}: nested too deeply; flatten the record") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(record):
        raise DataError(
            f"{where}: a string holds an unpaired surrogate escape (such as \\ud800), which is "
            "no character and cannot be written to the results; fix the escape"
        )
    return record


#: How to turn a JSON array file into JSON lines.
JQ_HINT = "jq -c '.[]' tasks.json > tasks.jsonl"

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(key) or _has_lone_surrogate(item) for key, item in value.items())
    return False


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON objects with a key written twice are refused: ``json`` keeps the last
    one silently, so ``{"target": "A", "target": "B"}`` would change what is scored."""
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise ValueError(f"the key {key!r} appears twice in one object; keep one")
        record[key] = value
    return record


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; write it as a string or null")


#: Leading bytes of files a user may hand over as JSON lines by mistake.
_MAGIC = {b"\x1f\x8b": "gzip", b"PAR1": "Parquet", b"PK\x03\x04": "zip", b"BZh": "bzip2",
          b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
_BINARY_HINTS = {
    "gzip": "decompress it (gunzip) and name the .jsonl file",
    "Parquet": "convert it to JSON lines (e.g. pandas.read_parquet(path).to_json(out, orient='records', lines=True))",
    "zip": "extract the .jsonl file from the archive and name that",
    "bzip2": "decompress it (bunzip2) and name the .jsonl file",
    "xz": "decompress it (unxz) and name the .jsonl file",
    "zstd": "decompress it (unzstd) and name the .jsonl file",
}


def _binary_kind(raw: bytes) -> str | None:
    for magic, kind in _MAGIC.items():
        if raw.startswith(magic):
            return kind
    return None


#: A task id names a test item (``evomemory::test_task[stream/id]``), a JUnit case,
#: a ``-k`` selection and a row of every report: it must stay short and printable.
MAX_TASK_ID_CHARS = 200
#: Control characters (C0, DEL, C1), unpaired surrogates and the Unicode line and
#: paragraph separators, as a character-class body: in a name quoted by one-line
#: messages and reports they break the line (or the encoding).
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029"
#: Those, and the bidirectional overrides that make text display as something else.
_UNPRINTABLE = re.compile(f"[{CONTROL_CHARACTERS}\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def check_task_id(task_id: str, where: str) -> None:
    """Refuse a task id that is blank, huge or holds characters no id should."""
    shown = shorten(task_id, 60)
    problem = None
    if not task_id.strip():
        problem = "is blank"
    elif len(task_id) > MAX_TASK_ID_CHARS:
        problem = f"is {len(task_id):,} characters long (limit {MAX_TASK_ID_CHARS})"
    elif _UNPRINTABLE.search(task_id):
        problem = "holds a control, line-break or text-direction character"
    if problem:
        raise DataError(
            f"{where}: task id {shown!r} {problem}; it names the test item and every report row, "
            "so give a short id of printable characters (e.g. 't1')"
        )


#: The longest file name most file systems take (NAME_MAX).
MAX_NAME_BYTES = 255


def long_name_problem(path: Path) -> str | None:
    """Why a name in ``path`` cannot exist on the file system, or ``None``.

    The operating system only says "File name too long" without naming the part;
    this names its length and the limit, so the user knows which name to shorten.
    """
    too_long = next((part for part in path.parts if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES), None)
    if too_long is None:
        return None
    return (
        f"a name in it is {len(too_long.encode('utf-8', 'surrogatepass'))} bytes long, "
        f"over the file system's limit of {MAX_NAME_BYTES}"
    )


#: What the directory holding runs (the output root, a session's arms directory) holds
#: beside them: its arms manifest and the comparison (rundir.ARMS_DIRECTORY_FILES, the
#: owner of the run directory's format, names the same files). No run is named so.
OUTPUT_ROOT_FILES = ("arms.json", "compare.html", "compare.json", "replicates.json", "replicates.html")


def run_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one directory under the output root, in words, or None.

    The one rule for run (and arm) names: a config is refused with it when read,
    and the run directory applies it again before making the directory."""
    if not name or not name.strip():
        return "is empty"
    if "\0" in name:
        return "contains a NUL character"
    if re.search(f"[{CONTROL_CHARACTERS}]", name):
        return "contains a control character (a line break, tab or escape) or an unpaired surrogate"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is {len(name.encode('utf-8', 'surrogatepass'))} bytes long, over the file system's limit of {MAX_NAME_BYTES}"
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        return "contains a path separator"
    if name in (".", ".."):
        return f"is {name!r}"
    if Path(name).is_absolute() or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if name.casefold() in OUTPUT_ROOT_FILES:  # case-folded: macOS and Windows file systems fold case
        return f"is the name of a file the output root holds ({', '.join(OUTPUT_ROOT_FILES)})"
    return None
