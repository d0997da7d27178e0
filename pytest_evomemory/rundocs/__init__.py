"""The run directory's documents, declared once as pydantic models.

Everything a run writes (a line of scores.jsonl, responses.jsonl, a transcript or
events.jsonl, summary.json, run.json, arms.json, the shard plan in run.json) is a
model here, as inspect_ai declares its log (``EvalLog``, ``EvalSample``,
``EvalResults`` in ``log/_log.py``): the writer (:class:`..rundir.RunWriter`)
writes ``model_dump()`` of it, every reader (report, compare, table, merge, resume)
validates the file back into the model and reads attributes, and the shipped JSON
Schema (``schema/artefacts.schema.json``) is generated from these classes
(``python -m pytest_evomemory.schema``).

Why a package of its own, at the bottom of the import graph: the runtime (records,
the collector, merge, resume), the reporting (summary, pages, comparisons) and the
run directory's code all read or write these documents, so the documents may import
none of them. They import pydantic, :mod:`..util.text` and :mod:`..options` (a gain gate's
requirements) only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import DAMAGED_ADVICE, SCHEMA_VERSION, DamagedDocument, RunDoc, problem_line, read
    from .identity import AgentIdentity, MemoryIdentity, ModelIdentity, Replicate, StreamRan, Versions
    from .records import (
        Failure,
        Refusal,
        Response,
        Score,
        SkippedFeedback,
        StreamStarted,
        ToolCallDoc,
        TranscriptEntry,
        Usage,
        WriteFailure,
    )
    from .run import (
        ARMS_SCHEMA_VERSION,
        ArmEntryDoc,
        ArmsFile,
        ConfiguredRun,
        MergedRecord,
        Resumed,
        RunFile,
        ShardRecord,
        ShardThresholds,
        StreamEntry,
        StreamMinimum,
        StreamOrder,
    )
    from .summary import (
        Categories,
        CategoryRow,
        Completion,
        GroupSummary,
        Headline,
        PerStimulus,
        StreamSummary,
        Summary,
        SummaryFile,
        Threshold,
    )

#: The module that declares each name, imported at the name's first use: an xdist
#: worker and every process's start-up import only the documents they use (not
#: summary.json's models, which a run needs at its end).
_HOMES: dict[str, str] = {
    "DAMAGED_ADVICE": "base",
    "SCHEMA_VERSION": "base",
    "DamagedDocument": "base",
    "RunDoc": "base",
    "problem_line": "base",
    "read": "base",
    "AgentIdentity": "identity",
    "MemoryIdentity": "identity",
    "ModelIdentity": "identity",
    "Replicate": "identity",
    "StreamRan": "identity",
    "Versions": "identity",
    "Failure": "records",
    "Refusal": "records",
    "Response": "records",
    "Score": "records",
    "SkippedFeedback": "records",
    "StreamStarted": "records",
    "ToolCallDoc": "records",
    "TranscriptEntry": "records",
    "Usage": "records",
    "WriteFailure": "records",
    "ARMS_SCHEMA_VERSION": "run",
    "ArmEntryDoc": "run",
    "ArmsFile": "run",
    "ConfiguredRun": "run",
    "MergedRecord": "run",
    "Resumed": "run",
    "RunFile": "run",
    "ShardRecord": "run",
    "ShardThresholds": "run",
    "StreamEntry": "run",
    "StreamMinimum": "run",
    "StreamOrder": "run",
    "Categories": "summary",
    "CategoryRow": "summary",
    "Completion": "summary",
    "GroupSummary": "summary",
    "Headline": "summary",
    "PerStimulus": "summary",
    "StreamSummary": "summary",
    "Summary": "summary",
    "SummaryFile": "summary",
    "Threshold": "summary",
}

__all__ = [
    "ARMS_SCHEMA_VERSION", "DAMAGED_ADVICE", "SCHEMA_VERSION", "AgentIdentity", "ArmEntryDoc", "ArmsFile",
    "Categories", "CategoryRow", "Completion", "ConfiguredRun", "DamagedDocument", "Failure", "GroupSummary",
    "Headline", "MemoryIdentity", "MergedRecord", "ModelIdentity", "PerStimulus", "Refusal", "Replicate", "Response", "Resumed",
    "RunDoc", "RunFile", "Score", "ShardRecord", "ShardThresholds", "SkippedFeedback", "StreamEntry",
    "StreamMinimum", "StreamOrder", "StreamRan", "StreamStarted", "StreamSummary", "Summary", "SummaryFile", "Threshold",
    "ToolCallDoc", "TranscriptEntry", "Usage", "Versions", "WriteFailure", "problem_line", "read",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
