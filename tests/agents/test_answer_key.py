"""The agent never sees the answer key; the feedback turn is the only place it arrives.

A probe agent (answer_probe.py) inspects everything it can reach in each task turn, on
every stream: the two sample streams and the four evomemory_single_turn converters fed
self-authored records in the upstream schemas (tests/streams/conftest.py), run through
the plugin as a user runs it. The feedback tests check, per stream, that the feedback
carries the source's own answer verbatim.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import FEEDBACK_ACKNOWLEDGEMENT, BenchmarkSample, TaskView, run_benchmark
from pytest_evomemory.config import BenchmarkConfig
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.types import TASK_METADATA_KEYS
from pytest_evomemory.runtime.feedback import render_feedback
from pytest_evomemory.streams import load_benchmark
from pytest_evomemory.streams.evomemory import catalog
from pytest_evomemory.streams.evomemory.catalog import GPQA_DIAMOND, MMLU_PRO
from pytest_evomemory.streams.evomemory.converters import MMLU_PRO_OPTION_FIELD

from ..streams.conftest import (
    GPQA_RECORDS,
    MMLU_RECORDS,
    TOOLBENCH_RECORDS,
    FakeHub,
    hub,  # noqa: F401  (the Hugging Face Hub stand-in, a fixture)
    parquet_bytes,
)
from . import answer_probe

PACKAGE = Path(answer_probe.__file__).resolve().parents[2] / "pytest_evomemory"
SAMPLE_DATA = PACKAGE / "streams" / "sample"

#: AIME records whose answers and solutions are distinctive strings (the shared
#: fixture's answers are one or two digits, which match anywhere by chance).
PROBE_AIME: list[dict[str, Any]] = [
    {
        "id": 90,
        "problem": "Find the number of invented lattice walks of length six.",
        "solution": "Counting the zig-zag walks gives the total seven hundred thirty-one.",
        "answer": "731",
        "url": "https://example.invalid/aime/solution-90",
        "year": "2024",
    },
    {
        "id": 91,
        "problem": "How many made-up tilings does the strip admit?",
        "solution": "A recursion on the strip length settles it at 486.",
        "answer": "486",
        "url": "https://example.invalid/aime/solution-91",
        "year": "2024",
    },
]

#: Names that would give an answer away if a task stimulus held them.
ANSWER_NAMES = {
    "target",
    "answer",
    "answer_index",
    "correct_answer",
    "Correct Answer",
    "permutation",
    "source_answer",
    "api_call",
    "api_data",
    "api_name",
    "domain",
    "functionality",
    "solution",
    "cot_content",
    "Explanation",
    "url",
}


def _sample_records(name: str) -> list[dict[str, Any]]:
    lines = (SAMPLE_DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def secrets_by_task() -> dict[tuple[str, str], list[str]]:
    """Per (stream, task id): answer-revealing source values, taken from the raw
    records (not from the converters), that the question itself does not contain."""
    found: dict[tuple[str, str], list[str]] = {}

    def add(stream: str, task_id: str, question: str, values: list[Any]) -> None:
        texts = [str(value) for value in values]
        found[(stream, task_id)] = [t for t in texts if len(t.strip()) >= 3 and t.strip() not in question]

    for record in PROBE_AIME:
        add("aime_2024", str(record["id"]), record["problem"], [record["answer"], record["solution"], record["url"]])
    for gpqa in GPQA_RECORDS:
        add("gpqa_diamond", gpqa["Record ID"], gpqa["Question"], [gpqa["Explanation"]])
    for mmlu in MMLU_RECORDS:
        add("mmlu_pro", str(mmlu["question_id"]), mmlu["question"], [mmlu["cot_content"]])
    for index, tool in enumerate(TOOLBENCH_RECORDS, start=1):
        api = tool["api_data"]
        output = tool["code"].split("###Output:", 1)[1]
        repo, model = tool["api_call"].split("'")[1], tool["api_call"].split("'")[3]
        values = [tool["api_call"], api["api_name"], api["domain"], api["api_call"], output, repo, model]
        add("toolbench", f"torchhub_{index}", tool["code"].split("###Output", 1)[0], values)
    for stream, name in (("sample_facts", "facts.jsonl"), ("sample_choice", "choice.jsonl")):
        for row in _sample_records(name):
            add(stream, str(row["id"]), row["prompt"] + "\n".join(row.get("choices", [])), [row["target"]])
    return found


@pytest.fixture
def probe_hub(request: pytest.FixtureRequest) -> FakeHub:
    stand_in: FakeHub = request.getfixturevalue("hub")
    stand_in.put(catalog.STREAMS["aime_2024"], parquet_bytes(PROBE_AIME))
    return stand_in


def _probe_run(pytester: pytest.Pytester, benchmark: str) -> list[dict[str, Any]]:
    pytester.makepyfile(answer_probe=Path(answer_probe.__file__).read_text(encoding="utf-8"))
    pytester.syspathinsert()
    out = pytester.path / "probe.jsonl"
    run = pytester.makefile(
        ".yaml",
        run=f"""
name: probe
benchmark:
  benchmark: {benchmark}
agent:
  kind: answer_probe:create
  memory_strategy: tool_use
  options:
    out: {json.dumps(str(out))}
memory:
  backend: inprocess
""",
    )
    result = pytester.runpytest(f"--evomemory-config={run}")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(params=["sample", "evomemory_single_turn"])
def probed(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> list[dict[str, Any]]:
    if request.param == "evomemory_single_turn":
        request.getfixturevalue("probe_hub")
    return _probe_run(pytester, request.param)


def test_a_probe_agent_finds_no_answer_key_in_any_task_stimulus(probed: list[dict[str, Any]]) -> None:
    secrets = secrets_by_task()
    tasks = [record for record in probed if record["kind"] == "task"]
    streams = {record["stream"] for record in tasks}
    assert streams in ({"sample_facts", "sample_choice"}, {"aime_2024", "gpqa_diamond", "mmlu_pro", "toolbench"})
    for record in tasks:
        where = f"{record['stream']}/{record['task_id']}"
        assert not record["truncated"], f"{where}: the probe gave up before seeing everything"
        names = set(record["stimulus_names"])
        assert {"prompt", "choices", "metadata", "task_id"} <= names, where  # the walk did look
        assert not names & ANSWER_NAMES, f"{where}: the task stimulus names {sorted(names & ANSWER_NAMES)}"
        for secret in secrets[(record["stream"], record["task_id"])]:
            assert secret not in record["stimulus_text"], f"{where}: {secret!r} reachable from the stimulus"
            assert secret not in record["reachable_text"], f"{where}: {secret!r} reachable from the turn"
        assert record["stimulus_type"] == "TaskView", where
    checked = sum(len(secrets[(r["stream"], r["task_id"])]) for r in tasks)
    assert checked >= 5  # the secrets are real strings, not all filtered away


def test_the_probe_finds_an_answer_key_hidden_anywhere_it_looks() -> None:
    """The probe can fail: the target hidden in a field, a slot, a closure, pickle
    state alone or deep in containers is found every time."""
    sample = BenchmarkSample("t1", "s", 0, "Which colour?", "vermilion-secret")

    class Slotted:
        __slots__ = ("_hidden",)

        def __init__(self) -> None:
            self._hidden = sample.target

    class PickleOnly:
        def __getstate__(self) -> dict[str, str]:
            return {"x": sample.target}

    def closure() -> str:
        return sample.target

    class Holder:
        def __init__(self) -> None:
            self.run = closure

    hideouts: list[Any] = [sample, Slotted(), PickleOnly(), Holder(), [{"deep": (sample,)}]]
    for hideout in hideouts:
        assert "vermilion-secret" in answer_probe.inspect_everything(hideout).blob(), hideout
    assert "target" in answer_probe.inspect_everything(sample).names
    assert "target" not in answer_probe.inspect_everything(sample.task_view()).names


def test_the_probe_ignores_object_addresses_that_happen_to_hold_an_answer() -> None:
    """A default repr's address (``at 0x7ff422486dd0``) once held AIME's ``486`` by chance."""
    findings = answer_probe.Findings(texts=["<Thing object at 0x7ff422486dd0>", "answer 486"])
    assert findings.blob().count("486") == 1


def _evomemory_samples(tmp_path: Path) -> list[BenchmarkSample]:
    config = BenchmarkConfig(benchmark="evomemory_single_turn")
    return [sample for stream in load_benchmark(config, tmp_path) for sample in stream.samples]


def _sample_samples(tmp_path: Path) -> list[BenchmarkSample]:
    return [s for stream in load_benchmark(BenchmarkConfig(benchmark="sample"), tmp_path) for s in stream.samples]


def _twin(sample: BenchmarkSample) -> BenchmarkSample:
    """The same question with a different answer key."""
    hidden = {key: ["changed", key] for key in sample.metadata if key not in TASK_METADATA_KEYS}
    return dataclasses.replace(sample, target="TWIN", metadata={**sample.metadata, **hidden})


def test_the_task_view_depends_on_nothing_of_the_answer_key(probe_hub: FakeHub, tmp_path: Path) -> None:
    samples = _evomemory_samples(tmp_path) + _sample_samples(tmp_path)
    assert {s.stream for s in samples} == {
        "aime_2024", "gpqa_diamond", "mmlu_pro", "toolbench", "sample_facts", "sample_choice",
    }
    hidden_keys: set[str] = set()
    for sample in samples:
        view, twin = sample.task_view(), _twin(sample).task_view()
        assert isinstance(view, TaskView)
        assert view == twin and repr(view) == repr(twin) and view.to_dict() == twin.to_dict()
        assert pickle.dumps(view) == pickle.dumps(twin)
        assert set(view.metadata) <= TASK_METADATA_KEYS
        assert (view.prompt, view.choices, view.position) == (sample.prompt, sample.choices, sample.position)
        hidden_keys |= set(sample.metadata) - set(view.metadata)
    assert {"correct_answer", "permutation", "answer", "answer_index", "api_name", "domain", "url"} <= hidden_keys


def test_the_view_is_a_copy_the_agent_cannot_write_through() -> None:
    sample = BenchmarkSample("t", "s", 0, "p", "x", metadata={"topic": ["a"], "answer": "x"})
    view = sample.task_view()
    view.metadata["topic"].append("b")  # type: ignore[attr-defined]
    assert sample.metadata["topic"] == ["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.prompt = "q"  # type: ignore[misc]
    assert not hasattr(view, "__dict__") and pickle.loads(pickle.dumps(view)) == view


# --------------------------------------------------------------------------- cheating


class Cheater:
    """memory_strategy none, and every route to the answer an agent might try."""

    def respond(self, stimulus: Any, turn: Any) -> None:
        answer = find_answer(stimulus) if stimulus.kind == "task" else FEEDBACK_ACKNOWLEDGEMENT
        turn.call_tool("final_answer", {"answer": answer or "?"})

    def reset(self) -> None:
        pass


def find_answer(stimulus: Any) -> str | None:
    routes: list[Callable[[], Any]] = [
        lambda: stimulus.target,
        lambda: stimulus.to_dict()["target"],
        lambda: vars(stimulus)["target"],
        lambda: stimulus.metadata["answer"],
        lambda: stimulus.metadata["target"],
        lambda: pickle.loads(pickle.dumps(stimulus)).target,
    ]
    for route in routes:
        try:
            return str(route())
        except (AttributeError, KeyError, TypeError):
            continue
    return None


def test_an_agent_that_reads_the_target_no_longer_scores_everything(tmp_path: Path) -> None:
    config = load_run_config(PACKAGE / "configs" / "runs" / "sample_no_memory.yaml")
    samples = _sample_samples(tmp_path)
    assert all(find_answer(sample) == sample.target for sample in samples)  # given the sample, it would
    summary = run_benchmark(config, tmp_path / "out", agent_factory=lambda c, m: Cheater(), write_artefacts=False)
    assert summary["overall"]["tasks"] == len(samples)
    assert summary["overall"]["correct"] == 0


def test_a_cheating_agent_through_the_plugin_scores_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pickle
        import pytest
        from pytest_evomemory import FEEDBACK_ACKNOWLEDGEMENT

        class Cheater:
            def respond(self, stimulus, turn):
                answer = "?"
                if stimulus.kind == "task":
                    for route in (lambda: stimulus.target, lambda: stimulus.to_dict()["target"],
                                  lambda: pickle.loads(pickle.dumps(stimulus)).target):
                        try:
                            answer = route()
                            break
                        except (AttributeError, KeyError):
                            pass
                else:
                    answer = FEEDBACK_ACKNOWLEDGEMENT
                turn.call_tool("final_answer", {"answer": answer})
            def reset(self):
                pass

        @pytest.fixture(scope="session")
        def evomemory_agent_factory():
            return lambda config, memory: Cheater()
        """
    )
    config = PACKAGE / "configs" / "runs" / "sample_no_memory.yaml"
    result = pytester.runpytest(f"--evomemory-config={config}", "--evomemory-min-accuracy=0.5")
    output = result.stdout.str()
    assert result.ret == 1, output  # the threshold gate fails the run
    summary = json.loads(next(pytester.path.rglob("summary.json")).read_text(encoding="utf-8"))
    assert summary["overall"]["correct"] == 0 and summary["overall"]["tasks"] == 24


# --------------------------------------------------------------------------- feedback


def _by_task(samples: list[BenchmarkSample]) -> dict[tuple[str, str], BenchmarkSample]:
    return {(s.stream, s.task_id): s for s in samples}


@pytest.fixture
def evomemory_samples(probe_hub: FakeHub, tmp_path: Path) -> Iterator[dict[tuple[str, str], BenchmarkSample]]:
    yield _by_task(_evomemory_samples(tmp_path))


def test_gpqa_feedback_quotes_the_correct_answer_text_verbatim_beside_this_tasks_letter(
    evomemory_samples: dict[tuple[str, str], BenchmarkSample],
) -> None:
    for record in GPQA_RECORDS:
        sample = evomemory_samples[("gpqa_diamond", record["Record ID"])]
        feedback = render_feedback(sample, "A", GPQA_DIAMOND.quote_answer)  # as the stream declares it
        letter = "ABCD"[sample.choices.index(record["Correct Answer"].strip())]
        assert feedback.target == sample.target == letter  # the scored target, unchanged
        assert feedback.source_answer == {"Correct Answer": record["Correct Answer"]}  # byte for byte
        assert f"The correct answer: {letter} (the option letter in this task's ordering)\n" in feedback.content
        assert f"  Correct Answer: {record['Correct Answer']}\n" in feedback.content
    assert GPQA_RECORDS[0]["Correct Answer"] == " The zorblon "  # the fixture does test verbatim


def test_mmlu_pro_feedback_quotes_the_source_answer_letter_and_its_option_text(
    evomemory_samples: dict[tuple[str, str], BenchmarkSample],
) -> None:
    checked = 0
    for record in MMLU_RECORDS:
        sample = evomemory_samples.get(("mmlu_pro", str(record["question_id"])))
        if sample is None:  # outside the default categories
            continue
        feedback = render_feedback(sample, None, MMLU_PRO.quote_answer)
        option = record["options"][record["answer_index"]]
        assert feedback.target == sample.target
        assert feedback.source_answer == {"answer": record["answer"], MMLU_PRO_OPTION_FIELD: option}
        assert f"  answer: {record['answer']}\n  {MMLU_PRO_OPTION_FIELD}: {option}\n" in feedback.content
        assert f"The correct answer: {sample.target} (" in feedback.content
        assert "Your submitted answer: (no answer)\n" in feedback.content
        checked += 1
    assert checked == 3


def test_aime_and_toolbench_feedback_is_the_source_field_byte_for_byte(
    evomemory_samples: dict[tuple[str, str], BenchmarkSample],
) -> None:
    for record in PROBE_AIME:
        feedback = render_feedback(evomemory_samples[("aime_2024", str(record["id"]))], "1")
        assert feedback.target == record["answer"] and feedback.source_answer == {}
        assert f"The correct answer: {record['answer']}\n" in feedback.content
    for index, tool in enumerate(TOOLBENCH_RECORDS, start=1):
        feedback = render_feedback(evomemory_samples[("toolbench", f"torchhub_{index}")], "x")
        assert feedback.target == tool["api_call"] and feedback.source_answer == {}
        assert f"The correct answer: {tool['api_call']}\n" in feedback.content


def test_user_streams_keep_the_plain_feedback(tmp_path: Path) -> None:
    for sample in _sample_samples(tmp_path):
        feedback = render_feedback(sample, "x")
        assert feedback.source_answer == {} and feedback.to_dict()["source_answer"] == {}
        assert f"The correct answer: {sample.target}\nIf this experience" in feedback.content


def test_the_feedback_turn_through_the_plugin_carries_the_source_answer(
    probe_hub: FakeHub, pytester: pytest.Pytester
) -> None:
    records = _probe_run(pytester, "evomemory_single_turn")
    feedback = {(r["stream"], r["task_id"]): r for r in records if r["kind"] == "feedback"}
    assert len(feedback) == 10  # one per task
    zorblon = feedback[("gpqa_diamond", "recTEST0000000001")]
    assert zorblon["source_answer"] == {"Correct Answer": " The zorblon "}
    assert "  Correct Answer:  The zorblon \n" in zorblon["content"]
    assert feedback[("aime_2024", "90")]["target"] == "731"
    economics = feedback[("mmlu_pro", "70")]
    assert economics["source_answer"] == {"answer": "A", MMLU_PRO_OPTION_FIELD: "Rises"}
