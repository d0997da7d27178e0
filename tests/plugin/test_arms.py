"""Arms in one session: ``--evomemory-config`` repeated runs every arm (the first is
the baseline), each as the run it would be alone, then compares them and gates the
gain. Through pytester, as a user runs it, serial and under xdist.

Sessions run in this process (``pytester.runpytest``; under ``-n 2`` its workers are
processes anyway); only a run that kills itself runs in a subprocess. The runs an
arm is compared with (each config alone, an uninterrupted session of the crashing
arms) are made once per module through ``evomemory run``, which writes the same
artefacts as pytest (tests/plugin/test_cli_run.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main as evomemory

from ..conftest import CONFIGS, SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl
from .guarantee_project import importable_by_xdist_workers

CONTROL = f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}"
MEMORY = f"--evomemory-config={SAMPLE_MEMORY_RUN}"


def _scores(run_dir: Path) -> list[tuple[str, str, int, bool, str | None]]:
    return [
        (s["stream"], s["task_id"], s["position"], s["correct"], s["extracted"])
        for s in read_jsonl(run_dir / "scores.jsonl")
    ]


def _comparison(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((path / "compare.json").read_text(encoding="utf-8"))
    return document


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def _cli_run(directory: Path, *args: str) -> None:
    """``evomemory run`` in this process, in ``directory``; it must pass."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        assert evomemory(["run", "-q", *args]) == 0


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each sample config run alone (``control/`` and ``memory/``): what an arm must equal."""
    root = tmp_path_factory.mktemp("alone")
    _cli_run(root, f"--config={SAMPLE_NO_MEMORY_RUN}", f"--output-dir={root / 'control'}")
    _cli_run(root, f"--config={SAMPLE_MEMORY_RUN}", f"--output-dir={root / 'memory'}")
    return root


# Serially here; under -n 2 by the worker-crash test below, which asserts the same of
# arms in one xdist session (each arm its own run, equal to the config alone, compared).
def test_two_arms_run_as_they_would_alone_and_are_compared(pytester: pytest.Pytester, alone: Path) -> None:
    """... and the gates they meet pass the session: a gain gate, overall and per
    stream, and an accuracy gate naming one arm (the control's 0 % is not judged)."""
    result = _run(pytester, CONTROL, MEMORY, "--evomemory-output-dir=arms", "-v",
                  "--evomemory-min-gain=50", "--evomemory-min-gain=sample_facts=20",
                  "--evomemory-min-accuracy=sample_memory:sample_facts=0.5")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=48)
    output = result.stdout.str()
    # items are identified by arm, stream and task
    assert "test_task[sample_no_memory:sample_facts/f01]" in output
    assert "test_task[sample_memory:sample_choice/c12]" in output
    arms = pytester.path / "arms"
    # each arm is its own run: its own directory, with what the config alone produced
    assert _scores(arms / "sample_no_memory") == _scores(alone / "control")
    assert _scores(arms / "sample_memory") == _scores(alone / "memory")
    for name in ("sample_no_memory", "sample_memory"):
        summary = json.loads((arms / name / "summary.json").read_text(encoding="utf-8"))
        assert summary["completion"]["complete"] is True
        assert summary["run"] == name
    # the comparison: files beside the arms, and the terminal
    document = _comparison(arms)
    assert document["baseline"] == "sample_no_memory"
    assert [run["label"] for run in document["runs"]] == ["sample_no_memory", "sample_memory"]
    overall = document["overall"]
    assert [entry["correct"] for entry in overall["runs"]] == [0, 14]
    versus = overall["vs_baseline"][0]
    assert versus["paired_tasks"] == 24
    assert versus["difference"] == pytest.approx(14 / 24)
    assert versus["mcnemar_p"] == pytest.approx(2 / 2**14)  # 14 discordant tasks, all one way
    assert (arms / "compare.html").is_file()
    assert "evomemory: sample_no_memory vs sample_memory" in output
    assert "+58.3 pp" in output
    assert f"comparison data: {arms.resolve() / 'compare.json'}" in output
    # the gates it met
    result.stdout.fnmatch_lines([
        "met: sample_facts gain of sample_memory over sample_no_memory +58.3 points over 12 paired tasks*minimum +20.0 points",
        "met: overall gain of sample_memory over sample_no_memory +58.3 points over 24 paired tasks*",
    ])
    result.stdout.fnmatch_lines(["met: sample_facts accuracy 58.3%, minimum 50.0%"])
    assert "MISSED" not in output


def test_each_arm_has_its_own_memory(pytester: pytest.Pytester) -> None:
    """Two memory arms with the same agent and memory score alike: the second arm's
    streams start empty, not with what the first arm retained."""
    twin = pytester.path / "twin.yaml"
    twin.write_text(
        "name: sample_memory_twin\n"
        f"benchmark: {CONFIGS / 'benchmarks' / 'sample.yaml'}\n"
        f"agent: {CONFIGS / 'agents' / 'recall_baseline.yaml'}\n"
        f"memory: {CONFIGS / 'memory' / 'inprocess.yaml'}\n",
        encoding="utf-8",
    )
    result = _run(pytester, MEMORY, f"--evomemory-config={twin}", "--evomemory-output-dir=arms")
    assert result.ret == 0, result.stdout.str()
    arms = pytester.path / "arms"
    assert _scores(arms / "sample_memory") == _scores(arms / "sample_memory_twin")
    versus = _comparison(arms)["overall"]["vs_baseline"][0]
    assert (versus["difference"], versus["only_baseline_correct"], versus["only_this_correct"]) == (0.0, 0, 0)


def test_a_missed_gate_fails_the_session_and_an_unnamed_accuracy_gate_judges_every_arm(
    pytester: pytest.Pytester,
) -> None:
    """The gates met pass the session: test_two_arms_run_as_they_would_alone_and_are_compared.
    The gain gate here requires the interval's lower bound (``--evomemory-min-gain-by``):
    +58.3 points on 12 tasks would meet 40 on the estimate, but not on the bound."""
    missed = _run(pytester, CONTROL, MEMORY, "--evomemory-min-gain=sample_choice=40", "--json-report",
                  "--json-report-file=report.json", "--evomemory-min-accuracy=0.5",
                  "--evomemory-min-gain-by=lower-bound")
    assert missed.ret == 1
    missed.stdout.fnmatch_lines([
        "MISSED: sample_choice gain of sample_memory over sample_no_memory +58.3 points over 12 paired tasks, "
        "95% CI ?+20.3, +79.7? (Agresti-Min), McNemar p=0.0156, minimum +40.0 points (required of the 95% CI's lower bound)",
        "evomemory: 1 gain gate(s) missed; the session fails",
    ])
    # the accuracy gate names no arm: the control arm's 0 % misses it, the memory arm meets it
    missed.stdout.fnmatch_lines(["MISSED: overall accuracy 0.0%, minimum 50.0%", "met: overall accuracy 58.3%, minimum 50.0%"])
    block = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))["evomemory"]
    assert block["baseline"] == "sample_no_memory"
    arms = {arm["name"]: arm for arm in block["arms"]}
    assert list(arms) == ["sample_no_memory", "sample_memory"]
    assert arms["sample_memory"]["summary"]["overall"]["correct"] == 14
    assert [(g["scope"], g["met"], g["requires"]) for g in block["gains"]] == [("sample_choice", False, "lower-bound")]
    assert block["gains"][0]["difference_ci_points"][0] < 40 < block["gains"][0]["difference_points"]
    assert block["comparison"]["baseline"] == "sample_no_memory"


FAILING_MEMORY_ARM = """
import pytest
from pytest_evomemory.agents.factory import build_agent


class Failing:
    def __init__(self, agent):
        self.agent = agent

    def reset(self):
        self.agent.reset()

    def respond(self, stimulus, turn):
        if stimulus.kind == "task" and stimulus.task_id == "f03":
            raise RuntimeError("agent crashed on f03")
        return self.agent.respond(stimulus, turn)


@pytest.fixture(scope="session")
def evomemory_agent_factory():
    def build(config, memory):
        agent = build_agent(config, memory)
        return agent if config.memory_strategy == "none" else Failing(agent)
    return build
"""


def test_a_gain_gate_is_not_passed_by_an_incomplete_run(pytester: pytest.Pytester) -> None:
    """The memory arm stops at its first failed episode: whatever the difference on
    the tasks that ran, the gate does not pass."""
    pytester.makeconftest(FAILING_MEMORY_ARM)
    result = _run(pytester, CONTROL, MEMORY, "--evomemory-min-gain=-100", "--evomemory-max-errors=1")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()  # stopped by --evomemory-max-errors
    result.stdout.fnmatch_lines([
        "MISSED (incomplete run): overall gain of sample_memory over sample_no_memory +0.0 points over 3 paired*",
        "evomemory: gain gates are not passed by an incomplete run; the session fails",
    ])
    summary = json.loads(
        (pytester.path / "evomemory-results" / "sample_memory" / "summary.json").read_text(encoding="utf-8")
    )
    assert summary["completion"]["complete"] is False
    # the failed episode is the memory arm's; the control, which ran all its tasks first, is complete
    control = json.loads(
        (pytester.path / "evomemory-results" / "sample_no_memory" / "summary.json").read_text(encoding="utf-8")
    )
    assert control["failed_episodes"] == []
    assert control["completion"]["complete"] is True
    assert [(f["stream"], f["task_id"]) for f in summary["failed_episodes"]] == [("sample_facts", "f03")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([MEMORY, "--evomemory-min-gain=5"], "--evomemory-min-gain gates the gain of an arm over the baseline"),
        ([CONTROL, MEMORY, "--evomemory-min-gain=nope=5"], "unknown stream 'nope'"),
        ([CONTROL, MEMORY, "--evomemory-min-gain=lots"], "expected [STREAM=]POINTS"),
        ([MEMORY, MEMORY], "two arms are named 'sample_memory'"),
        ([CONTROL, MEMORY, "--evomemory-resume=out"], "reads them from DIR/arms.json"),
        ([CONTROL, MEMORY, "--evomemory-compare=elsewhere"], "compares them by itself"),
        (["--evomemory-min-gain=5"], "the benchmark is off"),
        (["--evomemory-min-accuracy=0.5"], "the benchmark is off"),  # no gate silently judging nothing
        ([CONTROL, MEMORY, "--evomemory-min-accuracy=memory:0.5"], "unknown arm 'memory'"),
    ],
    ids=["one-arm", "unknown-stream", "not-a-number", "same-name", "resume", "compare", "off", "off-accuracy", "unknown-arm"],
)
def test_bad_arm_options_are_refused_before_any_task(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    result = _run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert message in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "evomemory-results").exists()


def test_a_task_of_one_arm_is_rerun_by_its_node_id(pytester: pytest.Pytester) -> None:
    result = _run(pytester, CONTROL, MEMORY, "evomemory::test_task[sample_memory:sample_facts/f03]", "-v")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    # a side run (a task picked by hand) of the arms: only the memory arm ran, so the
    # control arm's directory holds no results and there is no comparison
    side = pytester.path / "evomemory-results" / "side-run"
    assert not (side / "sample_no_memory" / "scores.jsonl").exists()
    assert (side / "sample_memory" / "scores.jsonl").is_file()
    assert "no benchmark task of arm 'sample_no_memory' ran" in result.stdout.str()
    assert not (side / "compare.json").exists()


def test_compare_command_gates_the_gain_of_existing_runs(
    alone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [str(alone / "control"), str(alone / "memory")]
    page = str(tmp_path / "c.html")
    assert evomemory(["compare", *runs, "--min-gain", "50", "-o", page]) == 0
    met = capsys.readouterr()
    pytest.LineMatcher(met.out.splitlines()).fnmatch_lines(["met: overall gain of sample_memory over sample_no_memory +58.3 points*"])
    assert evomemory(["compare", *runs, "--min-gain", "sample_facts=59", "-o", page]) == 1
    pytest.LineMatcher(capsys.readouterr().out.splitlines()).fnmatch_lines(["MISSED: sample_facts gain*"])
    assert evomemory(["compare", *runs, "--min-gain", "nope=1", "-o", page]) == 2
    bad = capsys.readouterr()
    assert "unknown stream 'nope'" in bad.err
    assert "sample_facts" not in bad.out  # refused before the table is printed


def test_the_output_dir_option_places_every_arm_whatever_their_configs_say(pytester: pytest.Pytester) -> None:
    configs = []
    for name, source in (("control", SAMPLE_NO_MEMORY_RUN), ("memory", SAMPLE_MEMORY_RUN)):
        path = pytester.path / f"{name}.yaml"
        text = source.read_text(encoding="utf-8").replace("../", f"{source.parent.parent}/")
        path.write_text(text.replace(f"name: {source.stem}", f"name: {name}") + "output_dir: same-place\n",
                        encoding="utf-8")
        configs.append(f"--evomemory-config={path}")
    clash = _run(pytester, *configs)
    assert clash.ret == pytest.ExitCode.USAGE_ERROR
    assert "would both write to" in clash.stderr.str()
    placed = _run(pytester, *configs, "--evomemory-output-dir=arms")
    assert placed.ret == 0, placed.stdout.str()
    assert (pytester.path / "arms" / "control" / "scores.jsonl").is_file()
    assert (pytester.path / "arms" / "memory" / "scores.jsonl").is_file()
    assert not (pytester.path / "same-place").exists()


CRASHING_MEMORY_ARM = """
import os, signal
from pytest_evomemory.agents.baseline import RecallBaselineAgent


class Crashing(RecallBaselineAgent):
    def respond(self, stimulus, turn):
        if os.environ.get("KILL_AT") == f"{stimulus.task_id}/{stimulus.kind}":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().respond(stimulus, turn)


def create(config, memory):
    agent_class = RecallBaselineAgent if config.memory_strategy == "none" else Crashing
    return agent_class(config, memory)
"""

ARM_RUN = """
name: {name}
benchmark: {{benchmark: sample}}
agent: {{kind: "crashing_agent:create", memory_strategy: {strategy}}}
memory: {{backend: inprocess}}
"""


def _write_crashing_arms(directory: Path) -> tuple[str, str]:
    """A control and a memory arm whose memory agent dies at $KILL_AT; the two
    --evomemory-config options."""
    (directory / "crashing_agent.py").write_text(CRASHING_MEMORY_ARM, encoding="utf-8")
    for name, strategy in (("control", "none"), ("memory", "deterministic_recall")):
        (directory / f"{name}.yaml").write_text(ARM_RUN.format(name=name, strategy=strategy), encoding="utf-8")
    return ("--evomemory-config=control.yaml", "--evomemory-config=memory.yaml")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Each crashing arm run alone, uninterrupted (``control/``, ``memory/``): what
    a session of them must equal (serially: test_two_arms_run_as_they_would_alone_and_are_compared)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    _write_crashing_arms(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        patch.delenv("KILL_AT", raising=False)
        try:
            for name in ("control", "memory"):
                _cli_run(root, f"--config={name}.yaml", f"--output-dir={root / name}")
        finally:
            sys.modules.pop("crashing_agent", None)
    yield root


def _crashing_arms(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The crashing arms in the pytester directory, importable by this process, a
    subprocess (PYTHONPATH) and xdist's workers."""
    arms = _write_crashing_arms(pytester.path)
    pytester.syspathinsert()
    importable_by_xdist_workers(pytester)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    return arms


@pytest.mark.slow
def test_a_worker_crash_in_one_arm_is_charged_to_that_arm_and_its_memory_restored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, uninterrupted: Path
) -> None:
    """A kill -9 of the worker running the memory arm's f06: that episode fails, every
    other task (the other stream's, and the rest of its own, from the restored
    memory) scores as without the crash. Also the arms' smoke test under -n 2: items
    named by arm, each arm its own run equal to the config alone (but for the crashed
    task), and the comparison. (Was also test_resume.py::test_an_xdist_worker_crash_loses_no_other_streams_results_and_restores_memory.)"""
    arms = _crashing_arms(pytester, monkeypatch)
    monkeypatch.setenv("KILL_AT", "f06/task")
    crashed = _run(pytester, *arms, "--evomemory-output-dir=crashed", "-n", "2", "-v")
    crashed.stdout.fnmatch_lines(["*worker*crashed*"])
    crashed.assert_outcomes(passed=47, failed=1)
    output = crashed.stdout.str()
    assert "test_task[control:sample_facts/f01]" in output
    assert "test_task[memory:sample_choice/c12]" in output
    reference, result = uninterrupted, pytester.path / "crashed"
    for name in ("control", "memory"):
        summary = json.loads((result / name / "summary.json").read_text(encoding="utf-8"))
        assert summary["run"] == name
        assert summary["completion"]["complete"] is True  # the crashed task ran: it failed
    document = _comparison(result)
    assert [run["label"] for run in document["runs"]] == ["control", "memory"]
    assert document["overall"]["vs_baseline"][0]["paired_tasks"] == 24
    assert "evomemory: control vs memory" in output
    assert f"comparison data: {result.resolve() / 'compare.json'}" in output
    assert _scores(result / "control") == _scores(reference / "control")
    got = {(s[0], s[1]): s for s in _scores(result / "memory")}
    expected = {(s[0], s[1]): s for s in _scores(reference / "memory")}
    assert got.pop(("sample_facts", "f06"))[3] is False
    expected.pop(("sample_facts", "f06"))
    assert got == expected  # the rest of the stream ran on with its memory restored
    memory = json.loads((result / "memory" / "summary.json").read_text(encoding="utf-8"))
    control = json.loads((result / "control" / "summary.json").read_text(encoding="utf-8"))
    assert [(f["stream"], f["task_id"]) for f in memory["failed_episodes"]] == [("sample_facts", "f06")]
    assert "crashed" in memory["failed_episodes"][0]["reason"]
    assert control["failed_episodes"] == []


# Under -n 2 only: the arms' serial path is the smoke test above, and a resume's serial
# path is tests/plugin/test_resume.py's.
@pytest.mark.slow
@pytest.mark.parametrize("workers", [["-n", "2"]], ids=["xdist"])
def test_an_interrupted_session_of_arms_resumes_whole(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, uninterrupted: Path, workers: list[str]
) -> None:
    """kill -9 in the memory arm's first stream: --evomemory-resume on the session's
    directory finishes both arms (the memory arm from its snapshot) and compares
    them; the scores equal an uninterrupted session's."""
    arms = _crashing_arms(pytester, monkeypatch)
    monkeypatch.setenv("KILL_AT", "f06/feedback")
    # the run kills its own process: a subprocess
    killed = pytester.runpytest_subprocess("-p", "no:randomly", *arms, "--evomemory-output-dir=session")
    assert killed.ret != 0
    session = pytester.path / "session"
    manifest = json.loads((session / "arms.json").read_text(encoding="utf-8"))
    assert [(arm["name"], arm["run_dir"]) for arm in manifest["arms"]] == [("control", "control"), ("memory", "memory")]
    monkeypatch.delenv("KILL_AT")
    resumed = _run(pytester, "--evomemory-resume=session", "-v", *workers)
    assert resumed.ret == 0, resumed.stdout.str()
    output = resumed.stdout.str()
    assert "test_task[control:" not in output  # the control arm had finished: nothing of it runs again
    assert "test_task[memory:sample_facts/f01]" not in output
    assert "test_task[memory:sample_facts/f06]" in output  # the killed episode runs again
    for name in ("control", "memory"):
        assert _scores(session / name) == _scores(uninterrupted / name)
    assert _comparison(session)["overall"]["vs_baseline"][0]["paired_tasks"] == 24
    # a manifest cannot be combined with configs of the command line
    both = _run(pytester, "--evomemory-resume=session", *arms)
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    assert "reads them from DIR/arms.json" in both.stderr.str()
