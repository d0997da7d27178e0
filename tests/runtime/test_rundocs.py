"""The run documents as models (pytest_evomemory.rundocs) write today's bytes.

Two checks: the records a run writes are byte for byte what the hand-written
``to_dict``/``to_wire`` writers wrote before the models (their output is spelled
out below, as those writers built it), and every file of a real run reads back
into its model and writes again to the same bytes (so no key is lost, added,
renamed or reordered, and no value changes type: ``1.0`` stays ``1.0``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import run_benchmark
from pytest_evomemory.analysis.summary import StreamMetrics, summarize
from pytest_evomemory.configs.load import load_run_config
from pytest_evomemory.core.types import AgentResponse, BenchmarkSample, ScoredItem, ToolCall, Usage
from pytest_evomemory.core.types import Score as Verdict
from pytest_evomemory.rundir import dumps, write_arms_manifest
from pytest_evomemory.rundir.jsonl import _document_text
from pytest_evomemory.rundocs import ArmsFile, Response, RunFile, Score, SummaryFile, TranscriptEntry
from pytest_evomemory.runtime.records import (
    error_record,
    feedback_error_record,
    feedback_skipped_record,
    stream_error_record,
)

from ..conftest import SAMPLE_MEMORY_RUN

SAMPLE = BenchmarkSample("t1", "s", 3, "What is 2+2?", "4", "exact", group="math")
RESPONSE = AgentResponse(
    stream="s", task_id="t1", kind="task", final_answer="4", agent_turns=2,
    tool_calls=(ToolCall("recall", {"query": "2+2"}, "[]"), ToolCall("final_answer", {"answer": "4"}, "ok", True)),
    messages=({"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4", "cached": True}),
    usage=Usage(11, 3), memory_retains=1, memory_recalls=1, seconds=0.25, protocol_violation=None,
    memory_writes=({"tool": "retain", "content": "x"},), memory_recalled=({"record_id": "r", "content": "c", "score": 1},),
    cost_usd=None,
)
VERDICT = Verdict(True, "the answer is 4", "4", "4", "exact", "exact match", details={"f1": 1.0, "stems": ["4"]})


def _old_response(response: AgentResponse) -> dict[str, Any]:
    """``AgentResponse.to_dict`` as it was."""
    return {
        "stream": response.stream, "task_id": response.task_id, "kind": response.kind,
        "final_answer": response.final_answer, "agent_turns": response.agent_turns,
        "tool_calls": [{"name": c.name, "arguments": dict(c.arguments), "result": c.result, "error": c.error}
                       for c in response.tool_calls],
        "messages": [dict(m) for m in response.messages],
        "usage": {"prompt_tokens": response.usage.prompt_tokens, "completion_tokens": response.usage.completion_tokens,
                  "total_tokens": response.usage.total_tokens},
        "memory_retains": response.memory_retains, "memory_recalls": response.memory_recalls,
        "seconds": response.seconds, "protocol_violation": response.protocol_violation,
        "memory_writes": [dict(w) for w in response.memory_writes],
        "memory_recalled": [dict(h) for h in response.memory_recalled], "cost_usd": response.cost_usd,
    }


def test_records_are_written_as_the_hand_written_writers_wrote_them() -> None:
    old = _old_response(RESPONSE)
    new = RESPONSE.document()
    # responses.jsonl: the response without its messages; the transcript: its messages and tool calls
    assert dumps(new.line()) == dumps({k: v for k, v in old.items() if k != "messages"})
    assert dumps(new.transcript()) == dumps(
        {"task_id": "t1", "kind": "task", "messages": old["messages"], "tool_calls": old["tool_calls"]}
    )
    # scores.jsonl: ScoredItem.to_dict, with the recall similarity when there is one
    item = ScoredItem("s", "t1", 3, VERDICT, group="math")
    old_score = {"stream": "s", "task_id": "t1", "position": 3, "group": "math", "correct": True, "value": 1.0,
                 "raw_answer": "the answer is 4", "extracted": "4", "target": "4", "match_mode": "exact",
                 "reason": "exact match", "details": {"f1": 1.0, "stems": ["4"]}}
    assert dumps(item.document()) == dumps(old_score)
    assert dumps(item.document(0.5)) == dumps({**old_score, "recall_similarity": 0.5})
    # a failed episode's score, with and without its traceback
    failed = {"stream": "s", "task_id": "t1", "position": 3, "correct": False, "value": 0.0, "raw_answer": None,
              "extracted": None, "target": "4", "match_mode": "exact", "reason": "episode failed: boom", "details": {},
              "error": "boom", "group": "math"}
    assert dumps(error_record(SAMPLE, "boom").scored) == dumps(failed)
    assert dumps(error_record(SAMPLE, "boom", traceback="tb").scored) == dumps({**failed, "traceback": "tb"})
    # events.jsonl: the records as they travelled (Record.to_wire)
    where = {"stream": "s", "task_id": "t1", "position": 3}
    assert dumps(feedback_error_record(SAMPLE, "no", new).for_arm("memory").wire()) == dumps({
        "type": "feedback_error", "failure": {**where, "phase": "feedback", "reason": "no"}, "response": old,
        "evomemory_arm": "memory",
    })
    assert dumps(feedback_skipped_record(SAMPLE, "why").wire()) == dumps(
        {"type": "feedback_skipped", "skipped": {**where, "reason": "why"}}
    )
    assert dumps(stream_error_record("s", "down", "start").wire()) == dumps({
        "type": "stream_error",
        "failure": {"stream": "s", "task_id": None, "position": None, "phase": "start", "reason": "down"},
    })


@pytest.mark.parametrize("update", [
    {}, {"messages": None}, {"messages": []}, {"tool_calls": []}, {"cached": True},
    {"evomemory_arm": "memory"},  # a key the model does not declare: in the line, not the transcript
    # messages are not serialized by pydantic for the transcript: any JSON value in them writes alike
    {"messages": [{"role": "user", "content": "caf\u00e9 \ud83d\ude00", "n": [1, 2.5, -0.0, True, None, {"x": [{}]}]},
                  {"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{\"a\": 1}"}}],
                   "cached": True, "model": "m"}]},
])
def test_the_writers_two_lines_of_a_response_are_its_line_and_transcript(update: dict[str, Any]) -> None:
    response = Response.model_validate({**RESPONSE.document().written(), **update})
    line, transcript = response.written_lines()
    assert dumps(line) == dumps(response.line())
    assert dumps(transcript) == dumps(response.transcript())


def test_a_streams_metrics_are_written_as_to_dict_wrote_them() -> None:
    scores = [ScoredItem("s", f"t{i}", i, VERDICT if i % 2 else Verdict(False, "x", "x", "4", "exact", "no")).document()
              for i in range(3)]
    metrics: StreamMetrics = summarize(["s"], scores, [RESPONSE.document()])["s"]
    written = metrics.document().written()
    assert list(written) == [
        "stream", "tasks", "correct", "errors", "accuracy", "accuracy_ci", "figures", "headline", "groups", "stimuli",
        "feedback_turns", "agent_turns", "tool_calls", "memory_retains", "memory_recalls", "protocol_violations",
        "cached_responses", "prompt_tokens", "completion_tokens", "total_tokens", "seconds", "cost_usd",
        "per_stimulus", "learning_curve",
    ]
    assert written["per_stimulus"] == {"tokens": 14.0, "agent_turns": 2.0, "seconds": 0.25}
    assert written["headline"] == {"metric": "accuracy", "label": "accuracy", "value": 1 / 3}
    assert written["cached_responses"] == 1 and written["learning_curve"] == [0.0, 0.5, 0.333333]


def test_the_arms_manifest_is_written_as_before(tmp_path: Path) -> None:
    write_arms_manifest(tmp_path, [("a", tmp_path / "a", "a.yaml"), ("b", tmp_path / "b", "b.yaml")], ["x=1"], "sid")
    assert (tmp_path / "arms.json").read_text(encoding="ascii") == _document_text({
        "schema_version": 1, "session": "sid", "baseline": "a", "overrides": ["x=1"],
        "arms": [{"name": "a", "run_dir": "a", "config": "a.yaml"}, {"name": "b", "run_dir": "b", "config": "b.yaml"}],
    })
    assert ArmsFile.model_validate_json((tmp_path / "arms.json").read_text()).written()["arms"][1]["run_dir"] == "b"


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("rundocs") / "run"
    run_benchmark(load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=3, streams=None), run_dir)
    return run_dir


@pytest.mark.parametrize(("name", "model"), [("scores.jsonl", Score), ("responses.jsonl", Response)])
def test_every_record_of_a_run_reads_back_to_its_own_bytes(sample_run: Path, name: str, model: type[Any]) -> None:
    lines = (sample_run / name).read_text(encoding="ascii").splitlines()
    assert lines
    for line in lines:
        assert dumps(model.model_validate_json(line)) == line
    for transcript in (sample_run / "transcripts").glob("*.jsonl"):
        for line in transcript.read_text(encoding="ascii").splitlines():
            assert dumps(TranscriptEntry.model_validate_json(line)) == line


@pytest.mark.parametrize(("name", "model"), [("summary.json", SummaryFile), ("run.json", RunFile)])
def test_the_run_documents_read_back_to_their_own_bytes(sample_run: Path, name: str, model: type[Any]) -> None:
    text = (sample_run / name).read_text(encoding="ascii")
    assert _document_text(model.model_validate(json.loads(text))) == text


def test_a_comparison_is_its_model_and_writes_as_it_was_built(sample_run: Path, tmp_path: Path) -> None:
    """compare.json is built, validated into its model (rundocs.compare) and written
    with the keys, and key order, it was built with (it is not written key-sorted)."""
    from pytest_evomemory.reporting.html import load_runs, write_comparison
    from pytest_evomemory.rundocs.compare import Comparison

    files = write_comparison([sample_run, sample_run], tmp_path / "compare.html")
    written = json.loads(files.json.read_text(encoding="utf-8"))
    model = Comparison.model_validate(written)
    assert json.dumps(model.written()) == json.dumps(written)  # same keys, same order
    assert model.overall.vs_baseline[0].paired_tasks == model.overall.runs[0].tasks == 6
    assert model.continuous_label() is None and [run.label for run in load_runs([sample_run, sample_run])][1].endswith("#2")


def test_compare_and_replicates_parts_keep_the_keys_and_order_they_were_built_with() -> None:
    """compare.json and replicates.json are written unsorted: a part validated into its
    model writes exactly the keys it was given, extras (a figure's ``api_accuracy``,
    an estimate's own keys) included, in the order given, values untouched."""
    from pytest_evomemory.rundocs.compare import Replicates, RunEntry

    entry = {"label": "m", "present": True, "correct": 3, "tasks": 4, "accuracy": 0.75, "ci_low": 0.3, "ci_high": 0.95,
             "api_accuracy": 0.5, "api_ci_low": None, "api_ci_high": None, "protocol_violations": 0, "errors": None,
             "cached_responses": 1, "cost_usd": None}
    assert list(RunEntry.model_validate(entry).written().items()) == list(entry.items())
    assert RunEntry.model_validate({"label": "x", "present": False}).written() == {"label": "x", "present": False}
    later = RunEntry.model_validate({"tasks": 4, "label": "y", "present": True})
    later.correct = 2  # set after it was built: written after the keys it was built with
    assert list(later.written()) == ["tasks", "label", "present", "correct"]
    # the order is a private attribute of the part: copied with it, compared by ==
    built = RunEntry.model_validate(entry)
    assert list(built.model_copy().written()) == list(built.model_copy(deep=True).written()) == list(entry)
    assert list(built.model_copy(update={"correct": 2}).written()) == list(entry)
    assert built == RunEntry.model_validate(entry)
    assert built != RunEntry.model_validate(dict(reversed(entry.items())))  # same values, another order
    assert list(RunEntry.model_construct(**entry).written())[:2] == ["label", "present"]  # no order: the fields'
    document = {
        "schema_version": 2, "baseline": "a", "confidence": 0.95, "figure": "accuracy", "replicates": 2, "seeds": [0, 1],
        "methods": {"m": "x"}, "arms": [{"label": "a", "run_dirs": ["r1", "r2"], "seeds": [0, 1], "streams": {},
                                         "overall": {"accuracies": [0.5, 1], "n": 2, "mean": 0.75, "sd": None,
                                                     "ci_low": 0.1, "ci_high": 0.9, "effective_tasks": 3.5}}],
        "vs_baseline": [], "warnings": [], "comparisons": [], "generated": "now",
    }
    written = Replicates.model_validate(document).written()
    assert json.dumps(written) == json.dumps(document)  # an int accuracy stays an int, the extra key stays in place
