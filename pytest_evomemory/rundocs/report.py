"""What a test report says of the benchmark: pytest-json-report's ``evomemory``
block (:class:`JsonReport`, with each gain gate's verdict, :class:`GainDoc`); a
task test's ``metadata.evomemory`` is :class:`.taskmeta.TaskMetadata`.

They are no file of the run directory, but a dashboard reads them as it reads the
run's files, so they are declared here once and the shipped schema is generated
from them (``json_report``, ``gain``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from .base import RunDoc, SchemaVersion
from .compare import Comparison, Replicates
from .fields import Count, Flag, Fraction, Text
from .identity import Replicate
from .summary import Summary


class GainDoc(RunDoc):
    """One arm's verdict on one gain gate (--evomemory-min-gain): the difference in points, the paired test and whether the margin was met."""

    NOT_REQUIRED = frozenset({"figure", "wilcoxon_p", "replicates", "difference_ci_points", "interval_method",
                              "requires", "test", "p_value"})
    CLOSED = True
    SCHEMA_DESCRIPTION = None

    scope: Text = ""
    label: Text = ""
    baseline: Text = ""
    minimum_points: float = 0.0
    difference_points: float | None = None
    paired_tasks: Count = 0
    mcnemar_p: Fraction | None = None
    complete: Flag = False
    met: Flag = False
    figure: str = Field(default="accuracy", description=(
        "the figure the difference is of: 'accuracy', or the headline mean (LoCoMo: 'mean F1')"))
    wilcoxon_p: Fraction | None = Field(default=None, description=(
        "with a headline mean: the Wilcoxon signed-rank p of the paired difference"))
    replicates: Count | None = Field(default=None, description=(
        "a session of replicates: how many replicates the mean difference is of (null: one run's comparison)"))
    difference_ci_points: list[float] | None = Field(default=None, min_length=2, max_length=2, description=(
        "the 95% interval of the difference, in points (its method: interval_method)"))
    interval_method: str | None = Field(default=None, description=(
        "the method of difference_ci_points (docs/statistics.md): 'Agresti-Min' (one run's accuracy), 'MOVER' (a "
        "mean figure such as LoCoMo's F1), 'Agresti-Min on the effective number of tasks' (accuracy across "
        "replicates)"))
    #: one of options.GAIN_REQUIRES (the schema generator lists them: rundocs imports no option)
    requires: str = Field(default="estimate", description=(
        "what had to reach the margin (--evomemory-min-gain-by): the estimate, the 95% interval's lower bound, or "
        "the estimate with the paired test's p below 0.05"))
    test: str = Field(default="McNemar", json_schema_extra={"enum": ["McNemar", "Wilcoxon", "paired t", "sign-flip"]},
                      description="the paired test behind p_value")
    p_value: Fraction | None = None


class ReportIdentity(RunDoc):
    """What was benchmarked: what ran (the first stream's record; summary.ran has each stream's) over the config, and the set overrides."""

    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "agent": {"$ref": "#/$defs/agent_identity"},
        "model": {"$ref": "#/$defs/model_identity"},
        "memory": {"$ref": "#/$defs/memory_identity"},
    }}

    agent: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    overrides: list[str] = Field(default_factory=list)


class ReportArm(RunDoc):
    """One arm of the session in the JSON report: its name, run directory, what ran and its summary."""

    OMIT_NONE = frozenset({"replicate"})
    CLOSED = True

    name: Text = ""
    replicate: Replicate | None = None
    run_dir: Text = ""
    identity: ReportIdentity = Field(default_factory=ReportIdentity)
    summary: Summary | None = None


class JsonReport(RunDoc):
    """The evomemory block of pytest-json-report's report: one shape for one arm and for several (an arm list of length one)."""

    OMIT_UNSET = frozenset({"replicates"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "arms": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/report_arm"}},
    }}

    schema_version: SchemaVersion = 2
    baseline: Text = Field(default="", description="The first arm's name.")
    arms: list[ReportArm] = Field(default_factory=list)
    comparison: Comparison | None = None
    replicates: Replicates | None = Field(default=None, description=(
        "A repeated session's comparison across replicates (replicates.json); absent when the arms are not "
        "repeated."))
    gains: list[GainDoc] = Field(default_factory=list)


__all__ = ["GainDoc", "JsonReport", "ReportArm", "ReportIdentity"]
