"""Per-stream provenance and the one-line header that shows it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytest_evomemory.config import BenchmarkConfig, StreamFile
from pytest_evomemory.core.types import BenchmarkSample, Score, ScoredItem
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.streams.provenance import describe_provenance, provenance_line, unverified_streams

from .conftest import FakeHub, upstream_files


def test_header_lines_say_verified_or_unverified(hub: FakeHub, tmp_path: Path) -> None:
    streams = {s.name: s for s in load_benchmark(BenchmarkConfig(), tmp_path)}
    mmlu_sha = hashlib.sha256(upstream_files()["mmlu_pro"]).hexdigest()
    revision = streams["mmlu_pro"].provenance["revision"][:12]
    assert provenance_line(streams["mmlu_pro"]) == (
        f"mmlu_pro: TIGER-Lab/MMLU-Pro@{revision}:data/test-00000-of-00001.parquet "
        f"sha256 {mmlu_sha[:12]} (verified); 3 of 4 rows; categories=economics,engineering,philosophy"
    )
    assert provenance_line(streams["gpqa_diamond"]).endswith("(verified); 3 of 3 rows; seed=0")
    aime = provenance_line(streams["aime_2024"])
    assert aime.startswith("aime_2024: HuggingFaceH4/aime_2024@2fe88a2f1091:data/train-00000-of-00001.parquet")
    assert "UNVERIFIED" in aime and aime.endswith("3 of 3 rows")
    assert unverified_streams(list(streams.values())) == ["aime_2024", "toolbench"]
    assert all("\n" not in provenance_line(stream) for stream in streams.values())


def test_local_jsonl_streams_record_their_file(tmp_path: Path) -> None:
    data = tmp_path / "mine.jsonl"
    data.write_text('{"id": "a", "prompt": "p", "target": "t"}\n{"id": "b", "prompt": "q", "target": "u"}\n')
    config = BenchmarkConfig(benchmark="files", files=[StreamFile(name="mine", path=str(data))])
    (stream,) = load_benchmark(config, tmp_path)
    assert stream.provenance["file"] == str(data) and stream.provenance["repository"] is None
    assert stream.provenance["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert stream.provenance["tasks_converted"] == 2
    assert "(local file, not pinned)" in provenance_line(stream)
    assert unverified_streams([stream]) == []  # only hub streams have a pin to miss
    sample = load_benchmark(BenchmarkConfig(benchmark="sample"), tmp_path)
    assert all(s.provenance["sha256"] for s in sample)


def test_a_stream_without_provenance() -> None:
    assert provenance_line(Stream("x", (), "exact")) == "x: no provenance recorded"
    assert describe_provenance({}) == "no provenance recorded"


def test_group_reaches_the_scored_item_dict() -> None:
    score = Score(True, "A", "A", "A", "choice", "match")
    assert ScoredItem("s", "t", 0, score).document().group is None
    assert ScoredItem("s", "t", 0, score, group="law").document().group == "law"
    sample = BenchmarkSample("t", "s", 0, "p", "A", group="law")
    assert sample.to_dict()["group"] == "law" and BenchmarkSample("t", "s", 0, "p", "A").group is None
