"""Put LoCoMo's pinned file in the data directory, verified, and read it.

The same rules as the Evo-Memory streams (:mod:`..evomemory.materialize`): a file
already in place is used without any network access when its bytes are the pinned
ones, and refused (naming both hashes) when they are not; a missing file is
downloaded into a scratch directory, checked against the pin, and only then moved
into place whole; a lock serialises xdist workers and parallel jobs that share a
data directory. The download is a plain HTTPS GET of the raw file at its commit
(:func:`.source.base_url`), so a mirror or a test's stand-in server on 127.0.0.1
serves it by setting ``EVOMEMORY_LOCOMO_URL``.
"""

from __future__ import annotations

import http.client
import io
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...core import boundedread
from ...core.errors import DataError
from ..pinfile import MANIFEST_NAME, size_and_sha256, write_manifest_file
from .schema import Conversation, read_samples, read_zip_member
from .source import BASE_URL_ENV, GitHubFile, SourceFormat, base_url

#: The same variable as the Evo-Memory streams' (one data directory for a machine).
DATA_DIR_ENV = "EVOMEMORY_DATA_DIR"
#: Seconds to wait for another process that is materializing the same file.
LOCK_TIMEOUT_S = 900.0
#: Seconds a download may stall before it is given up.
DOWNLOAD_TIMEOUT_S = 60.0
#: A download larger than this is refused before it fills the disk (the pinned
#: file is 0.6 MB; locomo10.json is under 3 MB).
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
_TRUE = {"1", "true", "yes", "on"}


def default_data_dir() -> Path:
    """The per-user cache location used when neither config nor environment says."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pytest-evomemory" / "locomo"


def resolve_data_dir(configured: str | None, base_dir: Path) -> Path:
    """``$EVOMEMORY_DATA_DIR``, else the config's ``data_dir`` (absolute once loaded,
    :mod:`...config.paths`; in a config built in code, relative to ``base_dir``), else
    :func:`default_data_dir` (as for the Evo-Memory streams)."""
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser().resolve()
    if configured:
        path = Path(configured).expanduser()
        return (path if path.is_absolute() else base_dir / path).resolve()
    return default_data_dir()


def offline() -> bool:
    """``EVOMEMORY_OFFLINE`` or ``HF_HUB_OFFLINE`` set: use only files already present."""
    return any(
        (os.environ.get(name) or "").strip().lower() in _TRUE for name in ("EVOMEMORY_OFFLINE", "HF_HUB_OFFLINE")
    )


def local_path(source: GitHubFile, data_dir: Path) -> Path:
    """``<data_dir>/locomo/<file path in the repository>``."""
    return data_dir / "locomo" / source.filename


def materialize(source: GitHubFile, data_dir: Path) -> tuple[Path, list[Conversation]]:
    """The verified local file and its conversations; downloads it when absent."""
    target = local_path(source, data_dir)
    with _locked(data_dir):
        if target.is_file() and _manifest_revision(target) in (None, source.revision):
            return target, _check_and_read(source, target)
        if offline():
            raise DataError(
                f"LoCoMo: {target} is missing, and EVOMEMORY_OFFLINE/HF_HUB_OFFLINE is set so it cannot be "
                f"downloaded; run once with network access, or copy {source.filename!r} of {source.page_url} "
                f"at commit {source.revision} to {target}"
            )
        return target, _download(source, data_dir, target)


def verify(source: GitHubFile, data_dir: Path) -> tuple[Path, list[Conversation]]:
    """Like :func:`materialize` but never downloads (``evomemory data verify``): a
    missing file is an error. Takes no lock: files are only ever moved into place whole."""
    target = local_path(source, data_dir)
    if not target.is_file() or _manifest_revision(target) not in (None, source.revision):
        raise DataError(
            f"LoCoMo: {target} is missing (or is an older pin's download); "
            "run `evomemory data fetch --benchmark locomo` to download it"
        )
    return target, _check_and_read(source, target)


def _check_and_read(source: GitHubFile, path: Path) -> list[Conversation]:
    size, digest = size_and_sha256(path)
    if (size, digest) != (source.size, source.sha256):
        raise DataError(
            f"LoCoMo: {path} is not the pinned file of {source.where}: its sha256 is {digest} ({size} bytes), "
            f"the pin is sha256 {source.sha256} ({source.size} bytes); delete it to download the genuine "
            f"file, or copy {source.filename!r} of {source.page_url} at commit {source.revision} there"
        )
    return read_conversations(source.format, read_data_file(path), str(path))


def read_data_file(path: Path) -> bytes:
    """The bytes of a LoCoMo file (the pinned one, the sample, a user's own): the
    bounded reader's, so a link to ``/dev/zero`` or a FIFO is one line, not a hang."""
    return boundedread.read_bytes(path, limit=MAX_DOWNLOAD_BYTES, what="a LoCoMo file", error=DataError)


def read_conversations(layout: SourceFormat, data: bytes, where: str) -> list[Conversation]:
    """The conversations of ``data`` in ``layout``, in upstream order (by name): the
    one reader of the pinned file, the bundled sample and a user's own file."""
    try:
        if layout == "locomo_json":
            return read_samples(boundedread.loads(data), where)
        return _read_zip(data, where)
    except zipfile.BadZipFile as error:
        raise DataError(f"{where}: unreadable ({type(error).__name__}: {error})") from None
    except boundedread.BoundExceeded as error:  # nesting, integer digits
        raise DataError(f"{where}: unreadable: {error}") from None
    except ValueError as error:  # not UTF-8, not JSON
        raise DataError(f"{where}: unreadable ({type(error).__name__}: {error})") from None


def _read_zip(data: bytes, where: str) -> list[Conversation]:
    conversations: list[Conversation] = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = sorted(
            (info for info in archive.infolist() if info.filename.endswith(".json") and not info.is_dir()),
            key=lambda info: _numeric_stem(info.filename),
        )
        for info in members:
            if info.file_size > MAX_DOWNLOAD_BYTES:
                raise DataError(f"{where}: member {info.filename} claims {info.file_size} bytes; refused")
            try:
                document = boundedread.loads(archive.read(info))
            except ValueError as error:
                raise DataError(f"{where}:{info.filename}: unreadable: {boundedread.json_problem(error)}") from None
            conversations.append(read_zip_member(f"{where}:{info.filename}", document))
    if not conversations:
        raise DataError(f"{where}: the archive holds no conversation file (*.json)")
    return conversations


def _numeric_stem(name: str) -> tuple[int, str]:
    stem = name.rsplit("/", 1)[-1].removesuffix(".json")
    return (int(stem), stem) if stem.isdigit() else (1 << 30, stem)


def _download(source: GitHubFile, data_dir: Path, target: Path) -> list[Conversation]:
    url = source.url(base_url())
    tmp_root = data_dir / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="locomo-", dir=tmp_root))
    try:
        downloaded = scratch / Path(source.filename).name
        _fetch(url, downloaded, source)
        size, digest = size_and_sha256(downloaded)
        if (size, digest) != (source.size, source.sha256):
            raise DataError(
                f"LoCoMo: the file downloaded from {url} is not the pinned file: its sha256 is {digest} "
                f"({size} bytes), the pin is sha256 {source.sha256} ({source.size} bytes); it was not "
                f"installed. If {BASE_URL_ENV} names a mirror, the mirror serves other bytes than upstream"
            )
        conversations = read_conversations(source.format, read_data_file(downloaded), url)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(downloaded, target)
        _write_manifest(source, target, size, digest)
        return conversations
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fetch(url: str, destination: Path, source: GitHubFile) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "pytest-evomemory"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response, destination.open("wb") as out:
            received = 0
            while chunk := response.read(1 << 16):
                received += len(chunk)
                if received > MAX_DOWNLOAD_BYTES:
                    raise DataError(f"LoCoMo: {url} sent more than {MAX_DOWNLOAD_BYTES} bytes; refused")
                out.write(chunk)
    except urllib.error.HTTPError as error:
        hint = (
            f"the file is not at that commit there; check {BASE_URL_ENV}" if error.code == 404 else "retry later"
        )
        raise DataError(f"LoCoMo: cannot download {source.where}: {url} answered HTTP {error.code}; {hint}") from None
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as error:
        # HTTPException: a server that does not speak HTTP (BadStatusLine), or cut
        # the body short of its Content-Length (IncompleteRead).
        reason = getattr(error, "reason", None) or f"{type(error).__name__}: {str(error).strip()[:120]}"
        raise DataError(
            f"LoCoMo: cannot download {source.where}: {url} could not be reached ({reason}); check the network "
            f"or {BASE_URL_ENV}, or copy the file by hand (docs/locomo.md)"
        ) from None


def _manifest_revision(target: Path) -> str | None:
    """The commit our own download of ``target`` came from (None: placed by hand)."""
    try:
        manifest = boundedread.read_json(target.parent / MANIFEST_NAME, limit=boundedread.CACHE_BYTES)
    except (OSError, ValueError, boundedread.UnreadableFile):
        return None
    revision = manifest.get("revision") if isinstance(manifest, dict) else None
    return revision if isinstance(revision, str) else None


def _write_manifest(source: GitHubFile, target: Path, size: int, digest: str) -> None:
    manifest = {
        "repo_id": source.repo_id, "revision": source.revision, "filename": source.filename,
        "size": size, "sha256": digest, "verified": True,
    }
    write_manifest_file(target.parent / MANIFEST_NAME, manifest)


@contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock_dir = data_dir / ".locks"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(
            f"LoCoMo: cannot create the data directory {data_dir} ({error.strerror}); set {DATA_DIR_ENV} or "
            "'data_dir' in the benchmark config to a writable directory"
        ) from None
    lock = FileLock(str(lock_dir / "locomo.lock"), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise DataError(
            f"LoCoMo: another process has held {lock.lock_file} for more than {LOCK_TIMEOUT_S:.0f} s; "
            "if no other run is active, delete that file and retry"
        ) from None
    try:
        yield
    finally:
        lock.release()


__all__ = [
    "default_data_dir", "local_path", "materialize", "offline", "read_conversations", "resolve_data_dir", "verify",
]
