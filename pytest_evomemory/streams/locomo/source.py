"""Where LoCoMo's data comes from: one file of snap-research/locomo at one commit.

The repository keeps no release and no hub copy, so the file is read from the
repository itself, as raw bytes at a fixed commit, and pinned by size and SHA-256
(the values below were computed from the genuine file at that commit). The
commit's README documents the data (10 conversations, 1,986 questions); the
repository holds no licence file, and the dataset card of its first author
declares CC BY-NC 4.0: the data is never shipped with this package, only
downloaded on first use. Moving the pin is a deliberate, documented act
(docs/locomo.md).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from ...config import http_url_problem
from ...core.errors import DataError

#: Overrides the host raw files are read from (a mirror, or a test's stand-in on
#: 127.0.0.1). Files are fetched as ``<base>/<owner>/<repo>/<commit>/<path>``,
#: the layout of raw.githubusercontent.com.
BASE_URL_ENV = "EVOMEMORY_LOCOMO_URL"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"

#: ``locomo_zip``: the per-conversation files of ``data/locomo10.zip``;
#: ``locomo_json``: the README's list of samples (``data/locomo10.json``).
SourceFormat = Literal["locomo_zip", "locomo_json"]

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class GitHubFile:
    """One file of a public GitHub repository at one commit, pinned by its bytes."""

    repo_id: str
    revision: str
    filename: str
    format: SourceFormat
    size: int
    sha256: str
    license: str

    def __post_init__(self) -> None:
        if not _COMMIT.fullmatch(self.revision):
            raise ValueError(f"{self.repo_id}: revision {self.revision!r} is not a 40-hex commit id")
        if not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"{self.repo_id}: sha256 {self.sha256!r} is not 64 lower-case hex digits")

    @property
    def page_url(self) -> str:
        return f"https://github.com/{self.repo_id}"

    @property
    def where(self) -> str:
        """``repo@revision:file``, short enough for one line of an error."""
        return f"{self.repo_id}@{self.revision[:12]}:{self.filename}"

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.repo_id}/{self.revision}/{self.filename}"


#: ``benchmark: locomo``: the ten conversations (1,986 questions), as the
#: repository's ``data/locomo10.zip`` holds them at the commit that added it
#: ("Added data and updated Readme", 2024-08-02; the same blob is on the ``code``
#: branch, commit 92286325, whose task_eval/evaluation.py ``locomo_f1`` reproduces).
LOCOMO10 = GitHubFile(
    repo_id="snap-research/locomo",
    revision="e76cdff4a04fce19090596d49862fe87a5c15aaa",
    filename="data/locomo10.zip",
    format="locomo_zip",
    size=626_797,
    sha256="5c342973da4b45c12583c9fc7594d6410880f5aba2c491a0db09db262c906fb5",
    license="CC BY-NC 4.0 (per the first author's dataset card; the repository has no licence file)",
)


def base_url() -> str:
    """``$EVOMEMORY_LOCOMO_URL``, else raw.githubusercontent.com; read at call time."""
    value = (os.environ.get(BASE_URL_ENV) or "").strip() or DEFAULT_BASE_URL
    problem = http_url_problem(value)
    if problem is not None:
        raise DataError(f"{BASE_URL_ENV}: {problem.replace('the API root', 'the mirror root')}")
    return value.rstrip("/")


__all__ = ["BASE_URL_ENV", "DEFAULT_BASE_URL", "LOCOMO10", "GitHubFile", "SourceFormat", "base_url"]
