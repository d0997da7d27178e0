"""LoCoMo (Maharana et al., ACL 2024): static memory over very long conversations.

``benchmark: locomo`` reads the ten conversations of snap-research/locomo from
the pinned upstream file (:mod:`.source`, downloaded and verified on first use by
:mod:`.materialize`); ``benchmark: locomo_sample`` reads two small conversations
written for this package in the same schema, offline; ``benchmark: locomo`` with
``path:`` reads the user's own file in that schema as it is (:mod:`.userfile`),
through the same reader. Each conversation is one
stream (``conv-26``, ...): its sessions are ingested first (by the memory system or
by the agent, ``ingest``), then its questions are asked with no feedback, scored
with LoCoMo's own F1 (``locomo_f1``). See docs/locomo.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...config import BenchmarkConfig
from ...core.errors import ConfigError, DataError
from ..base import Stream
from ..pinfile import size_and_sha256
from .convert import to_stream
from .materialize import materialize, read_conversations, read_data_file, resolve_data_dir
from .schema import Conversation
from .source import LOCOMO10, GitHubFile, base_url
from .userfile import UserFile, read_user_file

#: The conversations of the pinned file, in upstream order: known before any
#: download, so a stream selection is checked before the network is used.
LOCOMO10_CONVERSATIONS: tuple[str, ...] = (
    "conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49", "conv-50",
)

SAMPLE_FILE = Path(__file__).parent / "sample.json"
SAMPLE_CONVERSATIONS: tuple[str, ...] = ("conv-sample-1", "conv-sample-2")
SAMPLE_LICENSE = "written for pytest-evomemory (Apache-2.0); invented people and events, no LoCoMo content"


class LocomoBenchmark:
    """``benchmark: locomo``: the pinned upstream conversations, or, when the config
    gives ``path``, the user's own file in their format (decided here, in :meth:`_user_file`)."""

    def __init__(self, source: GitHubFile = LOCOMO10, names: Sequence[str] = LOCOMO10_CONVERSATIONS) -> None:
        self.source = source
        self.names = tuple(names)
        self._read: dict[Path, UserFile] = {}

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        user_file = self._user_file(config)
        return self.names if user_file is None else user_file.names

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        user_file = self._user_file(config)
        if user_file is not None:
            return _streams(user_file.conversations, names, config, user_file.provenance(), user_file.path.name,
                            str(user_file.path), user_file.names)
        data_dir = resolve_data_dir(config.data_dir, base_dir)
        path, conversations = materialize(self.source, data_dir)
        provenance: dict[str, Any] = {
            "repository": self.source.repo_id,
            "revision": self.source.revision,
            "file": self.source.filename,
            "url": self.source.url(base_url()),
            "path": str(path),
            "size": self.source.size,
            "sha256": self.source.sha256,
            "pinned": True,
            "verified": True,
            "license": self.source.license,
        }
        return _streams(conversations, names, config, provenance, self.source.repo_id, str(path), self.names)

    def _user_file(self, config: BenchmarkConfig) -> UserFile | None:
        """The user's file when ``path`` names one (read once per load), else None
        (the pinned file). ``path`` is absolute here: :func:`..load_benchmark` made it so."""
        if config.path is None:
            return None
        if config.data_dir is not None:
            raise ConfigError(
                "key 'data_dir': a LoCoMo file given by 'path' is read where it is, never downloaded; "
                "remove 'data_dir' (or 'path', to run the pinned upstream file)", key="data_dir",
            )
        path = Path(config.path)
        if path not in self._read:
            self._read[path] = read_user_file(path)
        return self._read[path]


class LocomoSampleBenchmark:
    """``benchmark: locomo_sample``: two small authored conversations, offline."""

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return SAMPLE_CONVERSATIONS

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        conversations = read_file(SAMPLE_FILE)
        size, digest = size_and_sha256(SAMPLE_FILE)
        provenance = {"file": str(SAMPLE_FILE), "size": size, "sha256": digest, "license": SAMPLE_LICENSE}
        return _streams(conversations, names, config, provenance, "pytest-evomemory", str(SAMPLE_FILE),
                        SAMPLE_CONVERSATIONS)


def read_file(path: Path) -> list[Conversation]:
    """Conversations from a JSON file in the README layout (a list of samples)."""
    try:
        data = read_data_file(path)
    except OSError as error:
        raise DataError(f"{path}: unreadable ({type(error).__name__}: {error})") from None
    return read_conversations("locomo_json", data, str(path))


def _streams(
    conversations: Sequence[Conversation],
    names: Sequence[str],
    config: BenchmarkConfig,
    provenance: dict[str, Any],
    source: str,
    where: str,
    expected: Sequence[str],
) -> list[Stream]:
    by_name = {conversation.sample_id: conversation for conversation in conversations}
    if set(by_name) != set(expected):
        raise DataError(
            f"LoCoMo: {where} holds the conversations {sorted(by_name)}, not the expected {sorted(expected)}; "
            "the file is not the one this benchmark reads"
        )
    return [
        to_stream(by_name[name], seed=config.seed, limit=config.limit, ingest=config.ingest,
                  provenance=provenance, source=source)
        for name in names
    ]


__all__ = [
    "LOCOMO10_CONVERSATIONS",
    "SAMPLE_CONVERSATIONS",
    "LocomoBenchmark",
    "LocomoSampleBenchmark",
    "read_file",
]
