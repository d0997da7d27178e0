"""Which bytes a run reads: hashing, the pin check, and the per-file manifest.

A file is accepted only if its bytes are the pinned ones (size and SHA-256 of the
genuine upstream file) or, where no hash is known, the ones recorded when the file
first arrived (trust on first use: the hash is recorded and reported as unverified,
so a later edit is still caught). Anything else is refused, never silently replaced:
a file the user placed by hand is theirs to delete.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core import boundedread
from ...core.errors import DataError
from ..pinfile import size_and_sha256, write_manifest_file
from .sources import HubFile


@dataclass(frozen=True)
class LocalFile:
    """A stream's file on disk and what is known about its bytes."""

    path: Path
    size: int
    sha256: str
    #: True when the bytes equal the pin of the source; False when no pin is known.
    verified: bool


def fetch_advice(source: HubFile, path: Path) -> str:
    """What to do about a refused file: the same two ways out everywhere."""
    return (
        f"delete {path} and run `evomemory data fetch` (or any run with network access) to download "
        f"the genuine file, or copy {source.filename!r} of {source.page_url} at revision "
        f"{source.revision} there"
    )


def pin_mismatch(source: HubFile, size: int, digest: str) -> str | None:
    """Both hashes and sizes when ``size``/``digest`` are not the pinned bytes, else ``None``."""
    if source.sha256 is None or (size, digest) == (source.size, source.sha256):
        return None
    return (
        f"its sha256 is {digest} ({size} bytes), the pin is sha256 {source.sha256} "
        f"({source.size} bytes)"
    )


def check_bytes(stream: str, source: HubFile, path: Path, manifest: dict[str, Any] | None) -> LocalFile:
    """The file's identity, or :class:`DataError` giving both hashes when it is not
    the pinned file (or, unpinned, not the file recorded in ``manifest``)."""
    size, digest = size_and_sha256(path)
    mismatch = pin_mismatch(source, size, digest)
    if mismatch is not None:
        raise DataError(
            f"stream {stream!r}: {path} is not the pinned file of {source.where}: {mismatch}; "
            + fetch_advice(source, path)
        )
    if source.sha256 is not None:
        return LocalFile(path, size, digest, verified=True)
    if manifest is not None and (size, digest) != (manifest.get("size"), manifest.get("sha256")):
        raise DataError(
            f"stream {stream!r}: {path} changed since it was recorded (no pinned hash is known for "
            f"{source.where}): its sha256 is {digest} ({size} bytes), the recorded one is "
            f"{manifest.get('sha256')} ({manifest.get('size')} bytes); " + fetch_advice(source, path)
        )
    return LocalFile(path, size, digest, verified=False)


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = boundedread.read_json(path, limit=boundedread.CACHE_BYTES)
    except (OSError, ValueError, boundedread.UnreadableFile):
        return None
    return data if isinstance(data, dict) else None


def same_source(manifest: dict[str, Any], source: HubFile) -> bool:
    """Whether a manifest describes this pin's repository, revision and file."""
    return (manifest.get("repo_id"), manifest.get("revision"), manifest.get("filename")) == (
        source.repo_id,
        source.revision,
        source.filename,
    )


def write_manifest(source: HubFile, local: LocalFile, path: Path) -> None:
    manifest = {
        "repo_id": source.repo_id,
        "revision": source.revision,
        "filename": source.filename,
        "size": local.size,
        "sha256": local.sha256,
        "verified": local.verified,
    }
    write_manifest_file(path, manifest)
