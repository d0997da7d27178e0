"""Benchmark sources, by the name used in ``benchmark:`` of a benchmark config."""

from __future__ import annotations

import errno
from pathlib import Path

from ..config import BenchmarkConfig
from ..core.errors import ConfigError, DataError
from ..core.registry import Registry, is_reference, key_read_by_others, lazy
from ..core.validation import resolve_path
from ..evaluation import MATCH_MODES
from .base import BenchmarkSource, BenchmarkSpec, Stream, select_streams
from .usersource import open_user_source

#: Every benchmark a benchmark config may name besides a ``module:factory`` reference.
BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark")
BENCHMARKS.builtin(
    "sample", BenchmarkSpec("sample", lazy("pytest_evomemory.streams.sample:SampleBenchmark")),  # type: ignore[arg-type]
    owner=__name__,
)
BENCHMARKS.builtin(
    "files",
    BenchmarkSpec("files", lazy("pytest_evomemory.streams.jsonl:FilesBenchmark"), reads=frozenset({"files"})),  # type: ignore[arg-type]
    owner=__name__,
)
BENCHMARKS.builtin(
    "evomemory_single_turn",
    BenchmarkSpec(
        "evomemory_single_turn",
        lazy("pytest_evomemory.streams.evomemory:EvoMemorySingleTurn"),  # type: ignore[arg-type]
        reads=frozenset({"data_dir", "mmlu_pro_categories"}),
        upstream_files=True,
    ),
    owner=__name__,
)
BENCHMARKS.builtin(
    "locomo",
    BenchmarkSpec(
        "locomo", lazy("pytest_evomemory.streams.locomo:LocomoBenchmark"),  # type: ignore[arg-type]
        reads=frozenset({"data_dir", "ingest", "path"}),
        upstream_files=True,
    ),
    owner=__name__,
)
BENCHMARKS.builtin(
    "locomo_sample",
    BenchmarkSpec(
        "locomo_sample", lazy("pytest_evomemory.streams.locomo:LocomoSampleBenchmark"),  # type: ignore[arg-type]
        reads=frozenset({"ingest"}),
    ),
    owner=__name__,
)


def upstream_benchmarks() -> list[str]:
    """The registered benchmarks with pinned upstream files (``evomemory data``'s choices)."""
    return [name for name in BENCHMARKS.names() if BENCHMARKS.get(name).upstream_files]


def get_source(name: str) -> BenchmarkSource:
    if is_reference(name):
        return open_user_source(name)
    return BENCHMARKS.get(name).source()


def unread_benchmark_keys(config: BenchmarkConfig) -> str | None:
    """Why a key the chosen built-in benchmark never reads was given, or None: ``files``
    under ``benchmark: sample`` would run the sample, not the user's file. (A
    ``module:factory`` benchmark may read any key.)"""
    if is_reference(config.benchmark) or config.benchmark not in BENCHMARKS:
        return None
    found = key_read_by_others(BENCHMARKS, BENCHMARKS.get(config.benchmark).reads, config)
    if found is None:
        return None
    key, readers = found
    return (
        f"key '{key}' is read only by benchmark {' or '.join(readers)}, not by "
        f"{config.benchmark!r}; remove it, or set 'benchmark' to the one that reads it"
    )


def load_benchmark(
    config: BenchmarkConfig, base_dir: Path, source_file: str = "benchmark config", selected_by: str | None = None
) -> list[Stream]:
    """Load the selected streams, in canonical order, all-or-nothing (``selected_by``:
    the option that selected them, when the command line did)."""
    source = get_source(config.benchmark)
    config = _located(config, base_dir)
    names = select_streams(config, source.stream_names(config), source_file, selected_by)
    try:
        streams = source.load(config, base_dir, names)
    except OSError as error:
        # a data cache damaged by hand (a directory where a verified file was, a file
        # where a folder goes, a read-only folder): one line naming it, never a traceback
        raise DataError(
            f"{source_file}: benchmark {config.benchmark!r}: {_in_the_way(error)}; remove or "
            "replace what is in the way (a missing data-cache file is downloaded again) or fix its permissions"
        ) from None
    _check_tasks(streams)
    _check_match_modes(streams)
    return streams


def _located(config: BenchmarkConfig, base_dir: Path) -> BenchmarkConfig:
    """``path`` (a benchmark's own data file, e.g. a LoCoMo-format file) made absolute
    against the config's directory, here, once: every method of the source then sees
    the file the user means. (run.json keeps the path as written.)"""
    if config.path is None:
        return config
    given = Path(config.path).expanduser()
    return config.model_copy(update={"path": str(resolve_path(given if given.is_absolute() else base_dir / given))})


def _in_the_way(error: OSError) -> str:
    """What blocked reading or writing the stream data, in words: a rename names
    its destination (``filename2``), the place the user can look at."""
    where = error.filename2 if error.filename2 is not None else error.filename
    if where is None:
        return f"the stream data: {error.strerror or error}"
    if error.errno == errno.EISDIR:
        return f"{where} is a directory where a file is expected"
    if error.errno in (errno.EEXIST, errno.ENOTDIR):
        return f"{where} (or a folder on its way) is a file where a directory is expected"
    return f"{where}: {error.strerror or error}"


def _check_tasks(streams: list[Stream]) -> None:
    """Refuse, before any task runs, a stream with no task (it would pass having
    measured nothing) and two tasks of one stream under one id (their results would
    be recorded, resumed and reported as one task's)."""
    for stream in streams:
        file = stream.provenance.get("file")
        where = f"{file}: " if file else ""
        if not stream.samples:
            raise DataError(
                f"{where}stream {stream.name!r} holds no task after selection; give it tasks, or leave it out "
                "of 'streams'"
            )
        seen: set[str] = set()
        for sample in stream.samples:
            if sample.task_id in seen:
                raise DataError(
                    f"{where}stream {stream.name!r}: duplicate task id {sample.task_id!r}; give each task its own id"
                )
            seen.add(sample.task_id)


def _check_match_modes(streams: list[Stream]) -> None:
    """Refuse, before any task runs, a stream whose match mode no evaluator knows,
    and a task whose target its match mode could never match."""
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


__all__ = [
    "BENCHMARKS",
    "BenchmarkSource",
    "BenchmarkSpec",
    "Stream",
    "get_source",
    "load_benchmark",
    "upstream_benchmarks",
]
