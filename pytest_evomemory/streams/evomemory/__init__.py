"""The Evo-Memory single-turn benchmark: aime_2024, gpqa_diamond, mmlu_pro, toolbench.

Each stream is declared once in :mod:`.catalog` (pinned source file, reader fields,
converter), materialized on first use into a local data directory and verified
against its pin (:mod:`.materialize`), then converted into
:class:`~pytest_evomemory.core.types.BenchmarkSample` objects. Loading is all-or-nothing:
every selected stream is materialized and converted before any is returned, so a
run never starts with one of them missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...config import BenchmarkConfig
from ...core.errors import ConfigError, DataError
from ...evaluation import toolbench as _toolbench  # noqa: F401  (registers "toolbench")
from ..base import Stream, apply_limit
from . import catalog
from .hub import OFFLINE_ADVICE, HubAccess, HubUnreachable
from .integrity import LocalFile, fetch_advice
from .materialize import DATA_DIR_ENV, default_data_dir, materialize, resolve_data_dir
from .stream import ConvertOptions, HubStream


class HubBenchmark:
    """A benchmark whose streams are :class:`HubStream` declarations.

    ``benchmark: evomemory_single_turn`` is this class over :data:`.catalog.STREAMS`;
    a ``package.module:factory`` benchmark can return one over its own declarations.
    """

    def __init__(self, name: str = "evomemory_single_turn", streams: Mapping[str, HubStream] | None = None):
        self.name = name
        self._streams = streams

    @property
    def streams(self) -> Mapping[str, HubStream]:
        # Read at call time, so that replacing a catalog entry (a test) takes effect.
        return catalog.STREAMS if self._streams is None else self._streams

    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return tuple(self.streams)

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        data_dir = resolve_data_dir(config.data_dir, base_dir)
        options = ConvertOptions(seed=config.seed, mmlu_pro_categories=config.mmlu_pro_categories)
        failures: list[DataError] = []
        streams: list[Stream] = []
        access = HubAccess()  # one probe of the hub for all streams, and only if one must download
        # Every stream is attempted so that one run reports every problem at once;
        # any failure still means no stream is returned (and no task runs).
        for name in names:
            try:
                streams.append(load_stream(self.streams[name], data_dir, options, config.limit, access))
            except ConfigError:
                raise
            except DataError as error:
                failures.append(error)
        if failures:
            raise DataError(
                f"all {len(self.streams)} {self.name} streams are required and "
                f"{len(failures)} could not be loaded (data dir {data_dir}){_per_stream(failures)}"
            )
        return streams


def _per_stream(failures: Sequence[DataError]) -> str:
    """The streams' failures, after the header: a cause every stream shares (an
    unwritable data directory) once, on the same line, naming the streams; else one
    line per cause. When the hub cannot be reached, that is said once, then each
    stream's missing file on its own line."""
    unreachable = [error for error in failures if isinstance(error, HubUnreachable)]
    if unreachable and len(unreachable) == len(failures):
        return f"; {unreachable[0].problem}; {OFFLINE_ADVICE}:" + "".join(f"\n  {e.short}" for e in unreachable)
    prefix = re.compile(r"^stream '([^']*)': ")
    causes: dict[str, list[str]] = {}
    for failure in failures:
        text = " ".join(str(failure).split())
        match = prefix.match(text)
        causes.setdefault(text[match.end():] if match else text, []).append(match.group(1) if match else "?")
    lines = [
        f"stream{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}: {cause}" for cause, names in causes.items()
    ]
    return f": {lines[0]}" if len(lines) == 1 else ":" + "".join(f"\n  {line}" for line in lines)


#: ``benchmark: evomemory_single_turn``.
EvoMemorySingleTurn = HubBenchmark


def load_stream(
    spec: HubStream, data_dir: Path, options: ConvertOptions, limit: int | None, access: HubAccess | None = None
) -> Stream:
    """One stream, materialized, verified and converted, ``limit`` applied as the first N tasks."""
    local, records = materialize(spec, data_dir, access)
    try:
        samples = spec.convert(records, options)
    except DataError as error:  # a record no task can be made of: name the file and the way out
        raise DataError(f"{error} (in {local.path}); {fetch_advice(spec.source, local.path)}") from None
    selected = apply_limit(samples, limit)
    return Stream(
        spec.name,
        selected,
        spec.match_mode,
        spec.description,
        provenance=hub_provenance(spec, local, len(records), len(samples), len(selected), options),
        breakdown=spec.breakdown,
        quote_answer=spec.quote_answer,
    )


def hub_provenance(
    spec: HubStream, local: LocalFile, rows: int, converted: int, selected: int, options: ConvertOptions
) -> dict[str, Any]:
    """Where a stream's tasks came from, as run.json records it (docs/streams.md)."""
    source = spec.source
    return {
        "repository": source.repo_id,
        "revision": source.revision,
        "file": source.filename,
        "path": str(local.path),
        "size": local.size,
        "sha256": local.sha256,
        "pinned": source.pinned,
        "verified": local.verified,
        "rows_read": rows,
        "tasks_converted": converted,
        "tasks_selected": selected,
        "settings": dict(spec.settings(options)),
        "breakdown": spec.breakdown,
    }


__all__ = [
    "DATA_DIR_ENV",
    "ConvertOptions",
    "EvoMemorySingleTurn",
    "HubBenchmark",
    "HubStream",
    "default_data_dir",
    "hub_provenance",
    "load_stream",
]
