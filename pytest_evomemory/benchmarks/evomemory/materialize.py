"""Make each stream's upstream file present, complete and verified in the data dir.

Layout of the data directory (one per machine or per repository)::

    <data_dir>/<stream>/<upstream path>            the file, byte for byte as upstream
    <data_dir>/<stream>/.evomemory-source.json     manifest: repo, revision, size, sha256
    <data_dir>/.locks/<stream>.lock                 filelock shared by concurrent runs
    <data_dir>/.tmp/                                downloads in progress

Why this shape: a download lands in ``.tmp`` (same file system), is parsed, and only
then moved into place with :func:`os.replace`, so a reader never sees half a file. The
manifest is written after the move; a file whose size or hash disagrees with it (or
that has no manifest and does not parse) is treated as absent and fetched again. The
lock serialises xdist workers and parallel CI jobs that share a data directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...errors import DataError
from .readers import Record, SourceFormatError, read_records
from .sources import SourceSpec

#: Overrides both the benchmark config's ``data_dir`` and the default location.
DATA_DIR_ENV = "EVOMEMORY_DATA_DIR"
MANIFEST_NAME = ".evomemory-source.json"
#: Seconds to wait for another process that is materializing the same stream.
LOCK_TIMEOUT_S = 900.0
_TRUE = {"1", "true", "yes", "on"}


def default_data_dir() -> Path:
    """The per-user cache location used when neither config nor environment says."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pytest-evomemory" / "evomemory" / "single_turn"


def resolve_data_dir(configured: str | None, base_dir: Path) -> Path:
    """``$EVOMEMORY_DATA_DIR``, else the config's ``data_dir`` (relative to the run
    config's directory, like every other path in a run), else :func:`default_data_dir`."""
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser().resolve()
    if configured:
        path = Path(configured).expanduser()
        return (path if path.is_absolute() else base_dir / path).resolve()
    return default_data_dir()


def hub_offline() -> bool:
    """Offline as huggingface_hub understands it, read now rather than at import time."""
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE or bool(constants.HF_HUB_OFFLINE)


def hub_endpoint() -> str:
    """The hub to download from; ``HF_ENDPOINT`` is re-read on every call so that a
    mirror (or a test's stand-in server) set after import is still honoured."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def stream_file(spec: SourceSpec, data_dir: Path) -> Path:
    return data_dir / spec.stream / spec.filename


def materialize(spec: SourceSpec, data_dir: Path) -> tuple[Path, list[Record]]:
    """The verified local file of ``spec`` and its parsed records.

    Uses the file already present when its manifest vouches for it (no network at
    all); otherwise downloads it, unless the hub is offline, in which case the
    error says which file is missing and where to put it.
    """
    from filelock import FileLock, Timeout

    target = stream_file(spec, data_dir)
    lock_dir = data_dir / ".locks"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(
            f"stream {spec.stream!r}: cannot create the data directory {data_dir} ({error.strerror}); "
            f"set {DATA_DIR_ENV} or 'data_dir' in the benchmark config to a writable directory"
        ) from None
    lock = FileLock(str(lock_dir / f"{spec.stream}.lock"), timeout=LOCK_TIMEOUT_S)
    try:
        with lock:
            return _materialize_locked(spec, data_dir, target)
    except Timeout:
        raise DataError(
            f"stream {spec.stream!r}: another process has held {lock.lock_file} for more than "
            f"{LOCK_TIMEOUT_S:.0f} s; if no other run is active, delete that file and retry"
        ) from None


def _materialize_locked(spec: SourceSpec, data_dir: Path, target: Path) -> tuple[Path, list[Record]]:
    problem = "is missing"
    if target.is_file():
        verdict = _check_present(spec, target, manifest_path(spec, data_dir))
        if isinstance(verdict, list):
            return target, verdict
        problem = verdict
    if hub_offline():
        raise DataError(
            f"stream {spec.stream!r}: {target} {problem}, and HF_HUB_OFFLINE is set so it cannot be "
            f"downloaded. Run once with network access (unset HF_HUB_OFFLINE), or copy "
            f"{spec.filename!r} of {spec.page_url} at revision {spec.revision} to {target}"
        )
    records = _download(spec, data_dir, target)
    return target, records


def _check_present(spec: SourceSpec, target: Path, manifest_file: Path) -> list[Record] | str:
    """Records of a trustworthy file already in place, or why it must be fetched again."""
    manifest = _read_manifest(manifest_file)
    if manifest is not None:
        if (manifest.get("repo_id"), manifest.get("revision"), manifest.get("filename")) != (
            spec.repo_id,
            spec.revision,
            spec.filename,
        ):
            return "is from another upstream revision"
        size, digest = _size_and_sha256(target)
        if size != manifest.get("size") or digest != manifest.get("sha256"):
            return "is partial or corrupt (its size or SHA-256 differs from the manifest)"
    try:
        records = read_records(spec, target)
    except SourceFormatError as error:
        return f"is partial or corrupt ({error})"
    if manifest is None:
        # A file copied in by hand (for an air-gapped machine): adopt it once it parses.
        _write_manifest(spec, target, manifest_file)
    return records


def _download(spec: SourceSpec, data_dir: Path, target: Path) -> list[Record]:
    from huggingface_hub import hf_hub_download

    tmp_root = data_dir / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{spec.stream}-", dir=tmp_root))
    try:
        try:
            downloaded = Path(
                hf_hub_download(
                    repo_id=spec.repo_id,
                    filename=spec.filename,
                    repo_type="dataset",
                    revision=spec.revision,
                    local_dir=scratch,
                    endpoint=hub_endpoint(),
                    token=os.environ.get("HF_TOKEN") or None,
                )
            )
        except Exception as error:
            raise DataError(describe_hub_error(spec, error)) from None
        try:
            records = read_records(spec, downloaded)
        except SourceFormatError as error:
            raise DataError(
                f"stream {spec.stream!r}: the file downloaded from {hub_endpoint()} "
                f"({spec.repo_id}@{spec.revision}:{spec.filename}) is unusable: {error}. "
                "Retry; if it persists, the upstream file or a mirror set via HF_ENDPOINT is broken"
            ) from None
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(downloaded, target)
        _write_manifest(spec, target, manifest_path(spec, data_dir))
        return records
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def describe_hub_error(spec: SourceSpec, error: BaseException) -> str:
    """One sentence on what went wrong with the hub and what the user must do."""
    from huggingface_hub import errors as hub_errors

    where = f"{spec.repo_id}@{spec.revision[:12]}:{spec.filename}"
    prefix = f"stream {spec.stream!r}: cannot download {where}"
    status = _status_code(error)
    has_token = bool(os.environ.get("HF_TOKEN"))
    if isinstance(error, hub_errors.GatedRepoError) or (spec.gated and status in {401, 403}):
        if has_token and status == 403:
            todo = (
                f"HF_TOKEN is set, but its account has not been granted access: sign in as that "
                f"account at {spec.page_url}, accept the dataset's conditions, wait for approval, "
                "and rerun (the token needs 'read' scope)"
            )
        else:
            todo = (
                f"it is a gated dataset: sign in at {spec.page_url} and accept its conditions, "
                "create a read token at https://huggingface.co/settings/tokens, then "
                "`export HF_TOKEN=hf_...` (or run `hf auth login`) and rerun"
            )
        return f"{prefix} (HTTP {status or 'auth'} error): {todo}"
    if isinstance(error, hub_errors.OfflineModeIsEnabled):
        return f"{prefix}: HF_HUB_OFFLINE is set; unset it for one run to download the file"
    if isinstance(error, hub_errors.RevisionNotFoundError):
        return f"{prefix}: revision {spec.revision} does not exist on {hub_endpoint()}; check HF_ENDPOINT"
    if isinstance(error, hub_errors.RemoteEntryNotFoundError | hub_errors.EntryNotFoundError) and status:
        return f"{prefix}: the file is not in that revision on {hub_endpoint()}; check HF_ENDPOINT"
    if isinstance(error, hub_errors.RepositoryNotFoundError) or status in {401, 403}:
        return (
            f"{prefix} (HTTP {status}): the repository is unknown or needs authentication; if you "
            "use a private mirror, set HF_TOKEN to a token that can read it"
        )
    if status:
        return f"{prefix}: the hub answered HTTP {status}; retry later"
    return (
        f"{prefix}: {hub_endpoint()} could not be reached ({type(error).__name__}: {error}). "
        "Check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 once the files are in the data dir"
    )


def _status_code(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _size_and_sha256(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def manifest_path(spec: SourceSpec, data_dir: Path) -> Path:
    return data_dir / spec.stream / MANIFEST_NAME


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_manifest(spec: SourceSpec, target: Path, path: Path) -> None:
    size, digest = _size_and_sha256(target)
    manifest = {
        "repo_id": spec.repo_id,
        "revision": spec.revision,
        "filename": spec.filename,
        "size": size,
        "sha256": digest,
    }
    handle, tmp = tempfile.mkstemp(prefix=".manifest-", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=2)
    os.replace(tmp, path)
