"""A stream's mode is owned by the stream, and run.json can say which scorer scored it."""

from __future__ import annotations

import pytest

import pytest_evomemory
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.core.types import BenchmarkSample, Score
from pytest_evomemory.evaluation import MATCH_MODES, register_match_mode, scorer_identity


@pytest.mark.parametrize("name", ["exact", "choice", "gpqa", "aime", "toolbench"])
def test_a_built_in_mode_cannot_be_replaced(name: str) -> None:
    original = MATCH_MODES.get(name)

    def mine(answer: str, sample: BenchmarkSample) -> Score:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match=f"match mode '{name}' is built in .* under a new name"):
        register_match_mode(name)(mine)
    with pytest.raises(ConfigError):
        MATCH_MODES.unregister(name)
    assert MATCH_MODES.get(name) is original


def test_a_user_mode_under_a_new_name_is_fine() -> None:
    @register_match_mode("_test_identity_mode")
    def mine(answer: str, sample: BenchmarkSample) -> Score:
        raise AssertionError("never called")

    try:
        identity = scorer_identity("_test_identity_mode")
        assert identity["module"] == __name__ and identity["builtin"] is False
        assert str(identity["function"]).endswith("mine")
    finally:
        MATCH_MODES.unregister("_test_identity_mode")


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("exact", "pytest_evomemory.evaluation.modes"),
        ("choice", "pytest_evomemory.evaluation.choice"),
        ("gpqa", "pytest_evomemory.evaluation.gpqa"),
        ("aime", "pytest_evomemory.evaluation.aime"),
        ("toolbench", "pytest_evomemory.evaluation.toolbench"),
    ],
)
def test_scorer_identity_of_built_in_modes(name: str, module: str) -> None:
    identity = scorer_identity(name)
    assert identity["module"] == module and identity["function"] == name
    assert identity["package"] == "pytest-evomemory"
    assert identity["version"] == pytest_evomemory.__version__
    assert identity["builtin"] is True
    if name == "aime":
        dependencies = identity["dependencies"]
        assert isinstance(dependencies, dict) and dependencies["math-verify"]


def test_unknown_mode_has_no_identity() -> None:
    with pytest.raises(ConfigError, match="unknown match mode 'no_such_mode'"):
        scorer_identity("no_such_mode")


def test_a_conftest_replacing_a_built_in_mode_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_evomemory import register_match_mode

        @register_match_mode("gpqa")
        def lenient(answer, sample):
            raise AssertionError("never called")
        """
    )
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*match mode 'gpqa' is built in*under a new name*"])
