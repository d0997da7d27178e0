"""Turn upstream-native records into :class:`BenchmarkSample` objects.

Each converter keeps the source's own task id, its order, and its canonical answer;
it only adds what the agent must see (lettered options) and what reports need
(metadata). Every decision that a reader of the results needs to know is in
docs/streams.md: GPQA's option order, MMLU-Pro's "N/A" padding and category filter,
and what a ToolBench answer is compared with.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...errors import ConfigError, DataError
from ...types import BenchmarkSample
from ..jsonl import render_choices
from .readers import Record
from .sources import AIME_2024, GPQA_DIAMOND, MMLU_PRO, TOOLBENCH, SourceSpec

#: The MMLU-Pro categories the paper reports (Evo-Memory, Table 1), in the spelling
#: of the dataset's ``category`` field. Used when the config does not choose.
PAPER_MMLU_PRO_CATEGORIES: tuple[str, ...] = ("economics", "engineering", "philosophy")

#: Appended to every ToolBench request: the source question asks for "an API", the
#: scorer needs the call itself.
TOOLBENCH_INSTRUCTION = (
    "Answer with the single Python call that loads this API from PyTorch Hub, "
    "for example torch.hub.load(repo_or_dir='<owner>/<repo>', model='<entry point>', pretrained=True)."
)

Converter = Callable[[Sequence[Record], str, "ConvertOptions"], list[BenchmarkSample]]


class ConvertOptions:
    """The benchmark-config settings that change what a converter produces."""

    def __init__(self, seed: int = 0, mmlu_pro_categories: Sequence[str] | str | None = None) -> None:
        self.seed = seed
        self.mmlu_pro_categories = mmlu_pro_categories


def _text(record: Record, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _scalar(value: Any) -> Any:
    """Metadata must stay JSON-friendly: numbers and strings pass, others become text."""
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _unique(samples: list[BenchmarkSample], stream: str) -> list[BenchmarkSample]:
    seen: set[str] = set()
    for sample in samples:
        if sample.task_id in seen:
            raise DataError(f"stream {stream!r}: the source has the task id {sample.task_id!r} twice")
        seen.add(sample.task_id)
    return samples


# --------------------------------------------------------------------------- AIME


def convert_aime(records: Sequence[Record], stream: str, options: ConvertOptions) -> list[BenchmarkSample]:
    """The problem text as the prompt, the integer answer string as the target."""
    samples: list[BenchmarkSample] = []
    for index, record in enumerate(records):
        where = f"stream {stream!r}: record {index}"
        task_id = record.get("id")
        if task_id is None or str(task_id) == "":
            raise DataError(f"{where}: field 'id' is empty")
        answer = record.get("answer")
        if answer is None or str(answer).strip() == "":
            raise DataError(f"{where}: field 'answer' is empty")
        metadata = {"source": AIME_2024.repo_id, "source_id": _scalar(task_id)}
        for key in ("year", "url"):
            if key in record:
                metadata[key] = _scalar(record[key])
        samples.append(
            BenchmarkSample(
                task_id=str(task_id),
                stream=stream,
                position=len(samples),
                prompt=_text(record, "problem", where).strip(),
                target=answer if isinstance(answer, str) else str(answer),
                match_mode=AIME_2024.match_mode,
                metadata=metadata,
            )
        )
    return _unique(samples, stream)


# --------------------------------------------------------------------------- GPQA


def gpqa_permutations(count: int, seed: int) -> list[list[int]]:
    """The option order of each record: index 0 is the correct answer in the source.

    Mirrors openai/simple-evals (``random.Random(seed)``, then ``rng.sample(range(4), 4)``
    per record, in file order), so with seed 0 the letters equal simple-evals'.
    """
    rng = random.Random(seed)
    return [rng.sample(range(4), 4) for _ in range(count)]


def convert_gpqa(records: Sequence[Record], stream: str, options: ConvertOptions) -> list[BenchmarkSample]:
    """Options shuffled by :func:`gpqa_permutations`; the target is the correct letter."""
    fields = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
    samples: list[BenchmarkSample] = []
    for index, (record, permutation) in enumerate(
        zip(records, gpqa_permutations(len(records), options.seed), strict=True)
    ):
        where = f"stream {stream!r}: record {index}"
        source_options = [_text(record, key, where) for key in fields]
        choices = tuple(source_options[i].strip() for i in permutation)
        correct = permutation.index(0)
        question = _text(record, "Question", where).strip()
        samples.append(
            BenchmarkSample(
                task_id=_text(record, "Record ID", where).strip(),
                stream=stream,
                position=len(samples),
                prompt=render_choices(question, choices),
                target=chr(ord("A") + correct),
                match_mode=GPQA_DIAMOND.match_mode,
                choices=choices,
                metadata={
                    "source": GPQA_DIAMOND.repo_id,
                    "correct_answer": record["Correct Answer"],
                    "permutation": list(permutation),
                    "seed": options.seed,
                    "high_level_domain": _scalar(record.get("High-level domain")),
                    "subdomain": _scalar(record.get("Subdomain")),
                },
            )
        )
    return _unique(samples, stream)


# --------------------------------------------------------------------------- MMLU-Pro


def mmlu_pro_filter(selection: Sequence[str] | str | None) -> frozenset[str] | None:
    """The categories to keep (casefolded), or ``None`` for all of them."""
    if selection == "all":
        return None
    if selection is None:
        return frozenset(PAPER_MMLU_PRO_CATEGORIES)
    if isinstance(selection, str):
        selection = [selection]
    return frozenset(name.strip().casefold() for name in selection)


def convert_mmlu_pro(
    records: Sequence[Record], stream: str, options: ConvertOptions
) -> list[BenchmarkSample]:
    """Source order, filtered by category; "N/A" padding options are dropped."""
    wanted = mmlu_pro_filter(options.mmlu_pro_categories)
    if wanted is not None:
        present = {str(record.get("category", "")).casefold() for record in records}
        unknown = sorted(wanted - present)
        if unknown:
            raise ConfigError(
                f"key 'mmlu_pro_categories': unknown MMLU-Pro categor{'y' if len(unknown) == 1 else 'ies'} "
                f"{', '.join(map(repr, unknown))}; the source has {', '.join(sorted(present))} "
                "(or use 'all')"
            )
    samples: list[BenchmarkSample] = []
    for index, record in enumerate(records):
        category = str(record.get("category", ""))
        if wanted is not None and category.casefold() not in wanted:
            continue
        where = f"stream {stream!r}: record {index} (question_id {record.get('question_id')!r})"
        raw_options = record.get("options")
        if not isinstance(raw_options, list | tuple) or not all(isinstance(o, str) for o in raw_options):
            raise DataError(f"{where}: field 'options' must be a list of strings")
        answer = _text(record, "answer", where).strip()
        answer_at = ord(answer.upper()) - ord("A") if len(answer) == 1 else -1
        if not 0 <= answer_at < len(raw_options) or raw_options[answer_at] == "N/A":
            raise DataError(f"{where}: answer {answer!r} does not name one of its {len(raw_options)} options")
        # The official evaluation drops "N/A" padding before lettering the options; a
        # letter only moves if padding preceded the answer (not seen upstream).
        choices = tuple(option for option in raw_options if option != "N/A")
        letter = chr(ord("A") + answer_at - sum(1 for o in raw_options[:answer_at] if o == "N/A"))
        question = _text(record, "question", where).strip()
        samples.append(
            BenchmarkSample(
                task_id=str(record["question_id"]),
                stream=stream,
                position=len(samples),
                prompt=render_choices(question, choices),
                target=letter,
                match_mode=MMLU_PRO.match_mode,
                choices=choices,
                metadata={
                    "source": MMLU_PRO.repo_id,
                    "category": category,
                    "src": _scalar(record.get("src")),
                    "answer": answer,
                    "answer_index": _scalar(record.get("answer_index")),
                },
            )
        )
    if not samples:
        raise DataError(f"stream {stream!r}: no MMLU-Pro record is in the selected categories")
    return _unique(samples, stream)


# --------------------------------------------------------------------------- ToolBench


def toolbench_instruction(code: str) -> str:
    """The request text of an APIBench record: what follows ``###Instruction:`` and
    precedes ``###Output:`` (the output part holds the reference answer and is never shown)."""
    text = code
    marker = "###Instruction:"
    if marker in text:
        text = text.split(marker, 1)[1]
    text = text.split("###Output", 1)[0]
    return text.strip()


def convert_toolbench(
    records: Sequence[Record], stream: str, options: ConvertOptions
) -> list[BenchmarkSample]:
    """Task ids are Gorilla's ``question_id`` (1-based line number), as its evaluator uses."""
    samples: list[BenchmarkSample] = []
    for index, record in enumerate(records):
        where = f"stream {stream!r}: line {index + 1}"
        request = toolbench_instruction(_text(record, "code", where))
        if not request:
            raise DataError(f"{where}: field 'code' holds no ###Instruction text")
        api_data = record.get("api_data")
        if not isinstance(api_data, dict):
            raise DataError(f"{where}: field 'api_data' must be an object")
        samples.append(
            BenchmarkSample(
                task_id=f"torchhub_{index + 1}",
                stream=stream,
                position=len(samples),
                prompt=f"{request}\n\n{TOOLBENCH_INSTRUCTION}",
                target=_text(record, "api_call", where),
                match_mode=TOOLBENCH.match_mode,
                metadata={
                    "source": TOOLBENCH.repo_id,
                    "question_id": index + 1,
                    "provider": _scalar(record.get("provider")),
                    "domain": _scalar(api_data.get("domain")),
                    "framework": _scalar(api_data.get("framework")),
                    "functionality": _scalar(api_data.get("functionality")),
                    "api_name": _scalar(api_data.get("api_name")),
                },
            )
        )
    return _unique(samples, stream)


CONVERTERS: dict[str, Converter] = {
    AIME_2024.stream: convert_aime,
    GPQA_DIAMOND.stream: convert_gpqa,
    MMLU_PRO.stream: convert_mmlu_pro,
    TOOLBENCH.stream: convert_toolbench,
}


def convert(spec: SourceSpec, records: Iterable[Record], options: ConvertOptions) -> list[BenchmarkSample]:
    return CONVERTERS[spec.stream](list(records), spec.stream, options)
