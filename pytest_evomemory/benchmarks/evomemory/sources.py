"""Where each Evo-Memory single-turn stream comes from, pinned to one upstream commit.

The paper (arXiv:2511.20857) released no data of its own, so every stream is read
from the public dataset it names, at a fixed revision: a run that silently picked up
an upstream edit would no longer be comparable with earlier runs or with the paper.
Changing a revision here is a deliberate, documented act (see docs/streams.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a source file is encoded, exactly as the upstream repository stores it.
SourceFormat = Literal["parquet", "csv", "jsonl"]


@dataclass(frozen=True)
class SourceSpec:
    """One upstream data file and the facts a user needs before fetching it."""

    stream: str
    repo_id: str
    #: A full 40-hex commit id, never a branch: the data must not move under us.
    revision: str
    #: Path of the file inside the dataset repository (also its path under the data dir).
    filename: str
    format: SourceFormat
    #: Fields a record must have; checked when a file is validated, so that a wrong
    #: or truncated file is refused before it is converted.
    required_fields: tuple[str, ...]
    #: Gated sets need an accepted licence on the hub and a token (``HF_TOKEN``).
    gated: bool
    license: str
    match_mode: str
    description: str

    @property
    def page_url(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo_id}"


AIME_2024 = SourceSpec(
    stream="aime_2024",
    repo_id="HuggingFaceH4/aime_2024",
    revision="2fe88a2f1091d5048c0f36abc874fb997b3dd99a",
    filename="data/train-00000-of-00001.parquet",
    format="parquet",
    required_fields=("id", "problem", "answer"),
    gated=False,
    license="not declared on the dataset card (problems are from the MAA's AIME 2024)",
    match_mode="aime",
    description="AIME 2024 I and II: 30 competition problems with integer answers 0-999",
)

GPQA_DIAMOND = SourceSpec(
    stream="gpqa_diamond",
    repo_id="Idavidrein/gpqa",
    revision="633f5ee89ab8ad4522a9f850766b73f62147ffdd",
    filename="gpqa_diamond.csv",
    format="csv",
    required_fields=(
        "Record ID",
        "Question",
        "Correct Answer",
        "Incorrect Answer 1",
        "Incorrect Answer 2",
        "Incorrect Answer 3",
    ),
    gated=True,
    license="CC-BY-4.0 (gated; the dataset card asks that examples are not revealed online)",
    match_mode="gpqa",
    description="GPQA Diamond: 198 graduate-level 4-option science questions",
)

MMLU_PRO = SourceSpec(
    stream="mmlu_pro",
    repo_id="TIGER-Lab/MMLU-Pro",
    revision="497c01e319905c102d71cac17c1eb89be1d79f39",
    filename="data/test-00000-of-00001.parquet",
    format="parquet",
    required_fields=("question_id", "question", "options", "answer", "answer_index", "category", "src"),
    gated=False,
    license="MIT",
    match_mode="choice",
    description="MMLU-Pro test split: up to 10-option questions in 14 categories (12,032 rows)",
)

TOOLBENCH = SourceSpec(
    stream="toolbench",
    repo_id="gorilla-llm/APIBench",
    revision="ac21e1892e634dfa25f8ad75f16cbdbfb0a5736d",
    filename="torchhub_eval.json",
    format="jsonl",
    required_fields=("code", "api_call", "provider", "api_data"),
    gated=False,
    license="Apache-2.0",
    match_mode="toolbench",
    description="Gorilla APIBench, TorchHub evaluation split: 186 'which API does this?' requests",
)

#: Canonical stream order of the benchmark (DESIGN.md): every run visits them so.
SOURCES: dict[str, SourceSpec] = {
    spec.stream: spec for spec in (AIME_2024, GPQA_DIAMOND, MMLU_PRO, TOOLBENCH)
}
STREAM_ORDER: tuple[str, ...] = tuple(SOURCES)
