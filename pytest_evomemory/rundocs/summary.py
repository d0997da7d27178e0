"""summary.json: a run's metrics, gates, failures and completion.

:class:`StreamSummary` is one stream's metrics (or all streams', ``overall``), as
:class:`..analysis.summary.StreamMetrics` counts them; a figure a match mode
declares beyond accuracy (ToolBench's ``api``, LoCoMo's ``f1``) adds its own keys
(``<name>_matches``, ``<name>_accuracy``, ``<name>_accuracy_ci``; a mean figure
``<name>_sum`` and ``<name>_mean``), read with :meth:`StreamSummary.figure_value`.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from .base import SCHEMA_VERSION, RunDoc, SchemaVersion
from .fields import CHECK, Amount, Count, Flag, Fraction, Interval, Number, Seconds, Sha256, Text
from .identity import Replicate, StreamRan, Versions
from .records import Failure, SkippedFeedback

_FIGURE = "^[a-z][a-z0-9_]*"
_OPTIONAL_FRACTION = {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}]}
_OPTIONAL_INTERVAL = {"anyOf": [{"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1},
                                 "minItems": 2, "maxItems": 2}, {"type": "null"}]}

#: A figure's keys (suffix -> its type), as the writer names them.
_FIGURE_KEYS: dict[str, Any] = {
    "_matches": Count, "_accuracy": Fraction | None, "_accuracy_ci": Interval | None, "_sum": Amount,
    "_mean": Fraction | None,
}


@functools.cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    """The validator of each figure key, built on first use (a summary is read or
    written after the run, not at start-up)."""
    return {suffix: TypeAdapter(kind) for suffix, kind in _FIGURE_KEYS.items()}



def _at_most(part: str, whole: str, values: RunDoc) -> None:
    have, limit = getattr(values, part, None), getattr(values, whole, None)
    if isinstance(have, int) and isinstance(limit, int) and have > limit:
        raise PydanticCustomError(f"{CHECK}_at_most", "at most {whole} ({limit})",
                                  {"key": part, "value": have, "whole": whole, "limit": limit})


class GroupSummary(RunDoc):
    """Accuracy of the tasks of one group (e.g. one MMLU-Pro category) in a stream."""

    CLOSED = True

    tasks: Count = 0
    correct: Count = 0
    accuracy: Fraction | None = None
    accuracy_ci: Interval | None = None

    @model_validator(mode="after")
    def _counts(self) -> GroupSummary:
        _at_most("correct", "tasks", self)
        return self


class Headline(RunDoc):
    """What the stream is judged on: the accuracy, or the mean figure its match mode declares as its headline (LoCoMo: metric f1_mean, label "mean F1"). --evomemory-min-accuracy and thresholds gate on value."""

    CLOSED = True

    metric: Text = Field(default="accuracy", description="the figure's key in these metrics: accuracy or <name>_mean")
    label: Text = "accuracy"
    value: Fraction | None = None


class PerStimulus(RunDoc):
    """Tokens, agent turns and seconds per stimulus (null without stimuli)."""

    CLOSED = True

    tokens: Amount | None = None
    agent_turns: Amount | None = None
    seconds: Seconds | None = None


class StreamSummary(RunDoc):
    """Metrics of one stream, or of all of them (overall)."""

    SCHEMA_DESCRIPTION = (
        "Metrics of one stream, or of all of them (overall). Figures a match mode declares beyond accuracy "
        "(ToolBench's api) add <name>_matches, <name>_accuracy and <name>_accuracy_ci. A figure a mode declares "
        "as its headline (LoCoMo's f1) is also kept in overall."
    )
    OMIT_NONE = frozenset({"memory_unstored"})
    NOT_REQUIRED = frozenset({"cost_usd"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"patternProperties": {
        f"{_FIGURE}_matches$": {"type": "integer", "minimum": 0},
        f"{_FIGURE}_accuracy$": _OPTIONAL_FRACTION,
        f"{_FIGURE}_accuracy_ci$": _OPTIONAL_INTERVAL,
        f"{_FIGURE}_sum$": {"type": "number", "minimum": 0, "description": "A mean figure's sum over the tasks (LoCoMo's f1_sum)."},
        f"{_FIGURE}_mean$": {**_OPTIONAL_FRACTION, "description": "A mean figure: its sum / tasks (LoCoMo's f1_mean)."},
    }}

    stream: Text = ""
    tasks: Count = 0
    correct: Count = 0
    errors: Count = 0
    accuracy: Fraction | None = None
    accuracy_ci: Interval | None = None
    figures: dict[str, Text] = Field(default_factory=dict, description="figure name -> label (api -> API).")
    headline: Headline = Field(default_factory=Headline)
    groups: dict[str, GroupSummary] = Field(default_factory=dict)
    stimuli: Count = 0
    feedback_turns: Count = 0
    agent_turns: Count = 0
    tool_calls: Count = 0
    memory_retains: Count = 0
    memory_recalls: Count = 0
    memory_unstored: Count | None = Field(default=None, description=(
        "Retains the memory stored nothing for (a library's own extraction, e.g. Mem0's or LangMem's with infer: "
        "true, kept nothing; docs/memory.md); absent when none did."))
    protocol_violations: Count = 0
    cached_responses: Count = 0
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    total_tokens: Count = 0
    seconds: Seconds = 0.0
    cost_usd: Amount | None = Field(default=None, description="US dollars, priced by the agent config's model.pricing; null when the model has no pricing."
    )
    per_stimulus: PerStimulus = Field(default_factory=PerStimulus)
    learning_curve: list[Fraction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _figures_and_counts(self) -> StreamSummary:
        _at_most("correct", "tasks", self)
        _at_most("errors", "tasks", self)
        names = list(self.figures) or (["api"] if "api_matches" in (self.__pydantic_extra__ or {}) else [])
        for name in names:
            for suffix, adapter in _adapters().items():
                key = f"{name}{suffix}"
                value = self.extra(key, _ABSENT)
                if value is _ABSENT or value is None:
                    continue
                try:
                    adapter.validate_python(value)
                except ValidationError as error:
                    raise PydanticCustomError(CHECK + "_figure", error.errors()[0]["msg"],
                                              {"key": key, "value": value}) from None
            matches = self.extra(f"{name}_matches")
            if isinstance(matches, int) and matches > self.tasks:
                raise PydanticCustomError(f"{CHECK}_at_most", "at most tasks ({limit})",
                                          {"key": f"{name}_matches", "value": matches, "limit": self.tasks})
        return self

    def figure_value(self, name: str, suffix: str) -> Any:
        """A figure's key (``figure_value("api", "accuracy")`` is ``api_accuracy``), or None."""
        return self.extra(f"{name}_{suffix}")


_ABSENT: Any = object()


class Threshold(RunDoc):
    """One gate: the scope's headline figure against its minimum."""

    CLOSED = True
    NOT_REQUIRED = frozenset({"metric", "label", "value", "accuracy"})

    scope: Text = ""
    metric: Text = Field(default="accuracy", description="the figure gated on: accuracy, or the match mode's headline mean "
                         "figure (f1_mean for LoCoMo)")
    label: Text | None = "accuracy"
    minimum: Fraction = 0.0
    value: Fraction | None = Field(default=None, description="the gated figure's value")
    accuracy: Fraction | None = Field(default=None, description="the scope's accuracy, whatever the gate reads")
    met: Flag = False


class CategoryRow(RunDoc):
    """One row of summary.json's categories: the headline mean figure of a category's questions (or of all: overall)."""

    OMIT_NONE = frozenset({"category"})
    CLOSED = True

    category: Text | None = Field(default=None, description="the category's name (LoCoMo: single-hop, multi-hop, temporal, "
                                  "open-domain, adversarial); absent in overall")
    tasks: Count = 0
    mean: Fraction | None = None
    ci_low: Fraction | None = None
    ci_high: Fraction | None = None
    correct: Count = 0
    accuracy: Fraction | None = None
    evidence_recall: Fraction | None = None
    evidence_questions: Count = 0


class Categories(RunDoc):
    """The headline mean figure (LoCoMo's F1) per question category and overall, each with its 95 % interval (Wilson on the effective number of tasks), the share with the yes/no outcome and the mean evidence recall."""

    CLOSED = True

    metric: Text = ""
    label: Text | None = None
    by_category: list[CategoryRow] = Field(
        default_factory=list,
        description="in the LoCoMo paper's order (data categories 4, 1, 2, 3, 5), other groups after them by name",
    )
    overall: CategoryRow = Field(default_factory=CategoryRow)


class Completion(RunDoc):
    """Whether every planned task ran, and if not why."""

    CLOSED = True

    complete: Flag = False
    tasks_planned: Count = 0
    tasks_run: Count = 0
    reason: str | None = None


class Summary(RunDoc):
    """A run's summary: summary.json, and each arm's summary in the JSON report (where schema_version is the block's)."""

    OMIT_NONE = frozenset({"schema_version", "wall_seconds", "write_failure", "replicate"})
    CLOSED = True
    # absent from an arm's summary in the JSON report (the block's is the version), the current one where present
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {"schema_version": {
        "const": SCHEMA_VERSION,
        "description": "The artefacts' schema version (rundir.SCHEMA_VERSION). A reader refuses a newer one.",
    }}}

    schema_version: SchemaVersion | None = None
    run: Text | None = Field(default=None, description="The run's name.")
    started: Text | None = None
    finished: Text | None = None
    streams: dict[str, StreamSummary] = Field(default_factory=dict)
    overall: StreamSummary = Field(default_factory=StreamSummary)
    thresholds: list[Threshold] = Field(default_factory=list)
    categories: Categories | None = None
    thresholds_met: Flag = False
    passed: Flag = False
    failed_episodes: list[Failure] = Field(default_factory=list)
    skipped_feedback: list[SkippedFeedback] = Field(default_factory=list)
    completion: Completion = Field(default_factory=Completion)
    ran: dict[str, StreamRan] = Field(default_factory=dict, description="stream -> what ran for it.")
    config_fingerprint: Sha256 | None = Field(default=None, description="As in run.json: equal fingerprints, equal resolved settings.")
    versions: Versions | None = None
    wall_seconds: Seconds | None = Field(default=None, description="evomemory run: the wall time from the session's first chain to this run's end (with chains at once, an arm of several ends as its last chain does).")
    write_failure: str | None = Field(default=None, description="Results could not all be written (passed is then false).")
    replicate: Replicate | None = None
    methods: dict[str, str] = Field(default_factory=dict, description=(
        "the method behind each interval the summary holds, in citable words (docs/statistics.md); "
        "empty in a summary written before it was recorded"))


class SummaryFile(Summary):
    """summary.json."""

    OMIT_NONE = Summary.OMIT_NONE - {"schema_version"}

    schema_version: SchemaVersion = SCHEMA_VERSION


__all__ = [
    "Categories", "CategoryRow", "Completion", "GroupSummary", "Headline", "Literal", "Number", "PerStimulus",
    "SchemaVersion", "StreamSummary", "Summary", "SummaryFile", "Threshold",
]
