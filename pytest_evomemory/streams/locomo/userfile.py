"""A user's own file in LoCoMo's format (``benchmark: locomo`` with ``path:``).

A translated or extended LoCoMo, or one's own conversations: the file is read as it
is (no download, no pin), through the reader the pinned file goes through
(:func:`.materialize.read_conversations`), so a refusal names the user's file, the
conversation and the question. Its bytes are recorded (path, size, SHA-256) as a
local file's are, which is what a resume compares (:mod:`...runtime.run`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import STREAM_NAME
from ...core.errors import ConfigError, DataError
from ...core.validation import path_problem
from ..pinfile import size_and_sha256
from .materialize import MAX_DOWNLOAD_BYTES, read_conversations, read_data_file
from .schema import Conversation
from .source import SourceFormat

#: The layouts LoCoMo's repository uses, by the file's suffix: the README's list of
#: samples (``locomo10.json``) and the per-conversation files of ``locomo10.zip``.
LAYOUTS: dict[str, SourceFormat] = {".json": "locomo_json", ".zip": "locomo_zip"}


@dataclass(frozen=True)
class UserFile:
    """The file read, its conversations, and what run.json records about its bytes."""

    path: Path
    conversations: tuple[Conversation, ...]
    size: int
    sha256: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(conversation.sample_id for conversation in self.conversations)

    def provenance(self) -> dict[str, Any]:
        """A local file: no repository, no pin; its hash so runs can be compared."""
        return {
            "repository": None, "revision": None, "file": str(self.path), "path": str(self.path),
            "size": self.size, "sha256": self.sha256, "pinned": False, "verified": False,
            "license": None,
        }


def read_user_file(path: Path) -> UserFile:
    """Read ``path`` (already absolute: :func:`...streams.load_benchmark` resolves it
    against the config) in the layout its suffix names; every problem names it."""
    layout = LAYOUTS.get(path.suffix.lower())
    if layout is None:
        raise ConfigError(
            f"key 'path': {path} is neither .json (LoCoMo's list of samples, as locomo10.json) nor .zip "
            "(one JSON file per conversation, as locomo10.zip); name a file in one of those layouts", key="path",
        )
    problem = path_problem(path)
    if problem is not None:
        hint = "; check 'path' (relative to the benchmark config)" if problem == "does not exist" else ""
        raise DataError(f"LoCoMo file {path} {problem}{hint}")
    if path.stat().st_size > MAX_DOWNLOAD_BYTES:
        raise DataError(f"LoCoMo file {path} is larger than {MAX_DOWNLOAD_BYTES // (1 << 20)} MiB; refused")
    size, digest = size_and_sha256(path)
    conversations = read_conversations(layout, read_data_file(path), str(path))
    for conversation in conversations:
        # each becomes a stream, whose name is a directory of the run
        if not re.fullmatch(STREAM_NAME, conversation.sample_id) or len(conversation.sample_id) > 100:
            raise DataError(
                f"{path}: sample_id {conversation.sample_id!r} cannot name a stream; use letters, digits, '_', "
                "'.' and '-' (starting with a letter or digit, at most 100), e.g. conv-26"
            )
    return UserFile(path, tuple(conversations), size, digest)


__all__ = ["LAYOUTS", "UserFile", "read_user_file"]
