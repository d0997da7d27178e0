"""A stream declaration: source file, reader and converter bound into one object.

As inspect_ai's ``hf_dataset(path, revision, sample_fields=...)`` does, one
:class:`HubStream` says everything about a stream: which pinned upstream file it
reads, which fields the reader needs, how records become tasks, how tasks are
scored, which record field breaks its accuracy down, and which benchmark-config
settings change its tasks. Adding a stream means writing one declaration
(:mod:`.catalog`); nothing else in the package knows the streams by name.

Converters receive a :class:`Converting` that builds the samples: it numbers the
positions, stamps stream, match mode and source, fills the breakdown ``group`` and
refuses duplicate task ids, so no converter can get those wrong or differ on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import DataError
from ...core.types import BenchmarkSample
from ..base import QuoteAnswer
from ..checks import check_sample
from .readers import Record
from .sources import HubFile


@dataclass(frozen=True)
class ConvertOptions:
    """The benchmark-config settings that may change what a converter produces."""

    seed: int = 0
    #: ``None``: the stream's default selection; ``"all"``: no filter.
    mmlu_pro_categories: Sequence[str] | str | None = None


Converter = Callable[[Sequence[Record], "Converting"], None]
SettingsOf = Callable[[ConvertOptions], Mapping[str, Any]]


def no_settings(options: ConvertOptions) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class HubStream:
    """One stream of a hub-backed benchmark, declared in one place."""

    name: str
    source: HubFile
    #: Record fields the converter needs. The reader refuses a file that lacks one,
    #: so a wrong or truncated file never reaches the converter.
    fields: tuple[str, ...]
    #: Called with every record (file order) and a :class:`Converting`; adds the tasks.
    converter: Converter
    match_mode: str
    description: str
    #: A record field whose value becomes each task's ``group`` (per-group accuracy
    #: in reports), e.g. MMLU-Pro's ``category``; ``None``: no breakdown.
    breakdown: str | None = None
    #: The converter settings in effect, as recorded in the stream's provenance.
    settings: SettingsOf = no_settings
    #: Further columns kept when the file has them (parquet reads only named columns).
    optional_fields: tuple[str, ...] = ()
    #: How the feedback quotes the source's own answer (see :class:`..base.Stream`).
    quote_answer: QuoteAnswer | None = None

    def convert(self, records: Sequence[Record], options: ConvertOptions) -> list[BenchmarkSample]:
        """The stream's tasks in source order (limit not applied)."""
        building = Converting(self, options)
        self.converter(records, building)
        return building.samples


@dataclass
class Converting:
    """What a converter is given: the stream, the options, and the sample builder."""

    stream: HubStream
    options: ConvertOptions
    samples: list[BenchmarkSample] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.stream.name

    def add(
        self,
        record: Record,
        *,
        task_id: str,
        prompt: str,
        target: str,
        choices: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> BenchmarkSample:
        """Append the next task, built from ``record``."""
        if task_id in self._seen:
            raise DataError(f"stream {self.name!r}: the source has the task id {task_id!r} twice")
        self._seen.add(task_id)
        group: str | None = None
        if self.stream.breakdown is not None:
            value = record.get(self.stream.breakdown)
            group = None if value is None or str(value) == "" else str(value)
        sample = BenchmarkSample(
            task_id=task_id,
            stream=self.name,
            position=len(self.samples),
            prompt=prompt,
            target=target,
            match_mode=self.stream.match_mode,
            choices=tuple(choices),
            metadata={"source": self.stream.source.repo_id, **(metadata or {})},
            group=group,
        )
        # the same refusal as a JSONL task's: a target no answer could match, or more
        # options than letters, would silently score the whole stream as wrong
        check_sample(sample, f"stream {self.name!r}: task {task_id!r}", empty_options=True)
        self.samples.append(sample)
        return sample
