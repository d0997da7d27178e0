"""Turn upstream-native records into tasks, one function per stream.

Each converter keeps the source's own task id, its order, and its canonical answer;
it only adds what the agent must see (lettered options) and what reports need
(metadata). Positions, stream name, match mode, ``metadata.source``, the breakdown
``group`` and duplicate ids are handled by :class:`.stream.Converting`. Every
decision a reader of the results needs to know is in docs/streams.md: GPQA's option
order, MMLU-Pro's category filter, and what a ToolBench answer is compared with.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.errors import ConfigError, DataError
from ...core.types import BenchmarkSample
from ..jsonl import render_choices
from .readers import Record
from .stream import Converting, ConvertOptions

#: The MMLU-Pro categories the paper reports (Evo-Memory, Table 1), in the spelling
#: of the dataset's ``category`` field. Used when the config does not choose.
PAPER_MMLU_PRO_CATEGORIES: tuple[str, ...] = ("economics", "engineering", "philosophy")

#: Appended to every ToolBench request: the source question asks for "an API", the
#: scorer needs the call itself.
TOOLBENCH_INSTRUCTION = (
    "Answer with the single Python call that loads this API from PyTorch Hub, "
    "for example torch.hub.load(repo_or_dir='<owner>/<repo>', model='<entry point>', pretrained=True)."
)

#: Dropped from MMLU-Pro option lists before lettering, as TIGER-Lab's
#: evaluate_from_api.py does. The genuine test file has none; the rule only
#: matters for other revisions or the validation split.
MMLU_PRO_PADDING = "N/A"


def _text(record: Record, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _source_id(record: Record, key: str, where: str) -> str:
    """A record's own id as task-id text. An integral float (a column of ids re-saved as
    doubles, 60 -> 60.0) is read as the integer it holds, so the ids, and with them
    resume and paired comparisons, do not change with the file's column type."""
    value = record.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is None or isinstance(value, bool | float | list | dict) or str(value).strip() == "":
        raise DataError(f"{where}: field {key!r} must be an id (an integer or text), got {value!r}")
    return str(value)


def _scalar(value: Any) -> Any:
    """Metadata must stay JSON-friendly: numbers and strings pass, others become text."""
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


# --------------------------------------------------------------------------- AIME


def convert_aime(records: Sequence[Record], out: Converting) -> None:
    """The problem text as the prompt, the integer answer string as the target."""
    for index, record in enumerate(records):
        where = f"stream {out.name!r}: record {index}"
        task_id = _source_id(record, "id", where)
        answer = record.get("answer")
        if answer is None or str(answer).strip() == "":
            raise DataError(f"{where}: field 'answer' is empty")
        raw_id = record.get("id")
        metadata = {"source_id": _scalar(int(raw_id) if isinstance(raw_id, float) else raw_id)}
        for key in ("year", "url"):
            if key in record:
                metadata[key] = _scalar(record[key])
        number = aime_problem_number(record.get("url"))
        if number is not None:
            metadata["difficulty"] = number
        out.add(
            record,
            task_id=task_id,
            prompt=_text(record, "problem", where).strip(),
            # a column of answers re-saved as doubles reads 9.0: the answer is 9
            target=str(int(answer)) if isinstance(answer, float) and answer.is_integer() else str(answer),
            metadata=metadata,
        )


#: ``.../2024_AIME_I_Problems/Problem_7``: the problem's number in its exam.
_AIME_PROBLEM = re.compile(r"Problem_(\d{1,2})/?$")


def aime_problem_number(url: object) -> int | None:
    """An AIME problem's number (1-15) from its AoPS ``url``: AIME problems are set
    in rising difficulty, so the number is the source's own difficulty order."""
    match = _AIME_PROBLEM.search(url) if isinstance(url, str) else None
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------- GPQA

#: GPQA's difficulty fields: the question writer's estimate and the two expert
#: validators' (each one of four levels, named by the start of its text).
GPQA_DIFFICULTY_FIELDS = ("Writer's Difficulty Estimate", "Question Difficulty_EV_1", "Question Difficulty_EV_2")
GPQA_DIFFICULTY_LEVELS = (
    ("easy undergraduate", 1),
    ("hard undergraduate", 2),
    ("hard graduate", 3),
    ("post-graduate", 4),
)


def gpqa_difficulty(record: Record) -> float | None:
    """The mean of the estimates GPQA records for a question (1 easy undergraduate ..
    4 post-graduate), or None when it records none."""
    levels = []
    for key in GPQA_DIFFICULTY_FIELDS:
        value = record.get(key)
        text = value.strip().casefold() if isinstance(value, str) else ""
        level = next((number for prefix, number in GPQA_DIFFICULTY_LEVELS if text.startswith(prefix)), None)
        if level is not None:
            levels.append(level)
    return round(sum(levels) / len(levels), 6) if levels else None



def gpqa_permutations(count: int, seed: int) -> list[list[int]]:
    """The option order of each record: index 0 is the correct answer in the source.

    Mirrors openai/simple-evals (``random.Random(seed)``, then ``rng.sample(range(4), 4)``
    per record, in file order), so with seed 0 the letters equal simple-evals'.
    """
    rng = random.Random(seed)
    return [rng.sample(range(4), 4) for _ in range(count)]


def convert_gpqa(records: Sequence[Record], out: Converting) -> None:
    """Options shuffled by :func:`gpqa_permutations`; the target is the correct letter."""
    fields = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
    seed = out.options.seed
    for index, (record, permutation) in enumerate(
        zip(records, gpqa_permutations(len(records), seed), strict=True)
    ):
        where = f"stream {out.name!r}: record {index}"
        source_options = [_text(record, key, where) for key in fields]
        choices = tuple(source_options[i].strip() for i in permutation)
        question = _text(record, "Question", where).strip()
        metadata: dict[str, Any] = {
            "correct_answer": record["Correct Answer"],
            "permutation": list(permutation),
            "seed": seed,
            "high_level_domain": _scalar(record.get("High-level domain")),
            "subdomain": _scalar(record.get("Subdomain")),
        }
        difficulty = gpqa_difficulty(record)
        if difficulty is not None:
            metadata["difficulty"] = difficulty
        out.add(
            record,
            task_id=_text(record, "Record ID", where).strip(),
            prompt=render_choices(question, choices),
            target=chr(ord("A") + permutation.index(0)),
            choices=choices,
            metadata=metadata,
        )


def gpqa_settings(options: ConvertOptions) -> Mapping[str, Any]:
    return {"seed": options.seed}


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


def mmlu_pro_settings(options: ConvertOptions) -> Mapping[str, Any]:
    wanted = mmlu_pro_filter(options.mmlu_pro_categories)
    return {"categories": "all" if wanted is None else sorted(wanted)}


def convert_mmlu_pro(records: Sequence[Record], out: Converting) -> None:
    """Source order, filtered by category; options lettered as the source lists them."""
    wanted = mmlu_pro_filter(out.options.mmlu_pro_categories)
    for index, record in enumerate(records):  # before the filter, which reads every category
        _text(record, "category", f"stream {out.name!r}: record {index} (question_id {record.get('question_id')!r})")
    if wanted is not None:
        present = {str(record.get("category", "")).casefold() for record in records}
        unknown = sorted(wanted - present)
        if unknown:
            raise ConfigError(
                f"key 'mmlu_pro_categories': unknown MMLU-Pro categor{'y' if len(unknown) == 1 else 'ies'} "
                f"{', '.join(map(repr, unknown))}; the source has {', '.join(sorted(present))} "
                "(or use 'all')"
            )
    for index, record in enumerate(records):
        category = str(record.get("category", ""))
        if wanted is not None and category.casefold() not in wanted:
            continue
        where = f"stream {out.name!r}: record {index} (question_id {record.get('question_id')!r})"
        raw_options = record.get("options")
        if not isinstance(raw_options, list | tuple) or not all(isinstance(o, str) for o in raw_options):
            raise DataError(f"{where}: field 'options' must be a list of strings")
        answer = _text(record, "answer", where).strip()
        answer_at = ord(answer.upper()) - ord("A") if len(answer) == 1 else -1
        if not 0 <= answer_at < len(raw_options) or raw_options[answer_at] == MMLU_PRO_PADDING:
            raise DataError(f"{where}: answer {answer!r} does not name one of its {len(raw_options)} options")
        # Padding is dropped before lettering (the official script's rule); a letter
        # only moves if padding preceded the answer, which the genuine file never has.
        choices = tuple(option for option in raw_options if option != MMLU_PRO_PADDING)
        padding_before = sum(1 for option in raw_options[:answer_at] if option == MMLU_PRO_PADDING)
        question = _text(record, "question", where).strip()
        out.add(
            record,
            task_id=_source_id(record, "question_id", where),
            prompt=render_choices(question, choices),
            target=chr(ord("A") + answer_at - padding_before),
            choices=choices,
            metadata={
                "category": category,
                "src": _scalar(record.get("src")),
                "answer": answer,
                "answer_index": _scalar(record.get("answer_index")),
            },
        )
    if not out.samples:
        raise DataError(f"stream {out.name!r}: no MMLU-Pro record is in the selected categories")


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


def convert_toolbench(records: Sequence[Record], out: Converting) -> None:
    """Task ids are Gorilla's ``question_id`` (1-based line number), as its evaluator uses."""
    for index, record in enumerate(records):
        where = f"stream {out.name!r}: line {index + 1}"
        request = toolbench_instruction(_text(record, "code", where))
        if not request:
            raise DataError(f"{where}: field 'code' holds no ###Instruction text")
        api_data = record.get("api_data")
        if not isinstance(api_data, dict):
            raise DataError(f"{where}: field 'api_data' must be an object")
        out.add(
            record,
            task_id=f"torchhub_{index + 1}",
            prompt=f"{request}\n\n{TOOLBENCH_INSTRUCTION}",
            target=_text(record, "api_call", where),
            metadata={
                "question_id": index + 1,
                "provider": _scalar(record.get("provider")),
                "domain": _scalar(api_data.get("domain")),
                "framework": _scalar(api_data.get("framework")),
                "functionality": _scalar(api_data.get("functionality")),
                "api_name": _scalar(api_data.get("api_name")),
            },
        )


# --------------------------------------------------------------------------- feedback quotes

#: Label of MMLU-Pro's option text in the feedback's source answer.
MMLU_PRO_OPTION_FIELD = "options[answer_index]"


def quote_gpqa_answer(sample: BenchmarkSample) -> dict[str, str]:
    """GPQA's "Correct Answer" text, verbatim (the options are shuffled per task)."""
    text = sample.metadata.get("correct_answer")
    return {"Correct Answer": text} if isinstance(text, str) else {}


def quote_mmlu_pro_answer(sample: BenchmarkSample) -> dict[str, str]:
    """MMLU-Pro's ``answer`` letter and that option's text, verbatim.

    The converter letters the options after dropping "N/A" padding, so the scored
    target indexes ``choices``; the option it names is the source's answer option.
    """
    letter = sample.metadata.get("answer")
    if not isinstance(letter, str):
        return {}
    index = ord(sample.target) - ord("A") if len(sample.target) == 1 else -1
    if not 0 <= index < len(sample.choices):
        return {"answer": letter}
    return {"answer": letter, MMLU_PRO_OPTION_FIELD: sample.choices[index]}
