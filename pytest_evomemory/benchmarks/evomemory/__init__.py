"""The Evo-Memory single-turn benchmark: aime_2024, gpqa_diamond, mmlu_pro, toolbench."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...config import BenchmarkConfig
from ...errors import DataError
from ..base import Stream

STREAM_ORDER = ("aime_2024", "gpqa_diamond", "mmlu_pro", "toolbench")


class EvoMemorySingleTurn:
    def stream_names(self, config: BenchmarkConfig) -> Sequence[str]:
        return STREAM_ORDER

    def load(self, config: BenchmarkConfig, base_dir: Path, names: Sequence[str]) -> list[Stream]:
        raise DataError("the evomemory_single_turn streams are not implemented yet")
