"""A realistic third-party memory: consolidates, forgets, names its own tools, resumes.

It behaves the way mem0-, A-Mem- or LangMem-like systems do, in a few dozen lines:

* **Consolidation.** A fact of the form "<subject> is <value>" that contradicts an
  earlier fact about the same subject is merged with it after the write: both
  records are replaced by one *derived* record with a new id ("... is 8:00
  (earlier: 7:15)"). The id that ``retain`` returned no longer exists, and
  ``recall`` returns an id ``retain`` never handed out.
* **Forgetting.** ``forget(id)`` deletes a record; the agent reaches it through
  the memory's own ``forget`` tool.
* **Its own tool names.** The model sees ``remember``/``search``/``forget``;
  each is a :class:`~pytest_evomemory.memory.tools.MemoryTool` with its role,
  so the runtime counts and checks them without knowing the names.
* **Resume.** ``snapshot``/``restore`` save and load the whole state (one JSON
  file, replaced atomically), so an interrupted run continues with exactly this
  memory — derived records, forgotten records and the id counter included.

A run config selects it with ``backend: tests.memory.consolidating_adapter:create``.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.core.tools import Tool, ToolArgumentError, require_string
from pytest_evomemory.core.types import MemoryHit, ToolSpec
from pytest_evomemory.memory.factory import MemoryContext
from pytest_evomemory.memory.tools import MemoryTool
from pytest_evomemory.util.atomicfile import write_atomically

_WORD = re.compile(r"[^\W_]{3,}")
_FACT = re.compile(r"(?P<subject>[^\n]{3,80}?) is (?P<value>[^\n]+?)\.?", re.IGNORECASE)


class FactMemory:
    """Facts ranked by shared keywords (newest first on a tie), consolidated by subject."""

    def __init__(self, default_top_k: int = 4) -> None:
        self.default_top_k = default_top_k
        self._facts: dict[str, tuple[str, dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._next = 1
        self._closed = False

    # ------------------------------------------------------------------ protocol

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        record_id = self._store(content, dict(metadata or {}))
        self._consolidate(record_id)
        return record_id

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        wanted = set(_WORD.findall(query.casefold()))
        votes: Counter[str] = Counter()
        for record_id, (content, _) in self._facts.items():
            shared = len(wanted & set(_WORD.findall(content.casefold())))
            if shared:
                votes[record_id] = shared
        ranked = sorted(votes.items(), key=lambda item: (-item[1], -_number(item[0])))
        limit = self.default_top_k if top_k is None else top_k
        return [
            MemoryHit(record_id, self._facts[record_id][0], float(count), self._facts[record_id][1])
            for record_id, count in ranked[:limit]
        ]

    def forget(self, record_id: str) -> bool:
        """Delete a record; False if there is no such record."""
        self._check_open()
        return self._facts.pop(record_id, None) is not None

    def reset(self) -> None:
        self._check_open()
        self._facts.clear()

    def close(self) -> None:
        self._closed = True
        self._facts.clear()

    def tools(self) -> Sequence[Tool]:
        return [
            MemoryTool(_REMEMBER, self._remember_tool, "retain"),
            MemoryTool(_SEARCH, self._search_tool, "recall"),
            MemoryTool(_FORGET, self._forget_tool, "forget"),
        ]

    # ------------------------------------------------------------------ resume

    def snapshot(self, directory: Path) -> None:
        self._check_open()
        state = {"next": self._next, "facts": [[key, *value] for key, value in self._facts.items()]}
        write_atomically(directory / "facts.json", json.dumps(state, ensure_ascii=True))

    def restore(self, directory: Path) -> None:
        self._check_open()
        state = json.loads((directory / "facts.json").read_text(encoding="utf-8"))
        self._facts = {key: (content, metadata) for key, content, metadata in state["facts"]}
        self._next = int(state["next"])
        self._ids = itertools.count(self._next)

    # ------------------------------------------------------------------ internals

    def _store(self, content: str, metadata: dict[str, Any]) -> str:
        number = next(self._ids)
        self._next = number + 1
        record_id = f"fact-{number}"
        self._facts[record_id] = (content, metadata)
        return record_id

    def _consolidate(self, newest: str) -> None:
        """Merge ``newest`` with an earlier fact about the same subject, if any."""
        match = _FACT.fullmatch(self._facts[newest][0].strip())
        if match is None:
            return
        subject = match["subject"].casefold()
        for record_id, (content, _metadata) in list(self._facts.items()):
            earlier = _FACT.fullmatch(content.strip()) if record_id != newest else None
            if earlier is None or earlier["subject"].casefold() != subject or earlier["value"] == match["value"]:
                continue
            new_metadata = self._facts[newest][1]
            del self._facts[record_id], self._facts[newest]
            merged = f"{match['subject']} is {match['value']} (earlier: {earlier['value']})"
            self._store(merged, {**new_metadata, "merged_from": [record_id, newest]})
            return

    def _remember_tool(self, arguments: Mapping[str, Any]) -> str:
        return json.dumps({"remembered": self.retain(require_string(arguments, "text", "remember"))})

    def _search_tool(self, arguments: Mapping[str, Any]) -> str:
        hits = self.recall(require_string(arguments, "question", "search"))
        return json.dumps([{"id": hit.record_id, "content": hit.content} for hit in hits], ensure_ascii=False)

    def _forget_tool(self, arguments: Mapping[str, Any]) -> str:
        record_id = require_string(arguments, "id", "forget")
        if not self.forget(record_id):
            raise ToolArgumentError(f"forget: there is no memory {record_id!r}")
        return json.dumps({"forgotten": record_id})

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError("the fact memory was closed at stream teardown")


def _number(record_id: str) -> int:
    return int(record_id.rsplit("-", 1)[1])


def _spec(name: str, description: str, argument: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {argument: {"type": "string"}},
            "required": [argument],
            "additionalProperties": False,
        },
    )


_REMEMBER = _spec("remember", "Remember a fact for later tasks.", "text")
_SEARCH = _spec("search", "Search remembered facts; each result has an id.", "question")
_FORGET = _spec("forget", "Forget a remembered fact that turned out wrong, by its id.", "id")


def create(config: MemoryConfig, context: MemoryContext) -> FactMemory:
    """The factory a run config names (``module:create``): one memory per stream."""
    return FactMemory(default_top_k=config.top_k)
