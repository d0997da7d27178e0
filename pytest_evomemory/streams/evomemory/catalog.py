"""The four streams of the Evo-Memory single-turn benchmark, one declaration each.

This is the only place that names them: a declaration binds the pinned upstream
file, the fields the reader needs, the converter, the match mode, the breakdown
field and the settings recorded in provenance. A fifth stream is one more
:class:`~.stream.HubStream` here (and its converter). The order of :data:`STREAMS`
is the benchmark's canonical stream order (docs/design.md).
"""

from __future__ import annotations

from .converters import (
    convert_aime,
    convert_gpqa,
    convert_mmlu_pro,
    convert_toolbench,
    gpqa_settings,
    mmlu_pro_settings,
    quote_gpqa_answer,
    quote_mmlu_pro_answer,
)
from .sources import HubFile
from .stream import HubStream

AIME_2024 = HubStream(
    name="aime_2024",
    source=HubFile(
        repo_id="HuggingFaceH4/aime_2024",
        revision="2fe88a2f1091d5048c0f36abc874fb997b3dd99a",
        filename="data/train-00000-of-00001.parquet",
        format="parquet",
        rows=30,
        license="not declared on the dataset card (problems are from the MAA's AIME 2024)",
    ),
    fields=("id", "problem", "answer"),
    optional_fields=("url", "year"),
    converter=convert_aime,
    match_mode="aime",
    description="AIME 2024 I and II: 30 competition problems with integer answers 0-999",
)

GPQA_DIAMOND = HubStream(
    name="gpqa_diamond",
    source=HubFile(
        repo_id="Idavidrein/gpqa",
        revision="633f5ee89ab8ad4522a9f850766b73f62147ffdd",
        filename="gpqa_diamond.csv",
        format="csv",
        rows=198,
        size=1_373_492,
        sha256="41d1213cd7a4998605a26c2798500652572007161b3a92817ba46b35befcd305",
        gated=True,
        license="CC-BY-4.0 (gated; the dataset card asks that examples are not revealed online)",
    ),
    fields=(
        "Record ID",
        "Question",
        "Correct Answer",
        "Incorrect Answer 1",
        "Incorrect Answer 2",
        "Incorrect Answer 3",
    ),
    converter=convert_gpqa,
    settings=gpqa_settings,
    quote_answer=quote_gpqa_answer,
    match_mode="gpqa",
    description="GPQA Diamond: 198 graduate-level 4-option science questions",
)

MMLU_PRO = HubStream(
    name="mmlu_pro",
    source=HubFile(
        repo_id="TIGER-Lab/MMLU-Pro",
        # Upstream main after the July-2024 answer corrections (497c01e predates them).
        revision="b189ec765aa7ed75c8acfea42df31fdae71f97be",
        filename="data/test-00000-of-00001.parquet",
        format="parquet",
        rows=12_032,
        size=4_144_185,
        sha256="0e24a191921c2f453518a537a8b2117bd137e7714d4ef1565e9ba06c1ecb9ad8",
        license="MIT",
    ),
    fields=("question_id", "question", "options", "answer", "answer_index", "category", "src"),
    converter=convert_mmlu_pro,
    settings=mmlu_pro_settings,
    quote_answer=quote_mmlu_pro_answer,
    breakdown="category",
    match_mode="choice",
    description="MMLU-Pro test split: 3-10-option questions in 14 categories (12,032 rows)",
)

TOOLBENCH = HubStream(
    name="toolbench",
    source=HubFile(
        repo_id="gorilla-llm/APIBench",
        revision="ac21e1892e634dfa25f8ad75f16cbdbfb0a5736d",
        filename="torchhub_eval.json",
        format="jsonl",
        rows=186,
        license="Apache-2.0",
    ),
    fields=("code", "api_call", "provider", "api_data"),
    converter=convert_toolbench,
    match_mode="toolbench",
    description="Gorilla APIBench, TorchHub evaluation split: 186 'which API does this?' requests",
)

#: Every stream by name, in the benchmark's canonical order. Looked up at call time
#: (never captured at import), so a test can replace one declaration.
STREAMS: dict[str, HubStream] = {
    stream.name: stream for stream in (AIME_2024, GPQA_DIAMOND, MMLU_PRO, TOOLBENCH)
}
STREAM_ORDER: tuple[str, ...] = tuple(STREAMS)
