"""A model file's SHA-256, computed once per version of the file, not once per process.

A local model is identified by its file: two GGUF files with one name (another
quantisation, a re-download) answer differently, so every artefact names the file
and its hash. Hashing a model takes a while (about 0.2 s for SmolLM2's 100 MB, many
seconds for a multi-GB model) and every pytest-xdist worker would do it again, so
the hash is cached on disk under the file's path, size and modification time: a
file that changes gets hashed again, one that does not is read once.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ..core import boundedread
from ..util.atomicfile import write_atomically

#: Where the hashes live unless a directory is given: beside the response cache.
CACHE_SUBDIR = "file-sha256"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def default_hash_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "pytest-evomemory" / CACHE_SUBDIR


def _cache_key(path: Path, stat: os.stat_result) -> str:
    material = f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}"
    return hashlib.sha256(material.encode("utf-8", errors="surrogateescape")).hexdigest()


def file_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """The file's SHA-256 (hex), from the cache when the file is unchanged.

    Raises ``OSError`` when the file cannot be read; a cache that cannot be read
    or written only costs a recomputation.
    """
    resolved = path.resolve()
    stat = resolved.stat()
    directory = cache_dir if cache_dir is not None else default_hash_cache_dir()
    key = _cache_key(resolved, stat)
    entry = directory / key[:2] / key
    try:
        cached = boundedread.read_text(entry, limit=256, what="a hash cache entry", encoding="ascii").strip()
    except (OSError, boundedread.UnreadableFile):
        cached = ""
    if _HEX64.match(cached):
        return cached
    with boundedread.open_regular(resolved, what="a model file", error=OSError) as handle:  # /dev/zero never ends
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    _store(entry, digest)
    return digest


def _store(entry: Path, digest: str) -> None:
    """Atomically, so that concurrent xdist workers never read half an entry."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(entry, digest, encoding="ascii")
    except OSError:
        return  # a read-only or full cache directory must not fail the run


__all__ = ["default_hash_cache_dir", "file_sha256"]
