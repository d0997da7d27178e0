"""Downloads from the Hugging Face Hub, and what to tell the user when one fails.

Only :func:`huggingface_hub.hf_hub_download` is used (never a loading script, never
``trust_remote_code``). ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN`` are read
at call time, not import time, so a mirror (or a test's stand-in server on
127.0.0.1) set after import is honoured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import DataError
from .sources import HubFile

_TRUE = {"1", "true", "yes", "on"}
#: Seconds the one probe of the hub may take to connect and answer: long enough
#: for a slow link, short against huggingface_hub's minute of retries per file.
PROBE_TIMEOUT_S = 8.0
#: What to do when the hub cannot be reached, said once.
OFFLINE_ADVICE = (
    "check the network or HF_ENDPOINT, or put the files in place by hand "
    "(`evomemory data where` lists where) and set HF_HUB_OFFLINE=1"
)


class HubUnreachable(DataError):
    """A stream's file is missing and the hub cannot be reached to download it."""

    def __init__(self, stream: str, target: Path, problem: str) -> None:
        self.stream, self.target, self.problem = stream, target, problem
        super().__init__(f"stream {stream!r}: {target} is missing and cannot be downloaded: {problem}; {OFFLINE_ADVICE}")

    @property
    def short(self) -> str:
        """The stream's part alone, for a message that gives the shared cause once."""
        return f"stream {self.stream!r}: {self.target} is missing"


@dataclass
class HubAccess:
    """Whether the hub can be reached: found out once per load with one short probe,
    then remembered, so that without a network no stream waits through
    huggingface_hub's retries (about half a minute per file) and the streams after
    a download that lost the connection are not tried either."""

    problem: str | None = None
    probed: bool = False

    def check(self) -> str | None:
        """``None`` when the hub answers; else what went wrong, in words."""
        if not self.probed:
            self.probed = True
            self.problem = self.problem or probe_hub()
        return self.problem

    def lost(self, error: BaseException) -> None:
        """A download failed: without an HTTP status, the connection is what failed."""
        if _status_code(error) is None and _is_transport_error(error):
            self.probed = True
            self.problem = transport_problem(error)


def probe_hub(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """One HEAD request to the hub's root through huggingface_hub's own HTTP session
    (its proxies and headers): any HTTP answer means reachable."""
    import httpx2
    from huggingface_hub import get_session

    endpoint = hub_endpoint()
    try:
        get_session().head(endpoint, timeout=httpx2.Timeout(timeout), follow_redirects=False)
    except httpx2.TransportError as error:
        return f"{endpoint} could not be reached within {timeout:g} s ({type(error).__name__}: {error})"
    return None


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and what it was raised from: huggingface_hub wraps the client's error
    (a server error on the file's HEAD request surfaces as "not in the local cache")."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _is_transport_error(error: BaseException) -> bool:
    import httpx2

    return any(isinstance(seen, httpx2.TransportError | ConnectionError | TimeoutError) for seen in _chain(error))


def transport_problem(error: BaseException) -> str:
    """What failed on the wire, in words: the hub not reached at all, or a download
    that broke off after the hub answered (a cut body, a dropped connection)."""
    import httpx2

    endpoint = hub_endpoint()
    cause = next((seen for seen in _chain(error) if isinstance(seen, httpx2.TransportError)), error)
    detail = f"{type(cause).__name__}: {cause}"
    if isinstance(cause, httpx2.TransportError) and not isinstance(
        cause, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.ProxyError
    ):
        return f"the download from {endpoint} broke off ({detail})"
    return f"{endpoint} could not be reached ({detail})"


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
    # the answer the hub gave, not huggingface_hub's wrapping of it (a 500 on the HEAD
    # request is raised as LocalEntryNotFoundError, an EntryNotFoundError)
    error = next((seen for seen in _chain(error) if _own_status(seen) is not None), error)
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
        return f"{prefix}: {hub_endpoint()} answered HTTP {status}; retry later"
    return (
        f"{prefix}: {transport_problem(error)}. "
        "Check the network or HF_ENDPOINT and retry, or set HF_HUB_OFFLINE=1 once the files are in the data dir"
    )


def _status_code(error: BaseException) -> int | None:
    """The HTTP status the hub answered, wherever in the chain of errors it is."""
    return next((code for code in map(_own_status, _chain(error)) if code is not None), None)


def _own_status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None
