"""The user's own code that the run calls (a ``module:factory`` benchmark source, an
agent handing the turn wrong values or calling ``sys.exit``) fails with one line
naming it and what to fix, through either entry point: a benchmark source before any
task (exit 4, nothing written), an agent's turn as that turn's failure with every
task still recorded. Never a traceback from inside the plugin, never an internal
error (exit 3), never a task recorded under another task's id."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.core.errors import ProtocolViolation
from pytest_evomemory.runtime.turn import RuntimeTurn

#: A benchmark source of the user's; each case below replaces one of its parts.
SOURCE = '''
from pytest_evomemory.streams.base import Stream
from pytest_evomemory.core.types import BenchmarkSample


def task(i, task_id=None, **fields):
    values = dict(task_id=task_id or f"t{i}", stream="mine", position=i, prompt=f"Say {i}", target=str(i))
    values.update(fields)
    return BenchmarkSample(**values)


def names():
    return ["mine"]


def load(asked):
    return [Stream("mine", (task(0), task(1)), "exact")]


class Source:
    def stream_names(self, config):
        return names()

    def load(self, config, base_dir, asked):
        return load(asked)


def make():
    return Source()
'''

#: case -> (code appended to SOURCE, what the refusal says after "benchmark factory ...")
CASES: dict[str, tuple[str, str]] = {
    "factory_raises": ("def make():\n    raise RuntimeError('no data')\n", "raised RuntimeError: no data (at "),
    "factory_wants_arguments": ("def make(config):\n    return Source()\n", "cannot be called with 0 argument(s)"),
    "factory_returns_no_source": ("def make():\n    return 42\n", "does not implement the BenchmarkSource protocol"),
    "stream_names_raises": ("def names():\n    raise KeyError('x')\n", "stream_names() raised KeyError"),
    "stream_names_a_string": ("def names():\n    return 'mine'\n", "stream_names() returned a str; return a list"),
    "stream_names_twice": ("def names():\n    return ['mine', 'mine']\n", "stream_names() lists 'mine' twice"),
    "load_raises": ("def load(asked):\n    raise ValueError('broken')\n", "load() raised ValueError: broken"),
    "load_returns_none": ("def load(asked):\n    return None\n", "load() returned None; return a list"),
    "load_another_stream": (
        "def load(asked):\n    return [Stream('other', (task(0),), 'exact')]\n",
        "load() was asked for streams ['mine'] and returned ['other']",
    ),
    "task_not_a_sample": (
        "def load(asked):\n    return [Stream('mine', ({'task_id': 't0'},), 'exact')]\n",
        "a task is a dict; make each task a pytest_evomemory.BenchmarkSample",
    ),
    "task_of_another_stream": (
        "def load(asked):\n    return [Stream('mine', (task(0, stream='zzz'),), 'exact')]\n",
        "task 't0' says it belongs to stream 'zzz'",
    ),
    "target_none": (
        "def load(asked):\n    return [Stream('mine', (task(0, target=None),), 'exact')]\n",
        "task 't0': target must be text, got None",
    ),
    # checked for every source, the built-in ones too
    "duplicate_task_id": (
        "def load(asked):\n    return [Stream('mine', (task(0), task(1, 't0')), 'exact')]\n",
        "stream 'mine': duplicate task id 't0'; give each task its own id",
    ),
    "no_task": ("def load(asked):\n    return [Stream('mine', (), 'exact')]\n", "stream 'mine' holds no task"),
}

_modules = itertools.count()


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, benchmark: str, agent: str = "{}") -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "run.yaml"
    run.write_text(
        f"name: user\noutput_dir: results\nbenchmark: {benchmark}\nagent: {agent}\nmemory: {{backend: inprocess}}\n",
        encoding="utf-8",
    )
    return run


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_benchmark_source_is_refused_before_any_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    code, expected = CASES[case]
    module = f"user_source_{case}_{next(_modules)}"  # a fresh module: no import cache between cases
    (tmp_path / f"{module}.py").write_text(SOURCE + code, encoding="utf-8")
    run = _project(tmp_path, monkeypatch, f"{{benchmark: '{module}:make'}}")
    status = evomemory(["run", "--config", str(run), "-q"])
    captured = capsys.readouterr()
    assert status == 4, captured.out + captured.err
    error = captured.err.strip()
    assert len(error.splitlines()) == 1, error
    assert expected in error and str(run) in error, error
    assert "internal error" not in error and "Traceback" not in captured.out + captured.err
    assert not (tmp_path / "results").exists()


def test_a_working_benchmark_source_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"user_source_ok_{next(_modules)}"
    (tmp_path / f"{module}.py").write_text(SOURCE, encoding="utf-8")
    run = _project(tmp_path, monkeypatch, f"{{benchmark: '{module}:make'}}")
    assert evomemory(["run", "--config", str(run), "-q"]) == 0
    scores = (tmp_path / "results" / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["task_id"] for line in scores] == ["t0", "t1"]


def test_a_broken_benchmark_source_is_one_line_through_pytest(pytester: pytest.Pytester) -> None:
    """The plugin's door: the same line as a usage error (it was an INTERNALERROR)."""
    pytester.makepyfile(user_source_pytest=SOURCE + "def load(asked):\n    raise ValueError('broken')\n")
    pytester.syspathinsert()
    run = pytester.path / "run.yaml"
    run.write_text("benchmark: {benchmark: 'user_source_pytest:make'}\nagent: {}\n", encoding="utf-8")
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str().strip()
    assert len(error.splitlines()) == 1 and "load() raised ValueError: broken" in error, error
    assert "INTERNALERROR" not in result.stdout.str() + error


# --------------------------------------------------------------------------- an agent's turn


AGENT = '''
import sys
from pytest_evomemory.agents.baseline import RecallBaselineAgent


class Agent(RecallBaselineAgent):
    def respond(self, stimulus, turn):
        if stimulus.kind == "task":
            BODY
        return super().respond(stimulus, turn)


def create(config, memory):
    return Agent(config, memory)
'''

#: case -> (the agent's task turn, what each task's recorded error says)
TURNS: dict[str, tuple[str, str]] = {
    "sys_exit": ("sys.exit(3)", "SystemExit: 3"),
    "message_not_a_mapping": ("turn.add_message(object())", "turn.add_message takes a chat message mapping"),
    "message_contains_itself": (
        "m = {'role': 'user'}; m['self'] = m; turn.add_message(m)", "nests more than 100 levels deep",
    ),
}


@pytest.mark.parametrize("case", sorted(TURNS))
def test_an_agent_misusing_its_turn_fails_that_turn_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    body, expected = TURNS[case]
    module = f"user_agent_{case}_{next(_modules)}"
    (tmp_path / f"{module}.py").write_text(AGENT.replace("BODY", body), encoding="utf-8")
    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"p{i}", "target": f"a{i}"}) + "\n" for i in range(2)),
        encoding="utf-8",
    )
    run = _project(
        tmp_path, monkeypatch, "{benchmark: files, files: [{name: mine, path: tasks.jsonl}]}", f"{{kind: '{module}:create'}}"
    )
    status = evomemory(["run", "--config", str(run), "-q"])
    captured = capsys.readouterr()
    assert status == 1, captured.out + captured.err  # failed tasks, not an internal error (3)
    assert "internal error" not in captured.err and "Traceback" not in captured.out + captured.err
    scores = [json.loads(line) for line in (tmp_path / "results" / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [score["task_id"] for score in scores] == ["t0", "t1"]  # every task recorded, under its own id
    assert all(expected in score["error"] for score in scores), scores


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("final_answer", None, "error: tool arguments must be a JSON object, not NoneType"),
        ("final_answer", ["x"], "error: tool arguments must be a JSON object, not list"),
        (5, {"answer": "x"}, "error: unknown tool '5'"),
    ],
)
def test_a_tool_call_of_the_wrong_shape_is_answered_as_an_error(name: Any, arguments: Any, expected: str) -> None:
    turn = RuntimeTurn([], max_steps=2, task="mine/t0")
    assert turn.call_tool(name, arguments).startswith(expected)
    assert not turn.finished and turn.tool_calls[-1].error


def test_arguments_that_contain_themselves_are_answered_as_an_error() -> None:
    turn = RuntimeTurn([], max_steps=2)
    arguments: dict[str, Any] = {"answer": "x"}
    arguments["self"] = arguments
    assert "nest more than 100 levels" in turn.call_tool("final_answer", arguments)
    with pytest.raises(ProtocolViolation, match="add_message takes a chat message mapping"):
        turn.add_message("hello")  # type: ignore[arg-type]


def test_a_match_mode_whose_own_target_check_raises_is_refused_naming_the_mode() -> None:
    """A user's ``check_target`` is code we did not write: it raising is one line
    naming the mode and its file, not an error inside the plugin."""
    from pytest_evomemory.core.errors import ConfigError
    from pytest_evomemory.core.types import BenchmarkSample
    from pytest_evomemory.evaluation.modes import MATCH_MODES, register_match_mode
    from pytest_evomemory.streams.checks import check_sample

    def broken_check(sample: BenchmarkSample) -> str | None:
        raise KeyError("units")

    register_match_mode("_test_raising_check", check_target=broken_check)(lambda answer, sample: None)
    try:
        sample = BenchmarkSample(task_id="t1", stream="mine", position=0, prompt="Say 1", target="1",
                                 match_mode="_test_raising_check")
        with pytest.raises(ConfigError) as refused:
            check_sample(sample, "stream 'mine': tasks.jsonl, line 1")
    finally:
        MATCH_MODES.unregister("_test_raising_check")
    message = str(refused.value)
    assert message.startswith("match mode '_test_raising_check': its check_target raised KeyError: 'units'")
    assert "test_user_code.py" in message and "fix the check" in message


def test_a_target_no_answer_matches_names_its_task_once() -> None:
    from pytest_evomemory.core.errors import DataError
    from pytest_evomemory.core.types import BenchmarkSample
    from pytest_evomemory.streams.checks import check_sample

    sample = BenchmarkSample(task_id="q7", stream="mine", position=0, prompt="Pick", target="C",
                             choices=("yes", "no"), match_mode="choice")
    with pytest.raises(DataError) as refused:
        check_sample(sample, "stream 'mine'")
    assert str(refused.value).startswith("stream 'mine': task 'q7': the target 'C' is neither a letter in A-B")
    assert str(refused.value).count("'q7'") == 1
