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

from .base import DAMAGED_ADVICE, SCHEMA_VERSION, DamagedDocument, RunDoc, problem_line, read
from .identity import AgentIdentity, MemoryIdentity, ModelIdentity, StreamRan, Versions
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
    Replicate,
    StreamSummary,
    Summary,
    SummaryFile,
    Threshold,
)

__all__ = [
    "ARMS_SCHEMA_VERSION", "DAMAGED_ADVICE", "SCHEMA_VERSION", "AgentIdentity", "ArmEntryDoc", "ArmsFile",
    "Categories", "CategoryRow", "Completion", "ConfiguredRun", "DamagedDocument", "Failure", "GroupSummary",
    "Headline", "MemoryIdentity", "MergedRecord", "ModelIdentity", "PerStimulus", "Refusal", "Replicate", "Response", "Resumed",
    "RunDoc", "RunFile", "Score", "ShardRecord", "ShardThresholds", "SkippedFeedback", "StreamEntry",
    "StreamMinimum", "StreamOrder", "StreamRan", "StreamStarted", "StreamSummary", "Summary", "SummaryFile", "Threshold",
    "ToolCallDoc", "TranscriptEntry", "Usage", "Versions", "WriteFailure", "problem_line", "read",
]
