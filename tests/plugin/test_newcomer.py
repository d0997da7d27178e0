"""The plugin as a newcomer meets it in their own agent repository (issue 18):
opt-in, built-in configs by name, node ids that can be given back, progress and
verdicts, and the JSON a dashboard reads."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.configs import builtin_names
from pytest_evomemory.rundir import SCHEMA_VERSION

USER_TEST = """
def test_unit():
    assert 1 + 1 == 2
"""


def agent_repo(pytester: pytest.Pytester, config: str = "sample_memory") -> None:
    """A repository with its own test and the benchmark configured in pyproject.toml."""
    pytester.makepyprojecttoml(f'[tool.pytest.ini_options]\nevomemory_config = "{config}"\n')
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_unit.py").write_text(USER_TEST, encoding="utf-8")


def results(pytester: pytest.Pytester) -> Path:
    return pytester.path / "evomemory-results"


# ----------------------------------------------------------------------------- opt-in


def test_plain_pytest_runs_only_the_users_tests(pytester: pytest.Pytester) -> None:
    agent_repo(pytester)
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest("tests/test_unit.py").assert_outcomes(passed=1)
    assert not results(pytester).exists()


def test_evomemory_flag_runs_the_ini_config_beside_the_users_tests(pytester: pytest.Pytester) -> None:
    agent_repo(pytester)
    result = pytester.runpytest("--evomemory", "tests/")
    result.assert_outcomes(passed=25)
    assert (results(pytester) / "sample_memory" / "summary.json").is_file()


def test_evomemory_flag_alone_runs_the_benchmark_alone(pytester: pytest.Pytester) -> None:
    agent_repo(pytester)
    pytester.runpytest("--evomemory").assert_outcomes(passed=24)


def test_deselecting_every_task_neither_fails_a_threshold_nor_touches_results(pytester: pytest.Pytester) -> None:
    agent_repo(pytester)
    result = pytester.runpytest("--evomemory", "--evomemory-min-accuracy=0.99", "-m", "not evomemory", "tests/")
    result.assert_outcomes(passed=1, deselected=24)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["evomemory: no benchmark task ran; *"])
    assert not (results(pytester) / "sample_memory" / "summary.json").exists()


def test_evomemory_flag_without_an_ini_config_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: evomemory: --evomemory needs a run config: set evomemory_config*"])


def test_a_setting_without_the_benchmark_is_refused_not_ignored(pytester: pytest.Pytester) -> None:
    agent_repo(pytester)
    result = pytester.runpytest("--evomemory-set=benchmark.limit=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: evomemory: --evomemory-set changes a run config, but the benchmark is off; *"])


# ----------------------------------------------------------------------------- built-in configs


def test_a_builtin_config_runs_by_name_from_any_directory(pytester: pytest.Pytester) -> None:
    assert {"sample_memory", "sample_no_memory"} <= set(builtin_names())
    pytester.runpytest("--evomemory-config=sample_no_memory").assert_outcomes(passed=24)
    pytester.runpytest("--evomemory-config=builtin:sample_memory", "--evomemory-limit=2").assert_outcomes(passed=4)
    assert (results(pytester) / "sample_memory").is_dir() and (results(pytester) / "sample_no_memory").is_dir()


def test_an_unknown_builtin_name_lists_the_choices(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory-config=sample_memroy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: evomemory: no built-in run config named 'sample_memroy' (did you mean 'sample_memory'?); built-in configs: *sample_memory*"])


def test_a_file_wins_over_a_builtin_of_the_same_name(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", sample_memory="name: mine\nbenchmark: {benchmark: sample, limit: 1}\nagent: {kind: recall_baseline}\n")
    pytester.runpytest("--evomemory-config=sample_memory.yaml").assert_outcomes(passed=2)
    assert (results(pytester) / "mine").is_dir()


# ----------------------------------------------------------------------------- node ids and JUnit


def test_a_copied_node_id_reruns_that_one_task(pytester: pytest.Pytester) -> None:
    listed = pytester.runpytest("--evomemory-config=sample_memory", "--collect-only", "-q")
    ids = [line for line in listed.outlines if "test_task[" in line]
    assert ids[0] == "evomemory::test_task[sample_facts/f01]"
    result = pytester.runpytest("--evomemory-config=sample_memory", "-v", ids[4], "::test_task[sample_choice/c02]")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["evomemory::test_task[[]sample_facts/f05] *", "evomemory::test_task[[]sample_choice/c02] *"])


def test_a_task_id_without_the_module_part_also_selects_it(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory-config=sample_memory", "-v", "test_task[sample_choice/c02]")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["evomemory::test_task[[]sample_choice/c02] *"])


def test_a_node_id_of_no_task_is_one_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    """Not pytest's "not found: .../site-packages/.../items.py::test_task (no match in any of
    [<Module items.py>])": a task past --evomemory-limit, or a misspelt id, says what to do."""
    result = pytester.runpytest("--evomemory-config=sample_memory", "--evomemory-limit=2",
                                "evomemory::test_task[sample_facts/f03]")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: evomemory: no task 'evomemory::test_task[[]sample_facts/f03]' in this run (*); "
        "add --collect-only -q to the same command to list the tasks' ids"
    ])
    assert "items.py" not in result.stderr.str()


def test_junit_classname_is_not_empty_and_properties_carry_the_score(pytester: pytest.Pytester) -> None:
    pytester.runpytest("--evomemory-config=sample_memory", "--evomemory-limit=1", "--junitxml=junit.xml")
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    first = next(iter(cases))
    assert first.get("classname") == "evomemory"
    properties = {p.get("name"): p.get("value") for p in first.iter("property")}
    assert properties["evomemory_stream"] == "sample_facts" and properties["evomemory_correct"] == "False"


# ----------------------------------------------------------------------------- progress and verdicts


def test_wrong_answers_have_their_own_letter_and_word_but_still_pass(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--evomemory-config=sample_memory", "-v", "-k", "sample_facts")
    result.assert_outcomes(passed=12, deselected=12)
    result.stdout.fnmatch_lines(["*test_task[[]sample_facts/f01] WRONG*"])
    assert any("] CORRECT" in line for line in result.outlines)
    quiet = pytester.runpytest("--evomemory-config=sample_memory", "-k", "sample_facts")
    quiet.stdout.fnmatch_lines(["evomemory www.w.w.....*"])  # one whole line of letters


def test_each_stream_reports_its_progress_and_final_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nevomemory_progress_interval = 0\n")
    result = pytester.runpytest("--evomemory-config=sample_memory")
    lines = [line for line in result.outlines if line.startswith("evomemory sample_facts:")]
    assert len(lines) == 12
    assert lines[0].startswith("evomemory sample_facts: 1/12  acc 0.0%  errors 0  violations 0")
    assert lines[-1].startswith("evomemory sample_facts: 12/12  acc 58.3%") and lines[-1].endswith("eta done")
    quiet = pytester.runpytest("--evomemory-config=sample_memory", "-q")
    finals = [line for line in quiet.outlines if line.startswith("evomemory sample_")]
    assert [line.split(":")[0] for line in finals] == ["evomemory sample_facts", "evomemory sample_choice"]
    assert all("12/12" in line for line in finals)
    silent = pytester.runpytest("--evomemory-config=sample_memory", "-qq")
    assert not [line for line in silent.outlines if line.startswith("evomemory sample_")]


# Progress under xdist comes from the controller: asserted by the -n 2 session of
# tests/plugin/test_control_arm.py::test_a_memory_stream_stays_whole_on_one_worker_and_the_run_equals_the_serial_one.


# Marks its one model call as a response-cache replay, as TinyAgent does for a hit.
CACHED_AGENT = """
class FromCache:
    def respond(self, stimulus, turn):
        turn.begin_step()
        turn.add_message({"role": "assistant", "content": "replayed", "cached": True})
        answer = "Feedback recorded" if stimulus.kind == "feedback" else "teal"
        turn.call_tool("final_answer", {"answer": answer})

    def reset(self):
        pass

def create(config, memory):
    return FromCache()
"""


def test_answers_served_from_the_response_cache_say_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(cached_agent=CACHED_AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", run=(
        "name: cached\nbenchmark: {benchmark: sample, limit: 2, streams: [sample_facts]}\n"
        "agent: {kind: 'cached_agent:create', memory_strategy: deterministic_recall}\n"
    ))
    result = pytester.runpytest("--evomemory-config=run.yaml", "--json-report", "--json-report-file=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["evomemory sample_facts: 2/2  acc 50.0% * cached 100%  eta done"])
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert [test["metadata"]["evomemory"]["cached"] for test in report["tests"]] == [True, True]


# ----------------------------------------------------------------------------- JSON for dashboards


def test_json_report_carries_each_tasks_metadata_and_the_runs_identity(pytester: pytest.Pytester) -> None:
    pytester.runpytest(
        "--evomemory-config=sample_memory", "--evomemory-limit=2",
        "--json-report", "--json-report-file=report.json",
    ).assert_outcomes(passed=4)
    report: dict[str, Any] = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    first = report["tests"][0]
    assert first["nodeid"] == "evomemory::test_task[sample_facts/f01]"
    task = first["metadata"]["evomemory"]
    assert set(task) >= {"stream", "position", "correct", "extracted", "target", "reason", "tokens",
                         "seconds", "cached", "violation"}
    assert (task["stream"], task["position"], task["correct"], task["target"]) == ("sample_facts", 0, False, "teal")
    assert task["cached"] is False and task["violation"] is None and task["seconds"] >= 0
    block = report["evomemory"]
    assert block["schema_version"] == SCHEMA_VERSION and [arm["name"] for arm in block["arms"]] == ["sample_memory"]
    identity, summary = block["arms"][0]["identity"], block["arms"][0]["summary"]
    assert summary["run"] == "sample_memory"
    assert identity["agent"] == {
        "kind": "recall_baseline", "memory_strategy": "deterministic_recall", "options": {},
        "class": "pytest_evomemory.agents.baseline:RecallBaselineAgent", "factory": "pytest_evomemory.agents.factory:build_agent",
    }
    assert identity["model"] is None and identity["memory"]["backend"] == "inprocess"
    assert identity["memory"]["class"] == "pytest_evomemory.memory.inprocess:InProcessMemory"
    assert summary["versions"]["pytest-evomemory"] and len(summary["config_fingerprint"]) == 64
    assert summary["overall"]["tasks"] == 4
    assert task["arm"] == "sample_memory"  # one shape for one arm and for several
