"""The toolbench match mode: "API" (details) versus "Acc." (Score.correct)."""

from __future__ import annotations

import pytest

from pytest_evomemory.core.types import BenchmarkSample
from pytest_evomemory.evaluation import MATCH_MODES
from pytest_evomemory.evaluation.toolbench import parse_call, toolbench

REFERENCE = "torch.hub.load(repo_or_dir='pytorch/vision', model='deeplabv3_resnet50', pretrained=True)"


def _sample(target: str = REFERENCE) -> BenchmarkSample:
    return BenchmarkSample("torchhub_1", "toolbench", 0, "prompt", target, "toolbench")


def test_registered_when_the_benchmark_loads() -> None:
    import pytest_evomemory.streams.evomemory  # noqa: F401

    assert MATCH_MODES.get("toolbench").score is toolbench


@pytest.mark.parametrize(
    ("answer", "api", "call"),
    [
        (REFERENCE, True, True),
        (
            "model = torch.hub.load('pytorch/vision:v0.10.0', 'deeplabv3_resnet50', pretrained=True)",
            True,
            True,
        ),
        (
            '```python\ntorch.hub.load("pytorch/vision", model="deeplabv3_resnet50", pretrained=True, verbose=False)\n```',
            True,
            True,
        ),
        (
            "<<<domain>>>: Segmentation, <<<api_call>>>: torch.hub.load('pytorch/vision', 'deeplabv3_resnet50', "
            "pretrained=True), <<<api_provider>>>: PyTorch",
            True,
            True,
        ),
        ("torch.hub.load('pytorch/vision', 'deeplabv3_resnet50')", True, False),
        ("torch.hub.load('pytorch/vision', 'deeplabv3_resnet50', pretrained=False)", True, False),
        ("torch.hub.load('pytorch/vision', 'fcn_resnet50', pretrained=True)", False, False),
        ("torch.hub.load('facebookresearch/vision', 'deeplabv3_resnet50', pretrained=True)", False, False),
        ("torchvision.models.segmentation.deeplabv3_resnet50(pretrained=True)", False, False),
        ("I would use DeepLabV3.", False, False),
    ],
)
def test_api_and_call_match(answer: str, api: bool, call: bool) -> None:
    score = toolbench(answer, _sample())
    assert (score.details["api_match"], score.details["call_match"]) == (api, call)
    assert score.correct is call and score.value == (1.0 if call else 0.0)
    assert score.match_mode == "toolbench" and score.target == REFERENCE and score.reason


def test_details_explain_the_verdict() -> None:
    score = toolbench("Use torch.hub.load('pytorch/vision', 'deeplabv3_resnet50', device='cpu')", _sample())
    assert score.extracted == "torch.hub.load('pytorch/vision', 'deeplabv3_resnet50', device='cpu')"
    assert score.details["missing_arguments"] == ["pretrained"]
    assert score.details["extra_arguments"] == ["device"]
    assert score.details["candidate_function"] == "torch.hub.load"
    assert "missing pretrained" in score.reason
    wrong = toolbench("torch.hub.load('pytorch/vision', 'fcn_resnet50', pretrained=True)", _sample())
    assert "wrong API" in wrong.reason and "fcn_resnet50" in wrong.reason
    none = toolbench("no idea", _sample())
    assert none.extracted is None and none.reason == "no function call found in the answer"


def test_lenient_parse_of_upstream_reference_that_is_not_python() -> None:
    # A real APIBench reference has a positional argument after a keyword one; its
    # record's runnable code passes the variant as the entry point's first argument.
    odd = "torch.hub.load(repo_or_dir='owner/meal', 'meal_v2', model='meal_r50', pretrained=True)"
    parsed = parse_call(odd)
    assert parsed is not None and parsed.arguments["repo_or_dir"] == "owner/meal"
    assert (parsed.arguments["model"], parsed.arguments["*0"]) == ("meal_v2", "meal_r50")
    good = toolbench("torch.hub.load('owner/meal','meal_v2', 'meal_r50', pretrained=True)", _sample(odd))
    assert good.details["api_match"] is True and good.correct
    other = toolbench("torch.hub.load('owner/meal', 'meal_v2', 'meal_r18', pretrained=True)", _sample(odd))
    assert other.details["api_match"] is False


def test_strings_with_commas_and_parentheses() -> None:
    parsed = parse_call("f(a='x, (y)', b=[1, 2], c={'k': (3, 4)})")
    assert parsed is not None
    assert parsed.arguments == {"a": "x, (y)", "b": "[1, 2]", "c": "{'k': (3, 4)}"}
