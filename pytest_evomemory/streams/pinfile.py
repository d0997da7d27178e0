"""The bytes of a pinned data file, shared by every benchmark's materializer.

A downloaded file is accepted by its size and SHA-256, and a manifest beside it
records where it came from, so a later run knows which pin it holds. Evo-Memory's
Hugging Face files and LoCoMo's GitHub file are checked and recorded the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.boundedread import open_regular
from ..core.errors import DataError
from ..util.atomicfile import write_atomically

#: The manifest a materializer writes beside (or for) a file it downloaded.
MANIFEST_NAME = ".evomemory-source.json"


def size_and_sha256(path: Path) -> tuple[int, str]:
    """The size and SHA-256 of a regular file (a device or FIFO, which a hash would
    read for ever, is a :class:`~..core.errors.DataError` naming it)."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, what="a data file", error=DataError) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def write_manifest_file(path: Path, manifest: Mapping[str, Any]) -> None:
    """Write a manifest atomically: a reader sees the old one or the new one."""
    write_atomically(path, json.dumps(manifest, indent=2))


__all__ = ["MANIFEST_NAME", "size_and_sha256", "write_manifest_file"]
