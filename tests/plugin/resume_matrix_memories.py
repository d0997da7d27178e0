"""Third-party memories for the resume matrix (tests/plugin/test_resume_matrix.py).

Each is a small keyword notebook, differing only in what resume has to get right:

* ``renamed``: its tools are ``note(text)`` and ``lookup(about)``, roles declared
  with ``MemoryTool`` (a resume that replays writes through ``retain`` would find none);
* ``forgetful``: ``retain``/``recall`` plus ``forget(id)`` (a forgotten record
  must not come back after resume);
* ``nosnap``: the same as ``forgetful`` without ``snapshot``/``restore`` (resume
  of a partly run stream must be refused).

The snapshot-capable ones save their whole state, id counter included, as one
JSON file written atomically.
"""

from __future__ import annotations

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
from pytest_evomemory.memory.snapshot import write_atomically
from pytest_evomemory.memory.tools import MemoryRole, MemoryTool

_WORD = re.compile(r"[^\W_]{3,}")


def _spec(name: str, argument: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"{name} ({argument})",
        parameters={
            "type": "object",
            "properties": {argument: {"type": "string"}},
            "required": [argument],
            "additionalProperties": False,
        },
    )


class Notebook:
    """Records ranked by shared keywords, newest first on a tie; no snapshots."""

    #: (tool name, argument, role) of the tools this notebook declares
    TOOLS: tuple[tuple[str, str, MemoryRole], ...] = (
        ("retain", "content", "retain"),
        ("recall", "query", "recall"),
        ("forget", "id", "forget"),
    )

    def __init__(self, default_top_k: int = 4) -> None:
        self.default_top_k = default_top_k
        self._records: dict[str, str] = {}
        self._next = 1
        self._closed = False

    def retain(self, content: str, metadata: Mapping[str, Any] | None = None) -> str:
        self._check_open()
        record_id = f"n{self._next}"
        self._next += 1
        self._records[record_id] = content
        return record_id

    def recall(self, query: str, top_k: int | None = None) -> list[MemoryHit]:
        self._check_open()
        wanted = set(_WORD.findall(query.casefold()))
        votes: Counter[str] = Counter()
        for record_id, content in self._records.items():
            shared = len(wanted & set(_WORD.findall(content.casefold())))
            if shared:
                votes[record_id] = shared
        ranked = sorted(votes.items(), key=lambda item: (-item[1], -int(item[0][1:])))
        limit = self.default_top_k if top_k is None else top_k
        return [MemoryHit(rid, self._records[rid], float(n), {}) for rid, n in ranked[:limit]]

    def forget(self, record_id: str) -> bool:
        self._check_open()
        return self._records.pop(record_id, None) is not None

    def reset(self) -> None:
        self._check_open()
        self._records.clear()

    def close(self) -> None:
        self._closed = True
        self._records.clear()

    def tools(self) -> Sequence[Tool]:
        handlers = {"retain": self._retain_tool, "recall": self._recall_tool, "forget": self._forget_tool}
        made = []
        for name, argument, role in self.TOOLS:
            handler = handlers[role]
            made.append(MemoryTool(_spec(name, argument), _bound(handler, argument), role))
        return made

    def _retain_tool(self, arguments: Mapping[str, Any], argument: str) -> str:
        return json.dumps({"id": self.retain(require_string(arguments, argument, "retain"))})

    def _recall_tool(self, arguments: Mapping[str, Any], argument: str) -> str:
        hits = self.recall(require_string(arguments, argument, "recall"))
        return json.dumps([{"id": hit.record_id, "content": hit.content} for hit in hits])

    def _forget_tool(self, arguments: Mapping[str, Any], argument: str) -> str:
        record_id = require_string(arguments, argument, "forget")
        if not self.forget(record_id):
            raise ToolArgumentError(f"forget: there is no record {record_id!r}")
        return json.dumps({"forgotten": record_id})

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryBackendError("the notebook was closed at stream teardown")


def _bound(handler: Any, argument: str) -> Any:
    return lambda arguments: handler(arguments, argument)


class SnapshotNotebook(Notebook):
    """A notebook that can be resumed: its whole state in one JSON file."""

    def snapshot(self, directory: Path) -> None:
        self._check_open()
        write_atomically(directory / "notebook.json", json.dumps({"next": self._next, "records": self._records}))

    def restore(self, directory: Path) -> None:
        self._check_open()
        state = json.loads((directory / "notebook.json").read_text(encoding="utf-8"))
        self._records = dict(state["records"])
        self._next = int(state["next"])


class RenamedNotebook(SnapshotNotebook):
    TOOLS = (("note", "text", "retain"), ("lookup", "about", "recall"))


def renamed(config: MemoryConfig, context: MemoryContext) -> Notebook:
    return RenamedNotebook(config.top_k)


def forgetful(config: MemoryConfig, context: MemoryContext) -> Notebook:
    return SnapshotNotebook(config.top_k)


def nosnap(config: MemoryConfig, context: MemoryContext) -> Notebook:
    return Notebook(config.top_k)
