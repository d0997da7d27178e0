"""Make each stream's upstream file present and verified in the data directory.

Layout of the data directory (one per machine or per repository)::

    <data_dir>/<stream>/<upstream path>            the file, byte for byte as upstream
    <data_dir>/<stream>/.evomemory-source.json     manifest: repo, revision, size, sha256
    <data_dir>/.locks/<stream>.lock                 filelock shared by concurrent runs
    <data_dir>/.tmp/                                downloads in progress

Why this shape: a download lands in ``.tmp`` (same file system), is hash-checked and
parsed, and only then moved into place with :func:`os.replace`, so a reader never
sees half a file. A file already in place is accepted only if its bytes pass
:func:`.integrity.check_bytes`; otherwise it is refused, naming both hashes. The one
file replaced without asking is our own download of an *older* pin (its manifest
names another revision), which is what moving a pin means. The lock serialises
xdist workers and parallel CI jobs that share a data directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...core.errors import DataError
from ..pinfile import MANIFEST_NAME, size_and_sha256
from .hub import HubAccess, HubUnreachable, describe_hub_error, download, hub_endpoint, hub_offline
from .integrity import (
    LocalFile,
    check_bytes,
    fetch_advice,
    pin_mismatch,
    read_manifest,
    same_source,
    write_manifest,
)
from .readers import Record, SourceFormatError, read_records
from .stream import HubStream

#: Overrides both the benchmark config's ``data_dir`` and the default location.
DATA_DIR_ENV = "EVOMEMORY_DATA_DIR"
#: Seconds to wait for another process that is materializing the same stream.
LOCK_TIMEOUT_S = 900.0


def default_data_dir() -> Path:
    """The per-user cache location used when neither config nor environment says."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pytest-evomemory" / "evomemory" / "single_turn"


def resolve_data_dir(configured: str | None, base_dir: Path) -> Path:
    """``$EVOMEMORY_DATA_DIR``, else the config's ``data_dir`` (absolute once loaded,
    :mod:`...config.paths`; in a config built in code, relative to ``base_dir``), else
    :func:`default_data_dir`."""
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser().resolve()
    if configured:
        path = Path(configured).expanduser()
        return (path if path.is_absolute() else base_dir / path).resolve()
    return default_data_dir()


def stream_file(stream: HubStream, data_dir: Path) -> Path:
    return data_dir / stream.name / stream.source.filename


def manifest_path(stream: HubStream, data_dir: Path) -> Path:
    return data_dir / stream.name / MANIFEST_NAME


def materialize(stream: HubStream, data_dir: Path, access: HubAccess | None = None) -> tuple[LocalFile, list[Record]]:
    """The verified local file of ``stream`` and its parsed records.

    Uses the file already present (no network at all) when its bytes pass the pin;
    downloads it when absent, unless the hub is offline or unreachable, in which
    case the error says which file is missing and where to put it. ``access``,
    shared by the streams of one load, probes the hub once (:class:`.hub.HubAccess`).
    """
    with _locked(stream, data_dir):
        present = check_present(stream, data_dir)
        if present is not None:
            return present
        target = stream_file(stream, data_dir)
        if hub_offline():
            raise DataError(
                f"stream {stream.name!r}: {target} is missing, and HF_HUB_OFFLINE is set so it cannot be "
                f"downloaded. Run `evomemory data fetch` once with network access (HF_HUB_OFFLINE unset), "
                f"or copy {stream.source.filename!r} of {stream.source.page_url} at revision "
                f"{stream.source.revision} to {target}"
            )
        access = access if access is not None else HubAccess()
        problem = access.check()
        if problem is not None:
            raise HubUnreachable(stream.name, target, problem)
        return _download(stream, data_dir, target, access)


def verify(stream: HubStream, data_dir: Path) -> tuple[LocalFile, list[Record]]:
    """Like :func:`materialize` but never downloads: a missing file is an error.

    Takes no lock (a read-only data directory, e.g. a CI cache, can be verified):
    files are only ever moved into place whole."""
    present = check_present(stream, data_dir)
    if present is None:
        target = stream_file(stream, data_dir)
        raise DataError(
            f"stream {stream.name!r}: {target} is missing (or is an older pin's download); "
            "run `evomemory data fetch` to download it"
        )
    return present


@contextmanager
def _locked(stream: HubStream, data_dir: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock_dir = data_dir / ".locks"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(
            f"stream {stream.name!r}: cannot create the data directory {data_dir} ({error.strerror}); "
            f"set {DATA_DIR_ENV} or 'data_dir' in the benchmark config to a writable directory"
        ) from None
    lock = FileLock(str(lock_dir / f"{stream.name}.lock"), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise DataError(
            f"stream {stream.name!r}: another process has held {lock.lock_file} for more than "
            f"{LOCK_TIMEOUT_S:.0f} s; if no other run is active, delete that file and retry"
        ) from None
    try:
        yield
    finally:
        lock.release()


def check_present(stream: HubStream, data_dir: Path) -> tuple[LocalFile, list[Record]] | None:
    """The file in place and its records; ``None`` if there is none (or only our own
    download of an older pin); :class:`DataError` if the file there is refused."""
    target = stream_file(stream, data_dir)
    if not target.is_file():
        return None
    manifest_file = manifest_path(stream, data_dir)
    manifest = read_manifest(manifest_file)
    if manifest is not None and not same_source(manifest, stream.source):
        return None
    local = check_bytes(stream.name, stream.source, target, manifest)
    try:
        records = _read(stream, target)
    except SourceFormatError as error:
        raise DataError(
            f"stream {stream.name!r}: {target} is unreadable ({error}); "
            + fetch_advice(stream.source, target)
        ) from None
    if manifest is None or manifest.get("verified") != local.verified:
        # A file copied in by hand (for an air-gapped machine): record what was adopted.
        write_manifest(stream.source, local, manifest_file)
    return local, records


def _read(stream: HubStream, path: Path) -> list[Record]:
    records = read_records(stream.source.format, path, stream.fields, stream.optional_fields)
    expected = stream.source.rows
    if expected is not None and len(records) != expected:
        # an unpinned file cut at a line boundary parses: only its length tells
        raise SourceFormatError(
            f"it holds {len(records)} records, the genuine file at revision {stream.source.revision[:12]} "
            f"holds {expected}"
        )
    return records


def _clear_stale_scratch(stream: HubStream, tmp_root: Path) -> None:
    """Remove what a killed download of this stream left in ``.tmp``: partial files are
    never read (each download gets a fresh folder), but would pile up. Safe under the
    stream's lock, which every download of the stream holds."""
    for leftover in tmp_root.glob(f"{stream.name}-*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)


def _download(stream: HubStream, data_dir: Path, target: Path, access: HubAccess) -> tuple[LocalFile, list[Record]]:
    source = stream.source
    tmp_root = data_dir / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    _clear_stale_scratch(stream, tmp_root)
    scratch = Path(tempfile.mkdtemp(prefix=f"{stream.name}-", dir=tmp_root))
    origin = f"the file downloaded from {hub_endpoint()} ({source.where})"
    try:
        try:
            downloaded = download(source, scratch)
        except Exception as error:
            access.lost(error)
            raise DataError(describe_hub_error(stream.name, source, error)) from None
        size, digest = size_and_sha256(downloaded)
        mismatch = pin_mismatch(source, size, digest)
        if mismatch is not None:
            raise DataError(
                f"stream {stream.name!r}: {origin} is not the pinned file: {mismatch}; it was not "
                "installed. If HF_ENDPOINT names a mirror, the mirror serves other bytes than upstream; "
                "otherwise the upstream file has changed: report it (the pin must not move silently)"
            )
        try:
            records = _read(stream, downloaded)
        except SourceFormatError as error:
            raise DataError(
                f"stream {stream.name!r}: {origin} is unusable: {error}. "
                "Retry; if it persists, the upstream file or a mirror set via HF_ENDPOINT is broken"
            ) from None
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(downloaded, target)
        local = LocalFile(target, size, digest, verified=source.pinned)
        write_manifest(source, local, manifest_path(stream, data_dir))
        return local, records
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
