"""One line per stream saying which bytes a run read, for the run header.

Kept beside :class:`~.base.Stream` (not in reporting) because the wording of
"verified" and "unverified" is a data fact: it must read the same in the terminal
header, in a report, and in ``evomemory data`` output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Stream

#: Hash digits shown in a header line; the full hash is in run.json.
SHORT_HASH = 12


def provenance_line(stream: Stream) -> str:
    """E.g. ``mmlu_pro: TIGER-Lab/MMLU-Pro@b189ec765aa7:data/test-00000-of-00001.parquet
    sha256 0e24a191921c (verified); 2312 of 12032 rows; categories=economics,...``."""
    return f"{stream.name}: {describe_provenance(stream.provenance)}"


def describe_provenance(provenance: Mapping[str, Any]) -> str:
    """The part of :func:`provenance_line` after the stream name."""
    if not provenance:
        return "no provenance recorded"
    digest = str(provenance.get("sha256") or "")[:SHORT_HASH]
    repository = provenance.get("repository")
    if repository:
        where = f"{repository}@{str(provenance.get('revision'))[:SHORT_HASH]}:{provenance.get('file')}"
        status = (
            "verified"
            if provenance.get("verified")
            else "UNVERIFIED: no pinned hash is known, recorded on first use"
        )
    else:
        where = str(provenance.get("file"))
        status = "local file, not pinned"
    parts = [f"{where} sha256 {digest} ({status})"]
    if "rows_read" in provenance:
        parts.append(f"{provenance.get('tasks_converted')} of {provenance['rows_read']} rows")
    settings = provenance.get("settings") or {}
    if settings:
        parts.append(", ".join(f"{key}={_value(value)}" for key, value in settings.items()))
    if provenance.get("license"):
        parts.append(f"license: {provenance['license']}")
    return "; ".join(parts)


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def unverified_streams(streams: list[Stream]) -> list[str]:
    """Names of hub streams whose bytes are not pinned (the header flags them)."""
    return [
        stream.name
        for stream in streams
        if stream.provenance.get("repository") and not stream.provenance.get("verified")
    ]
