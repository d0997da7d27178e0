"""APIBench: an agent that answers with its record's own runnable call scores (almost) 100 %.

The records are authored in the upstream ``torchhub_eval.json`` schema, with the
upstream quirks in about their upstream proportions: references that are not valid
Python (MEAL-V2), ``**{...}`` splats, variable-valued arguments, ``:ref`` suffixes,
and code that omits an argument of its reference (Silero's ``pretrained=True``).
"""

from __future__ import annotations

import ast
import re

import pytest

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import TaskQAEvaluator
from pytest_evomemory.evaluation.toolbench import parse_call, toolbench
from pytest_evomemory.streams.evomemory.catalog import TOOLBENCH
from pytest_evomemory.streams.evomemory.stream import ConvertOptions

from . import corpus

EVALUATOR = TaskQAEvaluator()


def _output_field(record: dict[str, object], key: str) -> str:
    """A field of the record's ``###Output`` dict, which upstream writes as a Python repr."""
    output = str(record["code"]).split("###Output:", 1)[1].strip()
    value = ast.literal_eval(output)[key]
    assert isinstance(value, str)
    return value


def _last_hub_call(text: str) -> str:
    call = parse_call(text, "torch.hub.load")
    assert call is not None, text
    return call.source


def _figures(answers: list[str], samples: list[BenchmarkSample]) -> tuple[float, float]:
    scores = [EVALUATOR.score(sample, answer) for sample, answer in zip(samples, answers, strict=True)]
    api = sum(bool(score.details["api_match"]) for score in scores) / len(scores)
    acc = sum(score.correct for score in scores) / len(scores)
    return api, acc


@pytest.fixture(scope="module")
def records() -> list[dict[str, object]]:
    return corpus.toolbench_records(seed=7, size=186)


@pytest.fixture(scope="module")
def samples(records: list[dict[str, object]]) -> list[BenchmarkSample]:
    upstream = [{key: value for key, value in record.items() if key != "_api"} for record in records]
    return TOOLBENCH.convert(upstream, ConvertOptions())


@pytest.mark.parametrize("source", ["api_call", "code"])
def test_the_records_own_runnable_call_scores_at_least_97_percent(
    records: list[dict[str, object]], samples: list[BenchmarkSample], source: str
) -> None:
    answers = [_last_hub_call(_output_field(record, source)) for record in records]
    api, acc = _figures(answers, samples)
    assert api >= 0.97 and acc >= 0.97, (api, acc)
    meal = [i for i, record in enumerate(records) if "MEAL" in str(record["api_call"])]
    assert meal and all(EVALUATOR.score(samples[i], answers[i]).correct for i in meal)


def test_the_corpus_has_the_upstream_quirks(records: list[dict[str, object]]) -> None:
    references = [str(record["api_call"]) for record in records]
    invalid = [ref for ref in references if _not_python(ref)]
    assert invalid and all("MEAL-V2" in ref for ref in invalid)
    assert any("**{" in ref for ref in references)
    assert any("model_type=model_type" in ref for ref in references)


def _not_python(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return True
    return False


def _sample(target: str) -> BenchmarkSample:
    return BenchmarkSample("torchhub_1", "toolbench", 0, "Q", target, "toolbench")


MEAL = "torch.hub.load(repo_or_dir='szq0214/MEAL-V2', 'meal_v2', model='mealv2_resnest50_cutmix', pretrained=True)"


@pytest.mark.parametrize(
    ("reference", "answer", "api", "acc"),
    [
        # positional or keyword: the same parameters
        ("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)",
         "torch.hub.load(model='resnet50', repo_or_dir='pytorch/vision', pretrained=True)", True, True),
        ("torch.hub.load('pytorch/vision', 'resnet50', pretrained=True)",
         "torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)", True, True),
        ("torch.hub.load('pytorch/vision', 'resnet50', True)",
         "torch.hub.load('pytorch/vision', 'resnet50', True)", True, True),
        # a positional True is a setting, not part of which API is meant
        ("torch.hub.load('pytorch/vision', 'resnet50', True)",
         "torch.hub.load('pytorch/vision', 'resnet50', False)", True, False),
        # MEAL-V2: invalid reference, runnable answers in both spellings upstream uses
        (MEAL, "torch.hub.load('szq0214/MEAL-V2','meal_v2', 'mealv2_resnest50_cutmix', pretrained=True)", True, True),
        (MEAL, "torch.hub.load('szq0214/MEAL-V2', 'meal_v2', model='mealv2_resnest50_cutmix', pretrained=True)",
         True, True),
        (MEAL, "torch.hub.load('szq0214/MEAL-V2', 'meal_v2', 'mealv2_efficientnet_b0', pretrained=True)", False, False),
        (MEAL, "torch.hub.load('szq0214/MEAL-V2', 'mealv2_resnest50_cutmix', pretrained=True)", False, False),
        # **{...} splats are keyword arguments
        ("torch.hub.load(repo_or_dir='n/ntsnet', model='ntsnet', pretrained=True, **{'topN': 6, 'device':'cpu'})",
         "torch.hub.load('n/ntsnet', 'ntsnet', pretrained=True, topN=6, device='cpu')", True, True),
        ("torch.hub.load(repo_or_dir='n/ntsnet', model='ntsnet', pretrained=True, **{'topN': 6, 'device':'cpu'})",
         "torch.hub.load('n/ntsnet', 'ntsnet', pretrained=True, **{'topN': 4, 'device': 'cpu'})", True, False),
        # a variable-valued reference argument accepts any value
        ("torch.hub.load(repo_or_dir='N/D:torchhub', model='gpunet', pretrained=True, model_type=model_type)",
         "torch.hub.load('N/D', 'gpunet', pretrained=True, model_type='GPUNet-0')", True, True),
        ("torch.hub.load(repo_or_dir='N/D:torchhub', model='gpunet', pretrained=True, model_type=model_type)",
         "torch.hub.load('N/D', 'gpunet', pretrained=True)", True, True),
        # but a literal one must be equal
        ("torch.hub.load(repo_or_dir='N/D:torchhub', model='tacotron2', model_math='fp16')",
         "torch.hub.load('N/D:torchhub', 'tacotron2', model_math='fp32')", True, False),
    ],
)
def test_calls_compare_by_parameter(reference: str, answer: str, api: bool, acc: bool) -> None:
    score = toolbench(answer, _sample(reference))
    assert (score.details["api_match"], score.details["call_match"], score.correct) == (api, acc, acc), score.reason


def test_the_last_hub_call_of_an_answer_is_read_as_gorilla_reads_it() -> None:
    answer = "api_call: torch.hub.load('pytorch/vision', 'resnet18'); torch.hub.load('pytorch/vision', 'resnet50', pretrained=True)"
    score = toolbench(answer, _sample("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"))
    assert score.correct and re.search("resnet50", str(score.extracted))


def test_a_call_in_a_comment_of_the_api_call_is_no_call() -> None:
    # Gorilla parses the api_call part as Python: the call after '#' is a comment.
    answer = "api_call: torch.hub.load('pytorch/vision', 'resnet18') # better: torch.hub.load('pytorch/vision', 'resnet50', pretrained=True)"
    score = toolbench(answer, _sample("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"))
    assert not score.details["api_match"] and "resnet18" in str(score.extracted)


def test_an_answer_cut_off_mid_call_is_read_to_its_end() -> None:
    reference = "torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"
    score = toolbench("api_call: torch.hub.load('pytorch/vision', 'resnet50', pretrained=Tr", _sample(reference))
    assert score.details["api_match"] and not score.details["call_match"]
    closed_first = "api_call: torch.hub.load('pytorch/vision', 'resnet18'); torch.hub.load('pytorch/vision', 'resnet50'"
    assert not toolbench(closed_first, _sample(reference)).details["api_match"]  # the closed call wins


def test_escaped_quotes_of_a_dict_formatted_answer_are_quotes() -> None:
    answer = "{'domain': 'Classification', 'api_call': 'model = torch.hub.load(\\\\'pytorch/vision\\\\', \\\\'resnet50\\\\', pretrained=True)'}"
    assert "\\\\'" in answer
    score = toolbench(answer, _sample("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"))
    assert score.correct, score.reason


def test_a_mismatched_closing_quote_still_ends_the_argument() -> None:
    answer = "api_call: torch.hub.load('pytorch/vision\", 'resnet50', pretrained=True)"
    score = toolbench(answer, _sample("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"))
    assert score.correct, score.reason
    parsed = parse_call("f(a=\"it's\", b='x')")
    assert parsed is not None and parsed.arguments == {"a": "it's", "b": "x"}


def test_an_apostrophe_in_the_prose_does_not_hide_the_call() -> None:
    answer = "Here's what I'd use: torch.hub.load('pytorch/vision', 'resnet50', pretrained=True). It's fast."
    score = toolbench(answer, _sample("torch.hub.load(repo_or_dir='pytorch/vision', model='resnet50', pretrained=True)"))
    assert score.correct, score.reason
