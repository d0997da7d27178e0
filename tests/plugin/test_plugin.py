"""The plugin as a user runs it: pytest with --evomemory-config in some repository."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl

Writer = Callable[..., Path]


def summary_of(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "summary.json").read_text(encoding="utf-8"))


def test_main_job_runs_in_a_fresh_directory_prints_the_table_and_writes_artefacts(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-p", "no:randomly")
    result.assert_outcomes(passed=24)
    result.stdout.fnmatch_lines([
        "*evomemory: sample_memory*",
        "stream*tasks*correct*errors*accuracy*stimuli*agent turns*",
        "sample_facts*12*7*0*58.3%*24*24*",
        "sample_choice*12*7*0*58.3%*24*24*",
        "overall*24*14*0*58.3%*48*48*",
        "results: *evomemory-results*sample_memory",
    ])
    run_dir = pytester.path / "evomemory-results" / "sample_memory"
    for name in ("run.json", "summary.json", "scores.jsonl", "responses.jsonl", "transcripts/sample_facts.jsonl"):
        assert (run_dir / name).is_file(), name
    scores = read_jsonl(run_dir / "scores.jsonl")
    assert [s["task_id"] for s in scores[:3]] == ["f01", "f02", "f03"]
    responses = read_jsonl(run_dir / "responses.jsonl")
    assert [r["kind"] for r in responses[:4]] == ["task", "feedback", "task", "feedback"]
    summary = summary_of(run_dir)
    assert summary["overall"]["accuracy"] == pytest.approx(14 / 24)
    assert summary["streams"]["sample_facts"]["feedback_turns"] == 12


def test_memory_raises_accuracy_along_the_stream_and_no_memory_does_not(pytester: pytest.Pytester) -> None:
    pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}").assert_outcomes(passed=24)
    pytester.runpytest(f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}").assert_outcomes(passed=24)
    with_memory = summary_of(pytester.path / "evomemory-results" / "sample_memory")
    without = summary_of(pytester.path / "evomemory-results" / "sample_no_memory")
    for stream in ("sample_facts", "sample_choice"):
        curve = with_memory["streams"][stream]["learning_curve"]
        assert curve[-1] > curve[len(curve) // 3] > 0 or curve[-1] > 0.5
        assert max(without["streams"][stream]["learning_curve"]) == 0.0
        assert without["streams"][stream]["memory_recalls"] == 0


def test_collect_only_lists_one_ordered_item_per_task_with_stream_ids(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--collect-only", "-q")
    ids = [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "test_task[" in line]
    assert ids[:3] == ["sample_facts/f01", "sample_facts/f02", "sample_facts/f03"]
    assert ids[12] == "sample_choice/c01" and len(ids) == 24
    assert not (pytester.path / "evomemory-results").exists()


def test_k_and_m_select_tasks_and_x_stops_at_the_first_failure(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-k", "sample_choice")
    result.assert_outcomes(passed=12, deselected=12)
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-m", "evomemory", "-k", "f01 or f02")
    result.assert_outcomes(passed=2, deselected=22)
    pytester.makepyfile(failing_agent="""
        class Agent:
            def respond(self, stimulus, turn):
                raise RuntimeError("model exploded")
            def reset(self):
                pass
        def create(config, memory):
            return Agent()
    """)
    pytester.syspathinsert()
    config = write_run_config(agent={"kind": "failing_agent:create", "memory_strategy": "none"})
    result = pytester.runpytest(f"--evomemory-config={config}", "-x")
    # the task turn fails; the feedback turn still follows it, and fails too
    result.assert_outcomes(failed=1, errors=1)
    # the user's own exception, with the user's own frame, not a wrapper of ours
    result.stdout.fnmatch_lines(["*RuntimeError: model exploded", "failing_agent.py:3: RuntimeError"])
    assert "pytest_evomemory/" not in result.stdout.str()


def test_a_shuffling_plugin_cannot_break_stream_order(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-p", "randomly", "-v", "--randomly-seed=12345")
    result.assert_outcomes(passed=24)
    ran = [line.split("[", 1)[1].split("]", 1)[0] for line in result.outlines if "test_task[" in line and ("CORRECT" in line or "WRONG" in line)]
    expected = [f"sample_facts/f{i:02d}" for i in range(1, 13)] + [f"sample_choice/c{i:02d}" for i in range(1, 13)]
    assert ran == expected
    assert summary_of(pytester.path / "evomemory-results" / "sample_memory")["overall"]["correct"] == 14


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--evomemory-config=missing.yaml"], "*evomemory: *missing.yaml: file not found*"),
        (["--evomemory-limit=0"], "*--evomemory-limit must be at least 1*"),
        (["--evomemory-stream=nope"], "*unknown stream(s) 'nope'*available: sample_facts, sample_choice*"),
        (["--evomemory-min-accuracy=lots"], "*expected [[]STREAM=[]]FRACTION*"),
    ],
)
def test_bad_configuration_is_a_usage_error_before_any_test(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    if not args[0].startswith("--evomemory-config"):
        args = [f"--evomemory-config={SAMPLE_MEMORY_RUN}", *args]
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_unknown_key_in_a_config_file_stops_the_run_with_file_and_key(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    config = write_run_config(memory={"backend": "inprocess", "topk": 3})
    result = pytester.runpytest(f"--evomemory-config={config}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{config}*key 'topk': unknown key*"])  # one line: file and key


def test_config_path_from_ini_option_and_limit_and_stream_options(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\nevomemory_config = {SAMPLE_MEMORY_RUN}\n")
    result = pytester.runpytest("--evomemory", "--evomemory-limit=3", "--evomemory-stream=sample_choice")
    result.assert_outcomes(passed=3)
    summary = summary_of(pytester.path / "evomemory-results" / "sample_memory")
    assert list(summary["streams"]) == ["sample_choice"]


def test_with_paths_the_users_tests_run_too_and_without_only_the_benchmark(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-limit=1").assert_outcomes(passed=2)
    pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-limit=1", "test_mine.py").assert_outcomes(passed=3)
    pytester.runpytest("test_mine.py").assert_outcomes(passed=1)


def test_thresholds_gate_the_exit_status(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-min-accuracy=0.9",
                                "--evomemory-min-accuracy=sample_facts=0.5", "--color=yes")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*met: sample_facts accuracy 58.3%, minimum 50.0%*",
        "*MISSED: overall accuracy 58.3%, minimum 90.0%*",
        "*1 accuracy threshold(s) missed; the session fails*",
    ])
    # the session ends as a failure ends: its last line red, its count still true
    last = result.stdout.lines[-1]
    assert last.startswith("\x1b[31m") and "24 passed" in last and "failed" not in last, repr(last)
    config = write_run_config(benchmark={"benchmark": "sample", "thresholds": {"overall": 0.5, "streams": {"sample_choice": 0.5}}})
    result = pytester.runpytest(f"--evomemory-config={config}")
    assert result.ret == pytest.ExitCode.OK
    summary = summary_of(pytester.path / "evomemory-results" / "test_run")
    assert summary["passed"] is True and len(summary["thresholds"]) == 2


def test_agent_from_a_module_factory_reference(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    pytester.makepyfile(my_agent="""
        from pytest_evomemory import FEEDBACK_ACKNOWLEDGEMENT
        class TealAgent:
            def respond(self, stimulus, turn):
                answer = "teal" if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT
                turn.call_tool("final_answer", {"answer": answer})
            def reset(self):
                pass
        def create(config, memory):
            assert config.options == {"colour": "teal"}
            return TealAgent()
    """)
    config = write_run_config(agent={"kind": "my_agent:create", "memory_strategy": "none", "options": {"colour": "teal"}})
    pytester.syspathinsert()
    pytester.runpytest(f"--evomemory-config={config}", "--evomemory-stream=sample_facts").assert_outcomes(passed=12)
    assert summary_of(pytester.path / "evomemory-results" / "test_run")["overall"]["correct"] == 3


def test_agent_and_memory_from_overridden_conftest_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest
        from pytest_evomemory import FEEDBACK_ACKNOWLEDGEMENT
        from pytest_evomemory.memory import InProcessMemory

        OPENED = []

        class LoggingMemory(InProcessMemory):
            def __init__(self, stream):
                super().__init__()
                self.stream = stream
                OPENED.append(stream)

        class EchoAgent:
            def __init__(self, memory):
                self.memory = memory
            def respond(self, stimulus, turn):
                if stimulus.kind == "task":
                    hits = self.memory.recall(stimulus.prompt)
                    for hit in hits:
                        assert hit.metadata["stream"] == stimulus.stream, "leak across streams"
                    turn.call_tool("final_answer", {"answer": hits[0].metadata["target"] if hits else "?"})
                else:
                    self.memory.retain(stimulus.task_id, {"stream": stimulus.stream, "target": stimulus.target})
                    turn.call_tool("final_answer", {"answer": FEEDBACK_ACKNOWLEDGEMENT})
            def reset(self):
                pass

        @pytest.fixture(scope="session")
        def evomemory_agent_factory():
            return lambda config, memory: EchoAgent(memory)

        @pytest.fixture(scope="session")
        def evomemory_memory_factory():
            return lambda config, context: LoggingMemory(context.stream)

        def pytest_sessionfinish(session):
            with open("opened.txt", "w") as handle:
                handle.write(repr(OPENED))
    """)
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}")
    result.assert_outcomes(passed=24)
    assert (pytester.path / "opened.txt").read_text() == "['sample_facts', 'sample_choice']"


def test_memory_is_empty_at_each_stream_start_and_reset_at_stream_teardown(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest
        from pytest_evomemory.memory import InProcessMemory

        EVENTS = []

        class Tracked(InProcessMemory):
            def __init__(self, stream):
                super().__init__()
                self.stream = stream
                EVENTS.append(("open", stream, len(self)))
            def retain(self, content, metadata=None):
                EVENTS.append(("retain", self.stream, len(self)))
                return super().retain(content, metadata)
            def reset(self):
                EVENTS.append(("reset", self.stream, len(self)))
                super().reset()

        @pytest.fixture(scope="session")
        def evomemory_memory_factory():
            return lambda config, context: Tracked(context.stream)

        def pytest_sessionfinish(session):
            opens = [e for e in EVENTS if e[0] == "open"]
            resets = [e for e in EVENTS if e[0] == "reset"]
            first_choice_retain = next(i for i, e in enumerate(EVENTS) if e[:2] == ("retain", "sample_choice"))
            facts_reset = EVENTS.index(resets[0])
            with open("check.txt", "w") as handle:
                handle.write(repr((opens, resets, facts_reset < first_choice_retain)))
    """)
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}")
    result.assert_outcomes(passed=24)
    assert (pytester.path / "check.txt").read_text() == repr((
        [("open", "sample_facts", 0), ("open", "sample_choice", 0)],
        [("reset", "sample_facts", 12), ("reset", "sample_choice", 12)],
        True,
    ))


def test_a_stream_that_cannot_start_is_one_error_and_no_scored_task(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    pytester.makepyfile(down_memory="""
        def create(config, context):
            raise ConnectionError("connection refused by 127.0.0.1:1")
    """)
    pytester.syspathinsert()
    config = write_run_config(memory={"backend": "down_memory:create"})
    result = pytester.runpytest(f"--evomemory-config={config}", "--evomemory-limit=2")
    # one error per stream (on its first task), not one per task: the rest are skipped
    result.assert_outcomes(errors=2, skipped=2)
    result.stdout.fnmatch_lines([
        "*stream 'sample_facts' could not start: memory backend 'down_memory:create' could not be opened "
        "for stream 'sample_facts': ConnectionError: connection refused by 127.0.0.1:1 (at *down_memory.py:2 in create)*"
    ])
    # the message alone: pytest's "All traceback entries are hidden. Pass --full-trace ..."
    # would send the user into the plugin's frames
    assert "traceback entries are hidden" not in result.stdout.str()
    summary = summary_of(pytester.path / "evomemory-results" / "test_run")
    # no 0 % run: nothing was scored, the run is incomplete and says why, once per stream
    assert summary["overall"]["tasks"] == 0 and summary["completion"]["complete"] is False
    assert [(failure["stream"], failure["phase"]) for failure in summary["failed_episodes"]] == [
        ("sample_facts", "start"), ("sample_choice", "start")]


def test_a_failed_episode_fails_its_test_counts_as_wrong_and_the_stream_goes_on(pytester: pytest.Pytester, write_run_config: Writer) -> None:
    pytester.makepyfile(flaky_agent="""
        from pytest_evomemory import FEEDBACK_ACKNOWLEDGEMENT
        class Flaky:
            def respond(self, stimulus, turn):
                turn.begin_step()
                if stimulus.kind == "task" and stimulus.task_id == "f02":
                    return  # never calls final_answer
                if stimulus.kind == "feedback" and stimulus.task_id == "f03":
                    turn.call_tool("final_answer", {"answer": "thanks!"})
                    return
                answer = "teal" if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT
                turn.call_tool("final_answer", {"answer": answer})
            def reset(self):
                pass
        def create(config, memory):
            return Flaky()
    """)
    pytester.syspathinsert()
    config = write_run_config(agent={"kind": "flaky_agent:create", "memory_strategy": "none"})
    result = pytester.runpytest(f"--evomemory-config={config}", "--evomemory-stream=sample_facts", "--evomemory-limit=4")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*ProtocolViolation: sample_facts/f02: the agent ended its turn without calling final_answer*"])
    run_dir = pytester.path / "evomemory-results" / "test_run"
    summary = summary_of(run_dir)["streams"]["sample_facts"]
    assert (summary["tasks"], summary["correct"], summary["errors"]) == (4, 2, 1)
    assert summary["protocol_violations"] == 2  # f02's task turn, f03's feedback acknowledgement
    responses = read_jsonl(run_dir / "responses.jsonl")
    f03_feedback = next(r for r in responses if r["task_id"] == "f03" and r["kind"] == "feedback")
    assert "thanks!" in f03_feedback["protocol_violation"]
    assert summary_of(run_dir)["failed_episodes"][0]["task_id"] == "f02"


# A parallel run equals the serial run: tests/plugin/test_control_arm.py
# (test_a_memory_stream_stays_whole_on_one_worker_and_the_run_equals_the_serial_one,
# and test_a_control_stream_runs_on_every_worker_with_serial_results).


def test_module_is_importable_without_pytest_running() -> None:
    import subprocess
    import sys

    code = textwrap.dedent("""
        import sys
        import pytest_evomemory, pytest_evomemory.runtime, pytest_evomemory.rundir, pytest_evomemory.cli
        assert "pytest" not in sys.modules, sorted(m for m in sys.modules if m.startswith("pytest") or m.startswith("_pytest"))
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runs_with_xdist_disabled_under_strict_markers_and_warnings_as_errors(pytester: pytest.Pytester) -> None:
    """Only the marks the plugin registers: -p no:xdist must not meet an unknown mark."""
    result = pytester.runpytest(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-p", "no:xdist", "--strict-markers", "-W", "error",
        "--evomemory-limit=2",
    )
    result.assert_outcomes(passed=4)
    assert "warnings summary" not in result.stdout.str()


@pytest.mark.slow  # what a fresh process imports: two subprocesses
def test_the_plugin_imports_nothing_of_the_core_until_a_run_config_turns_it_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest loads the plugin in every run of every project that installs it.

    Heavy libraries are compared with a run without the plugin: other installed
    plugins (langsmith's, say, with the langmem extra) may import them themselves."""
    pytester.makepyfile(test_mine="""
        import json
        import os
        import sys

        HEAVY = {"numpy", "pydantic", "yaml", "httpx2"}

        def test_core_not_loaded():
            loaded = sorted(m for m in sys.modules if m.startswith("pytest_evomemory"))
            with open(os.environ["IMPORTS_OUT"], "w") as out:
                json.dump({"ours": loaded, "heavy": sorted(HEAVY & set(sys.modules))}, out)
    """)
    seen = {}
    for label, args in (("with", ()), ("without", ("-p", "no:evomemory"))):
        out = pytester.path / f"imports-{label}.json"
        monkeypatch.setenv("IMPORTS_OUT", str(out))
        pytester.runpytest_subprocess("-p", "no:randomly", *args).assert_outcomes(passed=1)
        seen[label] = json.loads(out.read_text())
    # the plugin, its stash keys and the option declarations it adds to pytest's
    # parser (standard library only)
    assert seen["with"]["ours"] == ["pytest_evomemory", "pytest_evomemory.core", "pytest_evomemory.core.errors", "pytest_evomemory.options",
                                    "pytest_evomemory.plugin", "pytest_evomemory.plugin.stash",
                                    "pytest_evomemory.util", "pytest_evomemory.util.version"]
    assert seen["without"]["ours"] == []
    assert seen["with"]["heavy"] == seen["without"]["heavy"]  # the plugin adds none


@pytest.mark.slow  # a pytest subprocess: in-process runs share this process's imported modules
def test_the_core_is_imported_without_assertion_rewriting_and_the_test_helpers_with_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest marks the plugin's whole distribution for assertion rewriting, which
    costs every pytest process about 0.1 s of CPU for the core's modules
    (docs/performance.md, "Start-up"); the helpers a user's tests call stay rewritten."""
    pytester.makepyfile(test_mine="""
        import json
        import os

        import pytest_evomemory.runtime
        import pytest_evomemory.testing

        def test_loaders():
            loaders = {module.__name__: type(module.__loader__).__name__
                       for module in (pytest_evomemory.runtime, pytest_evomemory.testing)}
            with open(os.environ["LOADERS_OUT"], "w") as out:
                json.dump(loaders, out)
    """)
    out = pytester.path / "loaders.json"
    monkeypatch.setenv("LOADERS_OUT", str(out))
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert json.loads(out.read_text()) == {
        "pytest_evomemory.runtime": "SourceFileLoader",
        "pytest_evomemory.testing": "AssertionRewritingHook",
    }


def test_dist_each_is_refused_before_any_worker_runs_a_stream(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-n", "2", "--dist", "each")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*evomemory: --dist each would run every stream on every worker*"])
    assert not (pytester.path / "evomemory-results" / "sample_memory" / "scores.jsonl").exists()


def test_the_controller_queues_the_end_s_loads_at_the_first_task_s_report(pytester: pytest.Pytester) -> None:
    """Not during start-up (on two cores it would take CPU from xdist's workers
    starting), and not left to the end (after the last model reply): from the first
    task's report, on the load-ahead thread (docs/performance.md)."""
    # a plugin, not a conftest: the items live in the installed package, outside the
    # conftest's directory, so its per-item hooks would not be called
    pytester.makepyfile(queuecheck="""
        import json

        import pytest

        from pytest_evomemory.plugin.stash import SESSION_KEY

        seen = []
        configs = []

        def _queued():
            return "finish" in configs[0].stash[SESSION_KEY].driver.ahead._added

        def pytest_configure(config):
            configs.append(config)

        def pytest_collection_finish(session):
            seen.append(["collected", _queued()])

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(report):
            if len(seen) == 1:
                seen.append([report.when, _queued()])

        def pytest_unconfigure(config):
            with open("queued.json", "w") as out:
                json.dump(seen, out)
    """)
    pytester.syspathinsert()
    result = pytester.runpytest(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "-p", "no:randomly", "-p", "queuecheck", "--evomemory-limit=1"
    )
    result.assert_outcomes(passed=2)
    assert json.loads((pytester.path / "queued.json").read_text()) == [["collected", False], ["setup", True]]
