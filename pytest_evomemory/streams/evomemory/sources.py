"""Where a stream's data comes from: one upstream file, pinned by commit and by hash.

The paper (arXiv:2511.20857) released no data of its own, so every stream is read
from the public dataset it names, at a fixed revision. A revision alone does not pin
the bytes a run reads (a hand-placed file, or a mirror set via ``HF_ENDPOINT``, can
hold anything), so a pin also carries the file's size and SHA-256 where they have
been verified against the genuine upstream file. Changing a pin is a deliberate,
documented act (see docs/streams.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

#: How a source file is encoded, exactly as the upstream repository stores it.
SourceFormat = Literal["parquet", "csv", "jsonl"]

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class HubFile:
    """One file of a Hugging Face dataset repository at one commit."""

    repo_id: str
    #: A full 40-hex commit id, never a branch: the data must not move under us.
    revision: str
    #: Path of the file inside the dataset repository.
    filename: str
    format: SourceFormat
    #: Size and SHA-256 of the genuine upstream file, where they have been verified;
    #: ``None`` means "not known": the file's hash is then recorded, not checked.
    size: int | None = None
    sha256: str | None = None
    #: How many records the genuine file holds, where verified. Without a pinned hash
    #: it is what tells a file cut at a line boundary (it still parses) from the whole
    #: one; ``None``: not known.
    rows: int | None = None
    #: Gated sets need an accepted licence on the hub and a token (``HF_TOKEN``).
    gated: bool = False
    license: str = ""

    def __post_init__(self) -> None:
        # A typo in a pin would refuse every genuine file; catch it at import time.
        if not _COMMIT.fullmatch(self.revision):
            raise ValueError(f"{self.repo_id}: revision {self.revision!r} is not a 40-hex commit id")
        if self.sha256 is not None and not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"{self.repo_id}: sha256 {self.sha256!r} is not 64 lower-case hex digits")
        if self.rows is not None and self.rows < 1:
            raise ValueError(f"{self.repo_id}: rows must be a positive count, got {self.rows}")
        if (self.sha256 is None) != (self.size is None):
            raise ValueError(f"{self.repo_id}: a pin needs both size and sha256, or neither")

    @property
    def pinned(self) -> bool:
        """Whether the bytes themselves are pinned (not only the revision)."""
        return self.sha256 is not None

    @property
    def page_url(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo_id}"

    @property
    def where(self) -> str:
        """``repo@revision:file``, short enough for one line of an error."""
        return f"{self.repo_id}@{self.revision[:12]}:{self.filename}"
