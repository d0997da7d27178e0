"""The bundled sample streams: invented facts, so only memory can make them right.

Written for this project (no dataset content). Later tasks repeat or paraphrase
earlier ones, so an agent that learns from feedback gets visibly better along each
stream, while an agent without memory cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...config import BenchmarkConfig
from ..base import Stream
from ..jsonl import read_jsonl_stream

DATA_DIR = Path(__file__).parent

#: (stream name, file, match mode, description), in stream order.
SAMPLE_STREAMS: tuple[tuple[str, str, str, str], ...] = (
    ("sample_facts", "facts.jsonl", "exact", "short free-text answers about an invented town"),
    ("sample_choice", "choice.jsonl", "choice", "four-option questions about an invented archipelago"),
)


class SampleBenchmark:
    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return [name for name, *_ in SAMPLE_STREAMS]

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        table = {name: (file, mode, text) for name, file, mode, text in SAMPLE_STREAMS}
        return [
            read_jsonl_stream(DATA_DIR / table[name][0], name, table[name][1], config.limit, table[name][2])
            for name in names
        ]
