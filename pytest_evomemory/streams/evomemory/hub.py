"""Downloads from the Hugging Face Hub, and what to tell the user when one fails.

Only :func:`huggingface_hub.hf_hub_download` is used (never a loading script, never
``trust_remote_code``). ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN`` are read
at call time, not import time, so a mirror (or a test's stand-in server on
127.0.0.1) set after import is honoured.
"""

from __future__ import annotations

import os
from pathlib import Path

from .sources import HubFile

_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """Offline as huggingface_hub understands it, read now rather than at import time."""
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE or bool(constants.HF_HUB_OFFLINE)


def hub_endpoint() -> str:
    """The hub to download from (``HF_ENDPOINT``, else huggingface_hub's default)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def download(source: HubFile, directory: Path) -> Path:
    """Download ``source`` into ``directory``; huggingface_hub's exceptions pass through
    (see :func:`describe_hub_error`)."""
    from huggingface_hub import hf_hub_download

    return Path(
        hf_hub_download(
            repo_id=source.repo_id,
            filename=source.filename,
            repo_type="dataset",
            revision=source.revision,
            local_dir=directory,
            endpoint=hub_endpoint(),
            token=os.environ.get("HF_TOKEN") or None,
        )
    )


def describe_hub_error(stream: str, source: HubFile, error: BaseException) -> str:
    """One sentence on what went wrong with the hub and what the user must do."""
    from huggingface_hub import errors as hub_errors

    prefix = f"stream {stream!r}: cannot download {source.where}"
    status = _status_code(error)
    has_token = bool(os.environ.get("HF_TOKEN"))
    if isinstance(error, hub_errors.GatedRepoError) or (source.gated and status in {401, 403}):
        if has_token and status == 403:
            todo = (
                f"HF_TOKEN is set, but its account has not been granted access: sign in as that "
                f"account at {source.page_url}, accept the dataset's conditions, wait for approval, "
                "and rerun (the token needs 'read' scope)"
            )
        else:
            todo = (
                f"it is a gated dataset: sign in at {source.page_url} and accept its conditions, "
                "create a read token at https://huggingface.co/settings/tokens, then "
                "`export HF_TOKEN=hf_...` (or run `hf auth login`) and rerun"
            )
        return f"{prefix} (HTTP {status or 'auth'} error): {todo}"
    if isinstance(error, hub_errors.OfflineModeIsEnabled):
        return f"{prefix}: HF_HUB_OFFLINE is set; unset it for one run to download the file"
    if isinstance(error, hub_errors.RevisionNotFoundError):
        return f"{prefix}: revision {source.revision} does not exist on {hub_endpoint()}; check HF_ENDPOINT"
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
