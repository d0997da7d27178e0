"""Generic JSONL streams: the format of the bundled sample set and of user streams.

One JSON object per line::

    {"id": "t1", "prompt": "...", "target": "...", "choices": ["..", ".."], "metadata": {}}

``choices`` and ``metadata`` are optional; ``match_mode`` may override the stream's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ..config import BenchmarkConfig
from ..core.boundedread import open_regular
from ..core.errors import ConfigError, DataError
from ..core.types import BenchmarkSample
from ..core.validation import JQ_HINT, decode_json_line, path_problem, resolve_path
from ..util.filestamp import Stamp, file_stamp
from .base import Stream, apply_limit
from .checks import check_sample

MAX_STREAM_FILE_BYTES = 512 * 1024 * 1024
_ALLOWED_KEYS = {"id", "prompt", "target", "choices", "metadata", "match_mode"}


#: The streams read so far while :func:`shared_reads` is open (None: not open), by
#: what was asked for, each with its file's stamps from before it was read.
_SHARED: ContextVar[dict[tuple[str, str, str, int | None, str], tuple[Stamp, Stream]] | None] = ContextVar(
    "shared_stream_reads", default=None
)


@contextmanager
def shared_reads() -> Iterator[None]:
    """While open, a stream file asked for again with the same settings (every arm of
    a session loads its benchmark: a grid's arms read the same files) is the
    :class:`Stream` read the first time, while the file's inode, size and times are
    the ones it had before that read; else it is read again. A :class:`Stream` and
    its samples are frozen, so the arms may share it. Nothing is kept once closed."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def read_jsonl_stream(
    path: Path, name: str, match_mode: str, limit: int | None = None, description: str = ""
) -> Stream:
    """Read and validate a JSONL stream file; every problem names file and line
    (read once for all the arms that ask for it while :func:`shared_reads` is open)."""
    shared = _SHARED.get()
    if shared is None:
        return _read_jsonl_stream(path, name, match_mode, limit, description)
    key = (str(path), name, match_mode, limit, description)
    stamp = file_stamp(path)
    found = shared.get(key)
    if found is not None and stamp is not None and found[0] == stamp:
        return found[1]
    stream = _read_jsonl_stream(path, name, match_mode, limit, description)
    if stamp is not None:
        shared[key] = (stamp, stream)
    return stream


def _read_jsonl_stream(path: Path, name: str, match_mode: str, limit: int | None, description: str) -> Stream:
    problem = path_problem(path)
    if problem == "does not exist":
        raise DataError(f"stream {name!r}: data file {path} not found; check 'path' under 'files' (relative to the benchmark config)")
    if problem is not None:
        raise DataError(f"stream {name!r}: data file {path} {problem}")
    if path.stat().st_size > MAX_STREAM_FILE_BYTES:
        raise DataError(f"stream {name!r}: {path} is larger than 512 MiB")
    samples: list[BenchmarkSample] = []
    seen: set[str] = set()
    with open_regular(path, what="a stream's data file", error=DataError) as handle:
        for line_number, raw in enumerate(handle, start=1):
            if limit is not None and len(samples) >= limit:
                break
            if not raw.strip():
                continue
            where = f"stream {name!r}: {path}, line {line_number}"
            record = decode_json_line(raw, where, first_line=line_number == 1)
            sample = _to_sample(record, name, len(samples), match_mode, where)
            check_sample(sample, where)
            if sample.task_id in seen:
                raise DataError(f"{where}: duplicate task id {sample.task_id!r}; give each task its own id")
            seen.add(sample.task_id)
            samples.append(sample)
    if not samples:
        raise DataError(
            f"stream {name!r}: {path} holds no tasks; write one JSON object per line, "
            'e.g. {"id": "t1", "prompt": "...", "target": "..."}'
        )
    return Stream(
        name,
        apply_limit(samples, limit),
        match_mode,
        description,
        provenance=local_provenance(path, len(samples)),
    )


def local_provenance(path: Path, tasks: int) -> dict[str, Any]:
    """A local file has no upstream pin; its hash is recorded so runs can be compared."""
    digest = hashlib.sha256()
    with open_regular(path, what="a stream's data file", error=DataError) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return {
        "repository": None,
        "revision": None,
        "file": str(path),
        "path": str(path),
        "size": path.stat().st_size,
        "sha256": digest.hexdigest(),
        "pinned": False,
        "verified": False,
        "rows_read": tasks,
        "tasks_converted": tasks,
        "tasks_selected": tasks,
        "settings": {},
        "breakdown": None,
    }


def _to_sample(record: Any, stream: str, position: int, match_mode: str, where: str) -> BenchmarkSample:
    if isinstance(record, list) and record and all(isinstance(item, dict) for item in record):
        raise DataError(f"{where}: this line is a JSON array of objects; write one object per line (e.g. {JQ_HINT})")
    if not isinstance(record, dict):
        raise DataError(
            f"{where}: expected a JSON object, got {_json_kind(record)}; write one "
            '{"id": ..., "prompt": ..., "target": ...} object per line'
        )
    unknown = set(record) - _ALLOWED_KEYS
    if unknown:
        raise DataError(
            f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_ALLOWED_KEYS)}; "
            "remove it or move it under 'metadata'"
        )
    for key in ("id", "prompt", "target"):
        if key not in record:
            raise DataError(f"{where}: required key {key!r} is missing; add it")
    task_id = record["id"]
    if not isinstance(task_id, str | int) or isinstance(task_id, bool) or str(task_id) == "":
        raise DataError(f"{where}: 'id' must be a non-empty string or integer; write e.g. \"id\": \"t1\"")
    if not isinstance(record["prompt"], str) or not isinstance(record["target"], str):
        raise DataError(f"{where}: 'prompt' and 'target' must be strings; write them in double quotes")
    choices = record.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise DataError(f"{where}: 'choices' must be a list of strings; write e.g. \"choices\": [\"4\", \"5\"]")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise DataError(f"{where}: 'metadata' must be an object; write e.g. \"metadata\": {{}}")
    mode = record.get("match_mode", match_mode)
    if not isinstance(mode, str):
        raise DataError(f"{where}: 'match_mode' must be a string; write e.g. \"match_mode\": \"exact\"")
    prompt = record["prompt"]
    if choices and "\nA. " not in prompt:
        prompt = render_choices(prompt, choices)
    return BenchmarkSample(
        task_id=str(task_id),
        stream=stream,
        position=position,
        prompt=prompt,
        target=record["target"],
        match_mode=mode,
        choices=tuple(choices),
        metadata=metadata,
    )


def _json_kind(value: Any) -> str:
    """How JSON would call ``value`` (a Python type name means nothing to a data author)."""
    if value is None:
        return "null"
    return {bool: "true/false", str: "a string", list: "an array", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def render_choices(question: str, choices: Sequence[str]) -> str:
    """The question followed by lettered options, one per line (A., B., ...)."""
    lines = [question.rstrip(), ""]
    lines += [f"{chr(ord('A') + index)}. {option}" for index, option in enumerate(choices)]
    return "\n".join(lines)


class FilesBenchmark:
    """User-defined streams listed under ``files:`` in the benchmark config."""

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return [entry.name for entry in config.files]

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        if not config.files:
            raise ConfigError(
                "key 'files': benchmark 'files' needs at least one entry; add one, e.g. "
                "files: [{name: mine, path: tasks.jsonl}]", key="files",
            )
        entries = {entry.name: entry for entry in config.files}
        streams = []
        for name in names:
            entry = entries[name]
            path = Path(entry.path)
            if path.suffix not in {".jsonl", ".json"}:
                raise ConfigError(
                    f"key 'files': stream {name!r} path {entry.path!r} must be a .jsonl file; name a file of tasks, "
                    "one JSON object per line"
                )
            resolved = path if path.is_absolute() else base_dir / path
            streams.append(read_jsonl_stream(resolve_path(resolved), name, entry.match_mode, config.limit))
        return streams
