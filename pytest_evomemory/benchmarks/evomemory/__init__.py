"""The Evo-Memory single-turn benchmark: aime_2024, gpqa_diamond, mmlu_pro, toolbench.

Each stream is read from its upstream dataset at a pinned revision (see
:mod:`.sources` and docs/streams.md), materialized on first use into a local data
directory, and converted into :class:`~pytest_evomemory.types.BenchmarkSample`
objects. Loading is all-or-nothing: every selected stream is materialized and
converted before any is returned, so a run never starts with one of them missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...config import BenchmarkConfig
from ...errors import ConfigError, DataError
from ...evaluation import toolbench as _toolbench  # noqa: F401  (registers "toolbench")
from ..base import Stream, apply_limit
from .converters import ConvertOptions, convert
from .materialize import DATA_DIR_ENV, default_data_dir, materialize, resolve_data_dir
from .sources import SOURCES, STREAM_ORDER, SourceSpec


class EvoMemorySingleTurn:
    """``benchmark: evomemory_single_turn`` — the paper's four single-turn streams."""

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return STREAM_ORDER

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        data_dir = resolve_data_dir(config.data_dir, base_dir)
        options = ConvertOptions(seed=config.seed, mmlu_pro_categories=config.mmlu_pro_categories)
        failures: list[str] = []
        streams: list[Stream] = []
        # Every stream is attempted so that one run reports every problem at once;
        # any failure still means no stream is returned (and no task runs).
        for name in names:
            spec = SOURCES[name]
            try:
                streams.append(load_stream(spec, data_dir, options, config.limit))
            except ConfigError:
                raise
            except DataError as error:
                failures.append(str(error))
        if failures:
            raise DataError(
                "all four evomemory_single_turn streams are required and "
                f"{len(failures)} could not be loaded (data dir {data_dir}):\n  " + "\n  ".join(failures)
            )
        return streams


def load_stream(spec: SourceSpec, data_dir: Path, options: ConvertOptions, limit: int | None) -> Stream:
    """One stream, materialized and converted, ``limit`` applied as the first N tasks."""
    _, records = materialize(spec, data_dir)
    samples = convert(spec, records, options)
    return Stream(spec.stream, apply_limit(samples, limit), spec.match_mode, spec.description)


__all__ = [
    "DATA_DIR_ENV",
    "SOURCES",
    "STREAM_ORDER",
    "EvoMemorySingleTurn",
    "default_data_dir",
    "load_stream",
]
