"""Benchmark sources, by the name used in ``benchmark:`` of a benchmark config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import BenchmarkConfig
from ..errors import ConfigError
from ..factories import load_factory
from .base import BenchmarkSource, Stream, select_streams


def _sample() -> BenchmarkSource:
    from .sample import SampleBenchmark

    return SampleBenchmark()


def _files() -> BenchmarkSource:
    from .jsonl import FilesBenchmark

    return FilesBenchmark()


def _evomemory_single_turn() -> BenchmarkSource:
    from .evomemory import EvoMemorySingleTurn

    return EvoMemorySingleTurn()


def _locomo() -> BenchmarkSource:
    from .locomo import LocomoBenchmark

    return LocomoBenchmark()


def _locomo_sample() -> BenchmarkSource:
    from .locomo import LocomoSampleBenchmark

    return LocomoSampleBenchmark()


BENCHMARKS: dict[str, Callable[[], BenchmarkSource]] = {
    "sample": _sample,
    "files": _files,
    "evomemory_single_turn": _evomemory_single_turn,
    "locomo": _locomo,
    "locomo_sample": _locomo_sample,
}


def get_source(name: str) -> BenchmarkSource:
    if name in BENCHMARKS:
        return BENCHMARKS[name]()
    if ":" in name:
        source = load_factory(name, "benchmark")()
        return source  # type: ignore[no-any-return]
    raise ConfigError(
        f"unknown benchmark {name!r}; use one of {', '.join(BENCHMARKS)} or a "
        "'package.module:factory' reference"
    )


def load_benchmark(config: BenchmarkConfig, base_dir: Path, source_file: str = "benchmark config") -> list[Stream]:
    """Load the selected streams, in canonical order, all-or-nothing."""
    source = get_source(config.benchmark)
    names = select_streams(config, source.stream_names(config), source_file)
    streams = source.load(config, base_dir, names)
    _check_match_modes(streams)
    return streams


def _check_match_modes(streams: list[Stream]) -> None:
    """Refuse a stream whose match mode no evaluator knows, before any task runs."""
    from ..evaluation import MATCH_MODES

    for stream in streams:
        for sample in stream.samples:
            if sample.match_mode not in MATCH_MODES:
                where = stream.provenance.get("file") if stream.match_mode == sample.match_mode else None
                task = "" if stream.match_mode == sample.match_mode else f" (task {sample.task_id!r} sets it)"
                raise ConfigError(
                    f"stream {stream.name!r}{f' ({where})' if where else ''} uses unknown match mode "
                    f"{sample.match_mode!r}{task}; known modes: {', '.join(sorted(MATCH_MODES))}; use one of "
                    "them, or register your own with pytest_evomemory.register_match_mode"
                )


__all__ = ["BENCHMARKS", "BenchmarkSource", "Stream", "get_source", "load_benchmark"]
