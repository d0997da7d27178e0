"""Conversion of every upstream field into BenchmarkSample, per stream."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.core.errors import ConfigError, DataError
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.streams.evomemory.catalog import STREAMS
from pytest_evomemory.streams.evomemory.converters import (
    TOOLBENCH_INSTRUCTION,
    gpqa_permutations,
    toolbench_instruction,
)
from pytest_evomemory.streams.evomemory.stream import ConvertOptions

from .conftest import AIME_RECORDS, GPQA_RECORDS, MMLU_RECORDS, TOOLBENCH_RECORDS, FakeHub


def _streams(tmp_path: Path, **settings: object) -> dict[str, Stream]:
    config = BenchmarkConfig(benchmark="evomemory_single_turn", **settings)  # type: ignore[arg-type]
    return {stream.name: stream for stream in load_benchmark(config, tmp_path)}


def test_aime_fields(hub: FakeHub, tmp_path: Path) -> None:
    stream = _streams(tmp_path)["aime_2024"]
    assert stream.match_mode == "aime"
    first, _, third = stream.samples
    assert (first.task_id, first.stream, first.position) == ("60", "aime_2024", 0)
    assert first.prompt == AIME_RECORDS[0]["problem"]
    assert first.target == "9" and third.target == "099"  # exactly as the source spells it
    assert first.match_mode == "aime" and first.choices == ()
    assert dict(first.metadata) == {
        "source": "HuggingFaceH4/aime_2024",
        "source_id": 60,
        "year": "2024",
        "url": "https://example.invalid/aime/1",
    }
    assert "solution" not in first.metadata  # the worked solution would give the answer away


def test_gpqa_fields_and_documented_permutation(hub: FakeHub, tmp_path: Path) -> None:
    stream = _streams(tmp_path)["gpqa_diamond"]
    assert [s.task_id for s in stream.samples] == [r["Record ID"] for r in GPQA_RECORDS]
    rng = random.Random(0)  # simple-evals: one Random(0), rng.sample(range(4), 4) per row
    for position, (sample, record) in enumerate(zip(stream.samples, GPQA_RECORDS, strict=True)):
        permutation = rng.sample(range(4), 4)
        source = [
            record["Correct Answer"],
            record["Incorrect Answer 1"],
            record["Incorrect Answer 2"],
            record["Incorrect Answer 3"],
        ]
        assert sample.choices == tuple(source[i].strip() for i in permutation)
        assert sample.target == "ABCD"[permutation.index(0)]
        assert sample.choices["ABCD".index(sample.target)] == record["Correct Answer"].strip()
        assert sample.match_mode == "gpqa" and sample.position == position
        assert sample.prompt.startswith(record["Question"].strip() + "\n\nA. ")
        for letter, option in zip("ABCD", sample.choices, strict=True):
            assert f"\n{letter}. {option}" in sample.prompt
        assert sample.metadata["correct_answer"] == record["Correct Answer"]  # source text, untouched
        assert sample.metadata["permutation"] == permutation and sample.metadata["seed"] == 0
        assert sample.metadata["high_level_domain"] == record["High-level domain"]
        assert sample.metadata["subdomain"] == record["Subdomain"]


def test_gpqa_seed_changes_order_deterministically(hub: FakeHub, tmp_path: Path) -> None:
    assert gpqa_permutations(3, 7) == gpqa_permutations(3, 7) != gpqa_permutations(3, 0)
    seeded = _streams(tmp_path, seed=7)["gpqa_diamond"]
    assert [s.metadata["permutation"] for s in seeded.samples] == gpqa_permutations(3, 7)


def test_mmlu_pro_paper_categories_in_source_order(hub: FakeHub, tmp_path: Path) -> None:
    stream = _streams(tmp_path)["mmlu_pro"]
    assert [s.task_id for s in stream.samples] == ["70", "72", "73"]
    assert [s.position for s in stream.samples] == [0, 1, 2]
    economics, engineering, philosophy = stream.samples
    # Options exactly as the genuine file lists them: 3 to 10, no "N/A" padding.
    assert economics.choices == ("Rises", "Falls", "Unchanged")
    assert economics.prompt.endswith("\nA. Rises\nB. Falls\nC. Unchanged")
    assert len(philosophy.choices) == 4 and philosophy.prompt.endswith("\nD. Di T")
    assert len(engineering.choices) == 10 and engineering.prompt.endswith("\nJ. 16 N")
    assert engineering.target == "C" and philosophy.target == "B"
    assert [s.group for s in stream.samples] == ["economics", "engineering", "philosophy"]
    assert dict(engineering.metadata) == {
        "source": "TIGER-Lab/MMLU-Pro",
        "category": "engineering",
        "src": "stemez-Mechanics",
        "answer": "C",
        "answer_index": 2,
    }


def test_mmlu_pro_filter_is_configurable(hub: FakeHub, tmp_path: Path) -> None:
    assert [s.task_id for s in _streams(tmp_path, mmlu_pro_categories="all")["mmlu_pro"].samples] == [
        "70",
        "71",
        "72",
        "73",
    ]
    only_law = _streams(tmp_path, mmlu_pro_categories=["Law"])["mmlu_pro"]
    assert [s.task_id for s in only_law.samples] == ["71"]
    with pytest.raises(ConfigError, match="unknown MMLU-Pro category 'astrology'"):
        _streams(tmp_path, mmlu_pro_categories=["astrology"])


def test_mmlu_pro_letter_moves_past_inner_padding() -> None:
    """Not in the genuine test file, but the official script drops "N/A" options."""
    record = dict(MMLU_RECORDS[0], options=["x", "N/A", "y", "z"], answer="C", answer_index=2)
    everything = ConvertOptions(mmlu_pro_categories="all")
    (sample,) = STREAMS["mmlu_pro"].convert([record], everything)
    assert sample.choices == ("x", "y", "z") and sample.target == "B"
    with pytest.raises(DataError, match="answer 'B' does not name"):
        STREAMS["mmlu_pro"].convert([dict(record, answer="B")], everything)


def test_every_stream_but_mmlu_pro_has_no_group(hub: FakeHub, tmp_path: Path) -> None:
    streams = _streams(tmp_path, mmlu_pro_categories="all")
    assert [s.group for s in streams["mmlu_pro"].samples] == ["economics", "law", "engineering", "philosophy"]
    for name in ("aime_2024", "gpqa_diamond", "toolbench"):
        assert {s.group for s in streams[name].samples} == {None}


def test_a_declared_breakdown_field_fills_group_generically() -> None:
    """Breakdown is a declaration, not MMLU-Pro code: any stream may name a field."""
    from dataclasses import replace

    gpqa = replace(STREAMS["gpqa_diamond"], breakdown="High-level domain")
    samples = gpqa.convert(GPQA_RECORDS, ConvertOptions())
    assert [s.group for s in samples] == ["Physics", "Chemistry", "Biology"]
    assert samples[0].to_dict()["group"] == "Physics"


def test_duplicate_task_ids_are_refused_for_every_stream() -> None:
    with pytest.raises(DataError, match="stream 'aime_2024': the source has the task id '60' twice"):
        STREAMS["aime_2024"].convert([AIME_RECORDS[0], AIME_RECORDS[0]], ConvertOptions())


def test_toolbench_fields(hub: FakeHub, tmp_path: Path) -> None:
    stream = _streams(tmp_path)["toolbench"]
    assert stream.match_mode == "toolbench"
    first, second = stream.samples
    assert (first.task_id, second.task_id) == ("torchhub_1", "torchhub_2")
    assert first.prompt == (
        "Give me an API that labels invented fruit in photos.\n\n" + TOOLBENCH_INSTRUCTION
    )
    assert "###Output" not in first.prompt and "fruit_r18" not in first.prompt  # no answer leak
    assert first.target == TOOLBENCH_RECORDS[0]["api_call"]
    assert dict(first.metadata) == {
        "source": "gorilla-llm/APIBench",
        "question_id": 1,
        "provider": "PyTorch",
        "domain": "Classification",
        "framework": "PyTorch",
        "functionality": "Invented",
        "api_name": "FruitNet",
    }
    assert toolbench_instruction("no markers at all") == "no markers at all"


def test_limit_is_first_n_and_order_is_stable(hub: FakeHub, tmp_path: Path) -> None:
    full = _streams(tmp_path)
    limited = _streams(tmp_path, limit=2)
    for name, stream in limited.items():
        assert stream.samples == full[name].samples[:2]
    assert _streams(tmp_path) == full  # identical on every run


def test_bad_record_names_stream_and_field(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"stream 'aime_2024': record 0: field 'problem'"):
        STREAMS["aime_2024"].convert([dict(AIME_RECORDS[0], problem="")], ConvertOptions())


def test_a_converted_choice_task_is_checked_as_a_jsonl_one() -> None:
    """More options than letters would make targets past Z that no answer can match:
    refused like a JSONL task with 27 options, naming the stream and task. An empty
    option of an upstream file is kept as the file has it."""
    everything = ConvertOptions(mmlu_pro_categories="all")
    options = [f"option {i}" for i in range(27)]
    too_many = dict(MMLU_RECORDS[0], options=options, answer="A", answer_index=0)
    with pytest.raises(DataError, match=r"stream 'mmlu_pro': task '.+': 27 choices, but at most 26"):
        STREAMS["mmlu_pro"].convert([too_many], everything)
    with_empty = dict(MMLU_RECORDS[0], options=["x", "", "y", "z"], answer="C", answer_index=2)
    (sample,) = STREAMS["mmlu_pro"].convert([with_empty], everything)
    assert sample.choices == ("x", "", "y", "z") and sample.target == "C"
