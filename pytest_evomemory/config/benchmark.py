"""The benchmark config: which streams, how many tasks, in which order, where data lives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..core.errors import ConfigError
from ..options import MAX_LIMIT, MAX_REPEATS
from ..util.text import quoted_with_suggestions
from .base import PathText, StrictModel


class Thresholds(StrictModel):
    """Minimum accuracies; a miss fails the pytest session (the CI gate)."""

    overall: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    streams: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=dict)


#: A stream name a user's data gives (a ``files`` entry, a LoCoMo file's sample_id):
#: starts with a letter or digit, since "..", "." and "-x" would be a path or an option.
STREAM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class StreamFile(StrictModel):
    """A user-defined stream read from a JSONL file of generic task records."""

    name: Annotated[str, Field(pattern=STREAM_NAME, max_length=100)]
    path: PathText
    match_mode: str = "exact"


#: The benchmark keys that set the order of a stream's tasks (:mod:`..runtime.order`)
#: and nothing else: two runs whose resolved configs differ only here ran the same
#: arm in two orders (:func:`..reporting.compare.order_only`), however each was set.
ORDER_KEYS = ("order", "order_seed", "order_from")


class BenchmarkConfig(StrictModel):
    """Workload selection and limits: which streams, how many tasks, where data lives."""

    benchmark: str = "evomemory_single_turn"
    streams: list[str] | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = None
    data_dir: PathText | None = None
    seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] = 0
    #: evomemory_single_turn only: MMLU-Pro categories to keep; ``None`` means the
    #: paper's (economics, engineering, philosophy), ``"all"`` turns the filter off.
    mmlu_pro_categories: list[str] | Literal["all"] | None = None
    files: list[StreamFile] = Field(default_factory=list)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    #: The order of the tasks within each stream, an experimental factor (docs/
    #: configuration.md, "Task order"): the source's, a seeded shuffle, or by difficulty.
    #: Which keys go together is checked by :mod:`..configs.load`.
    order: Literal["given", "shuffle", "easy_to_hard", "hard_to_easy"] = "given"
    #: The seed of ``order: shuffle`` (default: ``seed``, which also fixes GPQA's options).
    order_seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = None
    #: Finished run directories whose results give each task's difficulty (the share of
    #: them that solved it) for easy_to_hard / hard_to_easy (paths: :data:`PathText`).
    order_from: PathText | list[PathText] | None = None
    #: locomo and locomo_sample only: who writes each conversation's sessions into
    #: memory before its questions, the memory system's own ingestion (``memory``)
    #: or the agent in unscored ingestion turns (``agent``); docs/locomo.md.
    ingest: Literal["memory", "agent"] = "memory"
    #: locomo only: the user's own file in LoCoMo's format (relative to the benchmark
    #: config), read as it is instead of the pinned upstream file; docs/locomo.md.
    path: PathText | None = None
    #: Independent replicates of the run in one session (docs/configuration.md,
    #: "Repeats"): ``repeats: N`` runs seeds ``seed .. seed + N - 1``; ``seeds`` lists
    #: them. One of the two; ``--evomemory-repeats`` replaces both.
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] | None = None
    seeds: list[Annotated[int, Field(ge=-(2**63), lt=2**63)]] | None = None

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and not value:
            raise ValueError("an empty list runs no replicate; list at least one seed, or remove the key")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a seed is listed twice (two replicates would be one run twice); list each seed once")
        if value is not None and len(value) > 100:
            raise ValueError("more than 100 replicates; list at most 100 seeds")
        return value

    @model_validator(mode="after")
    def _one_way_to_repeat(self) -> BenchmarkConfig:
        if self.repeats is not None and self.seeds is not None:
            raise ValueError(
                "key 'seeds': 'repeats' and 'seeds' both say how many replicates run; give 'repeats: N' "
                "(seeds seed .. seed + N - 1) or 'seeds: [...]', not both"
            )
        if self.seeds is not None and "seed" in self.model_fields_set:
            raise ValueError(
                "key 'seeds': 'seed' and 'seeds' both give the seed; with 'seeds' each replicate's seed is listed, "
                "remove 'seed'"
            )
        return self

    @field_validator("order_from")
    @classmethod
    def _some_reference_run(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list names no run; list at least one run directory, or remove the key")
        return value

    @field_validator("streams")
    @classmethod
    def _no_duplicate_streams(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty list would run nothing; list at least one stream, or remove the key to run them all")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a stream is listed twice; list each stream once")
        return value

    @field_validator("files")
    @classmethod
    def _unique_file_names(cls, value: list[StreamFile]) -> list[StreamFile]:
        seen: set[str] = set()
        for entry in value:
            if entry.name in seen:
                raise ValueError(f"two entries are named {entry.name!r}; give each stream its own name")
            seen.add(entry.name)
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds_name_file_streams(cls, value: Thresholds, info: ValidationInfo) -> Thresholds:
        """For ``benchmark: files`` the stream names are known here; other benchmarks
        are checked by :func:`check_threshold_streams` once their source is known."""
        files: list[StreamFile] = info.data.get("files") or []
        if info.data.get("benchmark") == "files" and files:
            unknown = sorted(set(value.streams) - {entry.name for entry in files})
            if unknown:
                raise ValueError(
                    f"unknown stream(s) {quoted_with_suggestions(unknown, [entry.name for entry in files])} in 'streams'; "
                    f"the streams under 'files' are: {', '.join(entry.name for entry in files)}; use one of those names"
                )
        return value


def check_threshold_streams(config: BenchmarkConfig, available: Sequence[str], source: str) -> None:
    """Refuse a per-stream threshold for a stream the benchmark does not have.

    Called when the benchmark's stream names are known (at load, before any model
    call): a typo in ``thresholds.streams`` would otherwise only show after the
    whole paid run, as a missed threshold with no accuracy.
    """
    unknown = [name for name in config.thresholds.streams if name not in available]
    if unknown:
        raise ConfigError(
            f"{source}: key 'thresholds.streams': unknown stream(s) {quoted_with_suggestions(unknown, available)} "
            f"for benchmark {config.benchmark!r}; available: {', '.join(available)}; use one of those names",
            source=source, key="thresholds.streams",
        )
