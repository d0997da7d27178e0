"""Non-finite numbers: every artefact is strict JSON, and a NaN never ends a session.

A model's tool arguments may hold ``NaN``, ``-Infinity`` or ``1e999`` (Python's JSON
reader takes them); a user's agent may record ``Usage(nan, inf)``. Neither may end
the session with INTERNALERROR, and no artefact may hold a bare ``NaN`` that
``jq`` or a browser rejects: non-finite floats are written as the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (docs/artefacts.md), and token counts
that are not whole numbers are the agent's protocol violation, named at the task.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.summary import summarize
from pytest_evomemory.core.errors import ProtocolViolation
from pytest_evomemory.core.types import Usage
from pytest_evomemory.runtime.turn import RuntimeTurn
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    FEEDBACK_ACKNOWLEDGEMENT,
    final_answer,
    is_feedback,
    tool_call,
)
from pytest_evomemory.util.redaction import dumps_redacted, redact_strings, strict_number

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, tiny_run_config


def strict_loads(text: str) -> Any:
    """``json.loads`` as jq and browsers read JSON: NaN and Infinity are errors."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"not strict JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


def assert_every_artefact_is_strict_json(*roots: Path) -> int:
    """Parse every .json and every line of every .jsonl under ``roots`` strictly;
    returns how many documents were read."""
    count = 0
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix == ".json" and path.is_file():
                strict_loads(path.read_text(encoding="utf-8"))
                count += 1
            elif path.suffix == ".jsonl" and path.is_file():
                for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
                    if line.strip():
                        try:
                            strict_loads(line)
                        except ValueError as error:
                            raise AssertionError(f"{path}, line {number}: {error}") from None
                        count += 1
    return count


# --------------------------------------------------------------------------- the one encoder


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (float("1e999"), "Infinity"), (1.5, 1.5)],
)
def test_a_non_finite_float_is_spelled_as_a_string(value: float, spelled: object) -> None:
    assert strict_number(value) == spelled
    record = {"arguments": {"x": value, "list": [value]}, "usage": {"prompt_tokens": 3}}
    for options in ({"ensure_ascii": True, "sort_keys": True, "default": str}, {"indent": 2}, {"ensure_ascii": False}):
        decoded = strict_loads(dumps_redacted(record, **options))
        assert decoded["arguments"] == {"x": spelled, "list": [spelled]}
    assert redact_strings(record)["arguments"]["x"] == spelled


def test_a_float_subclass_is_spelled_too() -> None:
    class Score(float):
        pass

    assert strict_loads(dumps_redacted({"score": Score("nan")}))["score"] == "NaN"


@pytest.mark.parametrize(
    "usage",
    [
        Usage(math.nan, 3),  # type: ignore[arg-type]
        Usage(3, math.inf),  # type: ignore[arg-type]
        Usage(-1, 0),
        Usage(2.5, 0),  # type: ignore[arg-type]
        Usage(True, 0),
        Usage("12", 0),  # type: ignore[arg-type]
        Usage(None, 0),  # type: ignore[arg-type]
        Usage(10**30, 0),
    ],
    ids=["nan", "inf", "negative", "fraction", "bool", "string", "none", "absurd"],
)
def test_a_usage_that_is_not_whole_numbers_is_a_protocol_violation_naming_the_task(usage: Usage) -> None:
    turn = RuntimeTurn([], max_steps=3, task="mine/t7")
    with pytest.raises(ProtocolViolation, match=r"^mine/t7: the agent recorded token usage .*whole numbers of at least 0"):
        turn.record_usage(usage)
    assert turn.usage == Usage()


def test_whole_floats_are_token_counts() -> None:
    turn = RuntimeTurn([], max_steps=3)
    turn.record_usage(Usage(3.0, 4))  # type: ignore[arg-type]
    assert turn.usage == Usage(3, 4) and isinstance(turn.usage.prompt_tokens, int)


def test_summary_arithmetic_survives_non_finite_records() -> None:
    """A damaged record (a resume reads what is on disk) counts as 0, never a crash."""
    response = {
        "stream": "s", "kind": "task", "agent_turns": math.nan, "tool_calls": [], "memory_retains": "NaN",
        "memory_recalls": math.inf, "usage": {"prompt_tokens": math.nan, "completion_tokens": "Infinity"},
        "seconds": math.inf,
    }
    metrics = summarize(["s"], [{"stream": "s", "position": 0, "correct": True}], [response])
    overall = metrics["overall"].document().written()
    assert overall["prompt_tokens"] == 0 and overall["seconds"] == 0.0 and overall["agent_turns"] == 0
    strict_loads(dumps_redacted(overall))


# --------------------------------------------------------------------------- through the plugin

#: A model whose tool arguments hold every non-finite spelling Python's JSON reader takes.
NON_FINITE_ARGUMENTS = '{"answer": "0", "confidence": NaN, "low": -Infinity, "high": Infinity, "huge": 1e999}'

#: The user's agent: it records a NaN/inf usage in t0's task turn and answers every turn.
NAN_USAGE_AGENT = '''
import math

import pytest

from pytest_evomemory import Usage


class Counting:
    def reset(self):
        pass

    def respond(self, stimulus, turn):
        if stimulus.kind == "task" and stimulus.task_id == "t0":
            turn.record_usage(Usage(math.nan, math.inf))
        turn.record_usage(Usage(5, 7))
        answer = "Feedback recorded" if stimulus.kind == "feedback" else "0"
        turn.call_tool("final_answer", {"answer": answer, "score": math.nan})


@pytest.fixture(scope="session")
def evomemory_agent_factory():
    return lambda config, memory: Counting()
'''


def test_non_finite_numbers_leave_every_artefact_strict(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
) -> None:
    """Serial only: under ``-n 2`` the same controller writes the same records."""
    def policy(request: Any) -> Any:
        if is_feedback(request):
            return final_answer(FEEDBACK_ACKNOWLEDGEMENT)
        return tool_call("final_answer", NON_FINITE_ARGUMENTS)

    server = scripted_openai_server(policy)
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, model={"cache": True})
    result = pytester.runpytest(
        f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--json-report", f"--json-report-file={pytester.path / 'report.json'}",
    )
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    results = pytester.path / "results"
    assert assert_every_artefact_is_strict_json(pytester.path, isolated_cache) > 10
    transcript = [strict_loads(line) for line in (results / "transcripts" / "mine.jsonl").read_text().splitlines()]
    arguments = transcript[0]["tool_calls"][0]["arguments"]
    assert arguments == {"answer": "0", "confidence": "NaN", "low": "-Infinity", "high": "Infinity", "huge": "Infinity"}
    assert list(isolated_cache.rglob("*.json")), "the replies were cached"


@pytest.mark.parametrize("workers", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_a_nan_usage_fails_its_task_with_a_clear_error_not_the_session(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    pytester.makeconftest(NAN_USAGE_AGENT)
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, scripted_openai_server().base_url)
    result = pytester.runpytest(
        f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider", *workers,
        "--json-report", f"--json-report-file={pytester.path / 'report.json'}",
    )
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*ProtocolViolation: mine/t0: the agent recorded token usage prompt_tokens=nan, completion_tokens=inf; "
        "token counts must be whole numbers of at least 0*",
        "FAILED evomemory::test_task[[]mine/t0[]] - *",
    ])
    summary = strict_loads((pytester.path / "results" / "summary.json").read_text(encoding="utf-8"))
    assert (summary["overall"]["tasks"], summary["overall"]["errors"]) == (2, 1)
    assert summary["overall"]["prompt_tokens"] == 5 * 3  # the three turns that recorded a valid usage
    assert assert_every_artefact_is_strict_json(pytester.path) > 5
