"""compare.json: runs compared task by task (the first is the baseline).

:func:`..reporting.compare.build_comparison` computes it and validates it into
:class:`Comparison`; the terminal, the compare page and the gain gates read the
model. Every part is written with exactly the keys it was built with
(``AS_GIVEN``): a run entry that did not run a stream is ``label`` and ``present``
alone, and each figure a stream carries adds its ``<name>_accuracy`` keys to an
entry. compare.json's schema definitions are generated from these models (each
part's ``REQUIRED`` keys are the ones the builder always writes); replicates.json's
is generated from its models too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .base import RunDoc, SchemaVersion, as_model
from .fields import Amount, Count, Difference, Fraction, Number, Ordinal, Scalar, Text

#: The scope of every stream together, beside the streams' own (compare.json's and
#: replicates.json's ``overall``; what a gain gate without ``STREAM=`` judges).
OVERALL = "overall"

#: compare.json's ``sequence_robustness_notes`` when no run is the baseline in
#: another order: sequence robustness was not asked for, and the file says so
#: rather than leaving an empty list to be read as "no effect of the order".
NO_OTHER_ORDER = (
    "no run differs from the baseline only in benchmark.order (sequence robustness pairs one arm's runs in two "
    "orders), so there is none"
)


class _Given(RunDoc):
    """A part of compare.json: written with the keys it was built with, in the order
    it was built with (compare.json, unlike the run's own files, is not written with
    sorted keys)."""

    AS_GIVEN = True
    #: the keys the builder always writes (the schema requires them; the rest it may leave out)
    REQUIRED: ClassVar[frozenset[str]] = frozenset()
    _given_order: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        instance = handler(data)
        if isinstance(data, Mapping) and isinstance(instance, _Given):
            instance._given_order = tuple(map(str, data))
        return instance

    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = RunDoc._leave_out(self, handler)
        order = self._given_order
        if not isinstance(data, dict) or order is None:
            return data
        # the given keys in their order, then any other in the order written (what a
        # stable sort by given rank gives, without sorting each of thousands of parts)
        ordered = {key: data[key] for key in order if key in data}
        if len(ordered) < len(data):
            ordered.update((key, value) for key, value in data.items() if key not in ordered)
        return ordered


class PowerEstimate(_Given):
    """The smallest difference the comparison would detect at 80 % power."""

    SCHEMA_DESCRIPTION = (
        "The smallest gain the comparison could have detected (docs/statistics.md, 'Power'): "
        "minimum_detectable_effect = (z(1 - alpha/2) + z(power)) * sd_difference / sqrt(tasks), a fraction; an "
        "sd_difference of 0 (no task differed) is taken as one task differing in one replicate. Null, with note "
        "saying why, for one paired task or when it would exceed 1 (no gain is detectable)."
    )
    REQUIRED = frozenset({"alpha", "power", "tasks", "replicates", "sd_difference", "minimum_detectable_effect",
                          "sd_from"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "alpha": {"const": 0.05}, "power": {"const": 0.8}, "tasks": {"type": "integer", "minimum": 1},
        "replicates": {"type": "integer", "minimum": 1},
        "sd_difference": {"type": ["number", "null"], "minimum": 0},
        "minimum_detectable_effect": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "sd_from": {"type": "string"},
    }}

    alpha: Number | None = None
    power: Number | None = None
    tasks: Count = 0
    replicates: Count = 1
    sd_difference: Number | None = None
    minimum_detectable_effect: Number | None = None
    sd_from: str = ""
    note: str | None = Field(default=None, description=(
        "why minimum_detectable_effect is null (one paired task; or no gain up to 100 points detectable), or null"))


class ContinuousComparison(_Given):
    """A continuous headline figure (LoCoMo's F1) compared task by task: the mean difference, its MOVER interval and the Wilcoxon signed-rank test."""

    REQUIRED = frozenset({"metric", "label", "paired_tasks", "mean_difference", "ci_low", "ci_high",
                          "wilcoxon_statistic", "wilcoxon_p", "wilcoxon_method", "nonzero"})
    CLOSED = True

    metric: Text = ""
    label: Text = ""
    paired_tasks: Count = 0
    mean_difference: Difference | None = None
    ci_low: Difference | None = None
    ci_high: Difference | None = None
    wilcoxon_statistic: Amount | None = None
    wilcoxon_p: Fraction | None = None
    wilcoxon_method: Literal["exact", "permutation", "normal"] | None = None
    nonzero: Count = 0
    power: PowerEstimate | None = None
    no_test: str | None = Field(default=None, description=(
        "why there is no Wilcoxon test (no task scored in both runs: the test fields are null), or null"))


class PairedTest(_Given):
    """A paired comparison on the tasks both runs ran: Agresti & Min's interval of the difference, exact McNemar p."""

    REQUIRED = frozenset({"paired_tasks", "baseline_correct", "correct", "only_baseline_correct", "only_this_correct",
                          "difference", "ci_low", "ci_high", "mcnemar_p"})
    CLOSED = True

    paired_tasks: Count = 0
    baseline_correct: Count = 0
    correct: Count = 0
    only_baseline_correct: Count = 0
    only_this_correct: Count = 0
    difference: Difference | None = None
    ci_low: Difference | None = None
    ci_high: Difference | None = None
    mcnemar_p: Fraction | None = None
    no_test: str | None = Field(default=None, description=(
        "why no difference, interval or p-value is given (no task scored in both runs), or null"))


class PairedEntry(PairedTest):
    """A run against the baseline on the tasks both ran: the accuracy difference, its Agresti & Min interval, the exact McNemar p."""

    REQUIRED = frozenset({"label", "paired_tasks", "difference", "ci_low", "ci_high", "mcnemar_p", "same_tasks"})

    label: Text = ""
    same_tasks: bool = False
    only_in_baseline: Count = 0
    only_in_this_run: Count = 0
    continuous: ContinuousComparison | None = Field(default=None, description=(
        "For a continuous headline figure (LoCoMo's F1): the mean difference (this run - baseline) "
        "with its 95 % MOVER interval and the two-sided Wilcoxon signed-rank test, on the tasks both ran; null "
        "for an accuracy headline."))
    power: PowerEstimate | None = None


class RunEntry(_Given):
    """One run's figures in a scope (``present`` false: it did not run the stream); a figure a stream carries adds ``<name>_accuracy`` (and its interval) or ``<name>_mean``."""

    REQUIRED = frozenset({"label", "present"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"patternProperties": {
        "^[a-z][a-z0-9_]*_(accuracy|ci_low|ci_high|mean)$": {"anyOf": [
            {"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}]},
    }}

    label: Text = ""
    present: bool = False
    correct: Count | None = None
    tasks: Count | None = None
    accuracy: Fraction | None = None
    ci_low: Fraction | None = None
    ci_high: Fraction | None = None
    protocol_violations: Count | None = None
    cached_responses: Count | None = None
    errors: Count | None = None
    cost_usd: Amount | None = Field(default=None, description=(
        "US dollars, priced by the agent config's model.pricing; null when the model has no pricing."))


class Scope(_Given):
    """A stream (or overall) compared: each run's figures, each run against the baseline."""

    REQUIRED = frozenset({"runs", "vs_baseline", "task_sets_differ"})
    CLOSED = True

    runs: list[RunEntry] = Field(default_factory=list)
    vs_baseline: list[PairedEntry] = Field(default_factory=list)
    task_sets_differ: bool = False

    @property
    def continuous(self) -> ContinuousComparison | None:
        """The first continuous comparison of the scope, if any run has one."""
        return next((entry.continuous for entry in self.vs_baseline if entry.continuous is not None), None)


class ComparedRun(_Given):
    """A run compared: its label, directory, name and what ran (agent, model, memory)."""

    REQUIRED = frozenset({"label", "run_dir", "run", "agent", "model", "memory"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "run": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "agent": {"anyOf": [{"$ref": "#/$defs/agent_identity"}, {"type": "null"}]},
        "model": {"$ref": "#/$defs/model_identity"},
        "memory": {"$ref": "#/$defs/memory_identity"},
    }}

    label: Text = ""
    run_dir: Text = ""
    run: Scalar = None
    agent: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None


class ConfigDifference(_Given):
    """A config key whose values differ between the runs (one value per run, null where absent)."""

    REQUIRED = frozenset({"key", "values"})
    CLOSED = True

    key: Text = ""
    values: list[Any] = Field(default_factory=list)


class Flip(_Given):
    """A task on which the runs disagree: each run's outcome (null: it did not run it)."""

    REQUIRED = frozenset({"stream", "task_id", "position", "correct"})
    CLOSED = True

    stream: Text = ""
    task_id: Text = ""
    position: Ordinal | None = Field(default=None, description="1-based position in the stream.")
    correct: list[bool | None] = Field(default_factory=list)


class SequenceRobustness(_Given):
    """A run that is the baseline in another order: per stream and overall, the paired difference between the orders."""

    SCHEMA_DESCRIPTION = (
        "A run that is the baseline in another benchmark.order (nothing else differs): the paired difference "
        "between the two orders, per stream and overall."
    )
    REQUIRED = frozenset({"label", "baseline_order", "order", "streams", "overall"})
    CLOSED = True

    label: Text = ""
    baseline_order: Text = ""
    order: Text = ""
    streams: dict[str, PairedTest] = Field(default_factory=dict)
    overall: PairedTest = Field(default_factory=PairedTest)


class SimilarityPoint(_Given):
    """A task both runs scored: how similar it was to what the later run recalled, and that run's gain on it."""

    REQUIRED = frozenset({"task_id", "similarity", "gain"})
    CLOSED = True

    task_id: Text = ""
    similarity: float = 0.0
    gain: int = Field(default=0, description="+1 only this run right, -1 only the control right, else 0.")


class SimilarityBin(_Given):
    """The tasks whose similarity falls in [low, high) (the last bin: [low, high]) and their mean gain."""

    REQUIRED = frozenset({"low", "high", "tasks", "mean_gain"})
    CLOSED = True

    low: float = 0.0
    high: float = 0.0
    tasks: Count = 0
    mean_gain: float | None = None


class SimilarityEntry(_Given):
    """A run after the control on one stream: the correlation of its gain with task similarity, the bins and the points."""

    REQUIRED = frozenset({"label"})

    label: Text = ""
    tasks: Count = 0
    tasks_without_similarity: Count = 0
    mean_similarity: float | None = None
    mean_gain: float | None = None
    pearson_r: float | None = None
    pearson_ci_low: float | None = None
    pearson_ci_high: float | None = None
    spearman_rho: float | None = None
    bins: list[SimilarityBin] = Field(default_factory=list)
    points: list[SimilarityPoint] = Field(default_factory=list)


class Similarity(_Given):
    """Gain versus similarity (docs/artefacts.md): per stream, one entry per run after the baseline (the control)."""

    REQUIRED = frozenset({"control", "method", "streams"})

    control: Text = ""
    method: Text = ""
    streams: dict[str, list[SimilarityEntry]] = Field(default_factory=dict)


class Comparison(_Given):
    """compare.json."""

    SCHEMA_DESCRIPTION = "compare.json: runs compared with the first (the baseline), paired on the tasks both ran."
    REQUIRED = frozenset({"schema_version", "baseline", "confidence", "methods", "runs", "streams", "overall",
                          "figures", "config_diff", "flips", "warnings"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "confidence": {"const": 0.95},
        "runs": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/compared_run"}},
    }}

    schema_version: SchemaVersion = 2
    baseline: Text = ""
    confidence: Number = 0.95
    methods: dict[str, str] = Field(default_factory=dict)
    runs: list[ComparedRun] = Field(default_factory=list)
    streams: dict[str, Scope] = Field(default_factory=dict)
    overall: Scope = Field(default_factory=Scope)
    figures: dict[str, str] = Field(default_factory=dict)
    config_diff: list[ConfigDifference] = Field(default_factory=list)
    flips: list[Flip] = Field(default_factory=list)
    #: how each memory arm's gain over the first run tracks task similarity
    similarity: Similarity | None = None
    sequence_robustness: list[SequenceRobustness] = Field(default_factory=list)
    sequence_robustness_notes: list[str] = Field(default_factory=list, description=(
        "why sequence_robustness has no entry for a run, or none at all: a run in another order that also differs "
        "in what ran, or no run in another order"))
    warnings: list[str] = Field(default_factory=list)
    #: when the page was written (a comparison the compare command wrote)
    generated: str | None = None

    def scope(self, name: str) -> Scope | None:
        """``overall``, or a stream's scope (None: no run ran it)."""
        return self.overall if name == OVERALL else self.streams.get(name)

    def continuous_label(self) -> str | None:
        """The label of the continuous headline figure the comparison tests (``F1``),
        or None when every paired entry is judged on accuracy alone."""
        for scope in [*self.streams.values(), self.overall]:
            found = scope.continuous
            if found is not None:
                return found.label or found.metric
        return None


class VarianceSplit(_Given):
    """Where the variance of the per-task scores comes from: between tasks and within them (seeds)."""

    SCHEMA_DESCRIPTION = (
        "Where the variance of the per-task scores comes from (docs/statistics.md, 'Variance split'): between tasks "
        "(difficulty; only more tasks shrink it) and within tasks (one replicate around its task's mean: seeds; more "
        "replicates shrink it, null with one replicate); standard errors of the mean as run, with twice the tasks "
        "and with twice the replicates."
    )
    REQUIRED = frozenset({"between_tasks", "within_tasks", "seed_share", "standard_error",
                          "standard_error_twice_the_tasks", "standard_error_twice_the_replicates"})
    CLOSED = True

    between_tasks: Amount = 0.0
    within_tasks: Amount | None = None
    seed_share: Fraction | None = None
    standard_error: Amount = 0.0
    standard_error_twice_the_tasks: Amount = 0.0
    standard_error_twice_the_replicates: Amount = 0.0


class ReplicateEffect(_Given):
    """The F test of an effect shared by a replicate's tasks (docs/statistics.md, 'What the intervals do not cover')."""

    SCHEMA_DESCRIPTION = (
        "Whether the arm's replicates differ more than the seed noise within tasks explains: F = the variance of "
        "the replicate means over (the mean within-task variance / tasks), on first_df = replicates - 1 and "
        "second_df = tasks x (replicates - 1) degrees of freedom, and its p. A small p says something shared by a "
        "replicate's tasks (its memory history, carry-over between tasks) varies between seeds, which the "
        "intervals, covering task sampling, do not include (docs/statistics.md)."
    )
    REQUIRED = frozenset({"f", "first_df", "second_df", "p_value"})
    CLOSED = True

    f: Amount = 0.0
    first_df: Count = 1
    second_df: Count = 1
    p_value: Fraction = 1.0


class ArmScope(_Given):
    """An arm's figure in a scope across its replicates: each replicate's, their mean and spread, the interval clustered by task (its method's own keys beside)."""

    REQUIRED = frozenset({"accuracies", "n", "mean", "sd", "ci_low", "ci_high", "tasks", "effective_tasks",
                          "variance"})
    CLOSED = True

    accuracies: list[Fraction | None] = Field(default_factory=list)
    n: Count = 0
    mean: Fraction | None = None
    sd: Amount | None = None
    ci_low: Fraction | None = None
    ci_high: Fraction | None = None
    tasks: Count = Field(default=0, description="tasks every replicate scored: the interval's sample")
    effective_tasks: Amount | None = Field(default=None, description=(
        "the Kish effective sample size the Wilson interval uses: tasks x replicates / design effect"))
    #: where the variance comes from (tasks, seeds) and the standard errors more of either would give
    variance: VarianceSplit | None = None
    #: the F test of an effect shared by a replicate's tasks (null below 2 tasks or replicates)
    replicate_effect: ReplicateEffect | None = None


class ReplicateTest(PairedTest):
    """One replicate's paired test of an arm against the baseline (the seed both ran)."""

    REQUIRED = frozenset({"replicate", "seed", *PairedTest.REQUIRED})

    replicate: Ordinal = 1
    seed: int | None = None


class DifferenceScope(_Given):
    """An arm minus the baseline in a scope across the replicates: the per-replicate differences, the per-task mean difference's interval and test, each replicate's paired test."""

    REQUIRED = frozenset({"differences", "n", "mean", "sd", "ci_low", "ci_high", "per_replicate", "paired_tasks",
                          "test", "p_value", "variance", "power"})
    CLOSED = True

    differences: list[Difference | None] = Field(default_factory=list)
    n: Count = 0
    mean: Difference | None = None
    sd: Amount | None = None
    ci_low: Difference | None = None
    ci_high: Difference | None = None
    paired_tasks: Count = Field(default=0, description="tasks every replicate of both arms scored")
    p_value: Fraction | None = None
    test: Literal["paired t", "sign-flip", "McNemar"] | None = None
    variance: VarianceSplit | None = None
    power: PowerEstimate | None = None
    per_replicate: list[ReplicateTest] = Field(default_factory=list)


class ReplicateArm(_Given):
    """An arm of a repeated session: its replicates' run directories and seeds, per stream and overall."""

    REQUIRED = frozenset({"label", "run_dirs", "seeds", "streams", "overall"})
    CLOSED = True

    label: Text = ""
    run_dirs: list[str] = Field(default_factory=list)
    seeds: list[int | None] = Field(default_factory=list)
    streams: dict[str, ArmScope] = Field(default_factory=dict)
    overall: ArmScope = Field(default_factory=ArmScope)


class OrderPair(_Given):
    """The two orders of the same arm (sequence robustness): the baseline's and this arm's."""

    REQUIRED = frozenset({"baseline_order", "order"})
    CLOSED = True

    baseline_order: Text = ""
    order: Text = ""


class ReplicateVersus(_Given):
    """An arm against the baseline across the replicates (``sequence_robustness``: the same arm in another order)."""

    REQUIRED = frozenset({"label", "sequence_robustness", "streams", "overall"})
    CLOSED = True

    label: Text = ""
    sequence_robustness: OrderPair | None = None
    streams: dict[str, DifferenceScope] = Field(default_factory=dict)
    overall: DifferenceScope = Field(default_factory=DifferenceScope)

    def scope(self, name: str) -> DifferenceScope | None:
        """``overall``, or a stream's scope."""
        return self.overall if name == OVERALL else self.streams.get(name)


class Replicates(_Given):
    """replicates.json: a repeated session's arms compared across their replicates."""

    SCHEMA_DESCRIPTION = (
        "replicates.json: a repeated session's arms across their replicates (docs/artefacts.md, \"Replicates\"; "
        "docs/statistics.md): each arm's figure per replicate and, over the tasks, the mean of the per-task means "
        "with its Wilson interval on the Kish effective number of tasks and the variance split; each later arm's "
        "per-task mean difference from the baseline with its interval (Agresti & Min on the effective number of "
        "tasks; MOVER for a mean such as F1), paired test (t; sign-flip where t is undefined; McNemar with one "
        "replicate of yes/no outcomes) and minimum detectable effect, beside each replicate's McNemar test. "
        "methods names each."
    )
    REQUIRED = frozenset({"schema_version", "baseline", "confidence", "replicates", "seeds", "methods", "arms",
                          "vs_baseline", "comparisons", "warnings", "generated"})
    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = {"properties": {
        "confidence": {"const": 0.95},
        "arms": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/replicate_arm"}},
    }}

    schema_version: SchemaVersion = 2
    baseline: Text = ""
    confidence: Number = 0.95
    figure: Text = Field(default="accuracy", description=(
        "what the means compare: 'accuracy', or the mean the streams' match mode declares as its headline (LoCoMo: "
        "'mean F1')"))
    replicates: Ordinal = 1
    seeds: list[int | None] = Field(default_factory=list)
    methods: dict[str, str] = Field(default_factory=dict)
    arms: list[ReplicateArm] = Field(default_factory=list)
    vs_baseline: list[ReplicateVersus] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    comparisons: list[str] | None = None
    generated: str | None = None

    def paired_tests(self) -> list[str | None]:
        """The test behind each difference's p (``paired t``, ``sign-flip``, ``McNemar``), every scope."""
        return [scope.test for entry in self.vs_baseline for scope in [*entry.streams.values(), entry.overall]]


def as_replicates(document: Replicates | Mapping[str, Any]) -> Replicates:
    """A replicate comparison as its model (a mapping: as replicates.json holds it)."""
    return as_model(Replicates, document)


def as_comparison(document: Comparison | Mapping[str, Any]) -> Comparison:
    """A comparison as its model (a mapping: as compare.json holds it)."""
    return as_model(Comparison, document)


__all__ = [
    "NO_OTHER_ORDER",
    "OVERALL",
    "ArmScope",
    "ComparedRun",
    "Comparison",
    "ConfigDifference",
    "ContinuousComparison",
    "DifferenceScope",
    "Flip",
    "OrderPair",
    "PairedEntry",
    "PairedTest",
    "PowerEstimate",
    "ReplicateArm",
    "ReplicateEffect",
    "ReplicateTest",
    "ReplicateVersus",
    "Replicates",
    "RunEntry",
    "Scope",
    "SequenceRobustness",
    "VarianceSplit",
    "as_comparison",
    "as_replicates",
]
