"""summary.json's metrics and the terminal table: intervals, API / Acc., groups, cache, violations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_evomemory.analysis.stats import wilson_interval
from pytest_evomemory.analysis.summary import ResponseTally, is_cached, summarize
from pytest_evomemory.reporting.terminal import format_table


def response(stream: str, *, cached: bool = False, violation: str | None = None, kind: str = "task") -> dict[str, Any]:
    return {
        "stream": stream, "task_id": "t", "kind": kind, "agent_turns": 1, "tool_calls": [], "memory_retains": 0,
        "memory_recalls": 0, "usage": {"prompt_tokens": 10, "completion_tokens": 5}, "seconds": 0.5,
        "protocol_violation": violation, **({"cached": True} if cached else {}),
    }


def outcomes() -> list[dict[str, Any]]:
    mmlu = [
        {"stream": "mmlu_pro", "position": i, "correct": correct, "group": group}
        for i, (correct, group) in enumerate([
            (True, "Philosophy"), (True, "Economics"), (False, "Economics"), (True, "Engineering"),
            (False, "Philosophy"), (True, "Economics"),
        ])
    ]
    tool = [
        {"stream": "toolbench", "position": i, "correct": i < 2, "match_mode": "toolbench",
         "details": {"api_match": i < 3, "call_match": i < 2}}
        for i in range(4)
    ]
    tool.append({"stream": "toolbench", "position": 4, "correct": False, "error": "boom", "details": {}, "group": None,
                 "match_mode": "toolbench"})
    return mmlu + tool


def test_accuracy_interval_api_figure_groups_and_counts() -> None:
    responses = [response("mmlu_pro", cached=True), response("mmlu_pro", cached=True, kind="feedback"),
                 response("toolbench", violation="no final_answer"), response("toolbench")]
    metrics = summarize(["mmlu_pro", "toolbench"], outcomes(), responses)
    mmlu, tool, overall = (metrics[n].document().written() for n in ("mmlu_pro", "toolbench", "overall"))
    assert mmlu["accuracy"] == 4 / 6 and mmlu["accuracy_ci"] == [round(b, 6) for b in wilson_interval(4, 6)]
    # a figure is reported where the stream's match mode declares it (toolbench's API)
    assert "api_accuracy" not in mmlu and mmlu["figures"] == {} and tool["figures"] == {"api": "API"}
    assert list(mmlu["groups"]) == ["Economics", "Engineering", "Philosophy"]
    assert mmlu["groups"]["Economics"] == {
        "tasks": 3, "correct": 2, "accuracy": 2 / 3, "accuracy_ci": [round(b, 6) for b in wilson_interval(2, 3)],
    }
    # A failed episode counts as a wrong answer and as no API match: 3 of 5, 2 of 5.
    assert (tool["api_matches"], tool["api_accuracy"], tool["accuracy"]) == (3, 3 / 5, 2 / 5)
    assert tool["groups"] == {}
    assert (mmlu["cached_responses"], tool["cached_responses"], overall["cached_responses"]) == (2, 0, 2)
    assert (tool["protocol_violations"], overall["protocol_violations"]) == (1, 1)
    assert overall["groups"] == {} and "api_accuracy" not in overall
    assert overall["accuracy_ci"] == [round(b, 6) for b in wilson_interval(6, 11)]


def test_no_tasks_means_no_interval() -> None:
    metrics = summarize(["empty"], [], [])
    assert metrics["empty"].document().written()["accuracy_ci"] is None


def test_terminal_table_shows_interval_api_acc_groups_violations_and_cache() -> None:
    responses = [response("mmlu_pro", cached=True), response("toolbench", violation="v")]
    lines = format_table(summarize(["mmlu_pro", "toolbench"], outcomes(), responses))
    header = lines[0].split("  ")
    for column in ("accuracy", "95% CI", "API / Acc.", "violations", "cached"):
        assert column in [cell.strip() for cell in header if cell.strip()], column
    mmlu_row = next(line for line in lines if line.startswith("mmlu_pro"))
    low, high = wilson_interval(4, 6)
    assert f"[{low * 100:.1f}, {high * 100:.1f}]" in mmlu_row
    tool_row = next(line for line in lines if line.startswith("toolbench"))
    assert "60.0% / 40.0%" in tool_row
    group_rows = [line.split()[0] for line in lines if line.startswith("  ")]
    assert group_rows == ["Economics", "Engineering", "Philosophy"]
    assert any("1 of 2 responses came from the response cache" in line for line in lines)


def test_terminal_table_without_api_streams_has_no_api_column() -> None:
    lines = format_table(summarize(["a"], [{"stream": "a", "position": 0, "correct": True}], []))
    assert "API" not in lines[0]
    assert not any("response cache" in line for line in lines)


def test_a_response_is_cached_when_it_says_so_or_every_model_call_was_replayed() -> None:
    replayed = {"role": "assistant", "content": "x", "cached": True}
    fresh = {"role": "assistant", "content": "y"}
    user = {"role": "user", "content": "q"}
    assert is_cached({"cached": True})
    assert is_cached({"messages": [user, replayed, replayed]})
    assert not is_cached({"messages": [user, replayed, fresh]})
    assert not is_cached({"messages": [user]})  # no model call (a model-free agent)
    assert is_cached({}, [user, replayed])  # responses.jsonl has no messages: the transcript's
    metrics = summarize(["s"], [], [{**response("s"), "messages": [user, replayed]}, {**response("s"), "messages": [fresh]}])
    assert metrics["s"].cached_responses == 1


def test_a_priced_run_gets_a_cost_column_and_an_unpriced_one_none() -> None:
    """The cost is one column of reporting/columns.py: shown where a stream's model is
    priced (model.pricing), absent rather than $0 where it is not."""
    from pytest_evomemory.reporting.columns import stream_columns

    priced = [{**response("a"), "cost_usd": 0.0125}, {**response("a", kind="feedback"), "cost_usd": 0.0025}]
    metrics = summarize(["a"], [{"stream": "a", "position": 0, "correct": True}], priced)
    assert metrics["a"].document().written()["cost_usd"] == metrics["overall"].document().written()["cost_usd"] == 0.015
    lines = format_table(metrics)
    assert lines[0].rstrip().endswith("cost")
    assert lines[2].rstrip().endswith("$0.0150") and lines[-2].rstrip().endswith("$0.0150")  # stream, overall
    assert "cost" in [column.header for column in stream_columns([metrics["a"].document()], "html")]
    unpriced = summarize(["a"], [{"stream": "a", "position": 0, "correct": True}], [response("a")])
    assert unpriced["a"].document().written()["cost_usd"] is None
    assert "cost" not in format_table(unpriced)[0]


def test_compare_json_carries_each_arms_cost(tmp_path: Path) -> None:
    from pytest_evomemory.reporting.compare import build_comparison
    from pytest_evomemory.reporting.rundata import load_runs

    from .conftest import write_run_dir

    priced = write_run_dir(tmp_path / "priced", "priced", {"s": [True, False]})
    summary = json.loads((priced / "summary.json").read_text())
    for scope in (summary["streams"]["s"], summary["overall"]):
        scope["cost_usd"] = 0.02
    (priced / "summary.json").write_text(json.dumps(summary))
    unpriced = write_run_dir(tmp_path / "unpriced", "unpriced", {"s": [True, True]})
    document = build_comparison(load_runs([unpriced, priced]))
    assert [entry.get("cost_usd") for entry in document["overall"]["runs"]] == [None, 0.02]
    assert [entry.get("cost_usd") for entry in document["streams"]["s"]["runs"]] == [None, 0.02]


def test_responses_tallied_as_they_arrive_sum_to_the_same_figures_as_kept_ones() -> None:
    """The collector keeps a tally of the responses, not the responses (issue 29)."""
    responses = [
        response("mmlu_pro", cached=True), {**response("toolbench", violation="x"), "cost_usd": 0.25, "seconds": 0.1},
        response("mmlu_pro", kind="feedback"), {**response("other"), "seconds": 0.2, "cost_usd": 0.5},
        {**response("toolbench"), "tool_calls": [{"name": "recall"}], "messages": [{"role": "assistant", "cached": True}]},
    ]
    tally = ResponseTally()
    for each in responses:
        tally.add(each)
    kept = summarize(["mmlu_pro", "toolbench"], outcomes(), responses)
    tallied = summarize(["mmlu_pro", "toolbench"], outcomes(), tally)
    assert list(tallied) == list(kept) == ["mmlu_pro", "toolbench", "other", "overall"]
    assert {name: m.document().written() for name, m in tallied.items()} == {name: m.document().written() for name, m in kept.items()}


def test_a_library_that_stored_nothing_gets_a_page_column_and_one_that_stored_all_none() -> None:
    """The retains a library's own extraction kept nothing from (Mem0 with infer:
    true) are a column of the page's work table where a stream counts some, as the
    cost is where a model is priced; absent elsewhere, and never in the terminal
    table (the terminal says it in a line of its own)."""
    from pytest_evomemory.reporting.columns import stream_columns

    scored = [{"stream": "a", "position": 0, "correct": True}]
    unstored = summarize(["a"], scored, [{**response("a"), "memory_unstored": 2}, response("a", kind="feedback")])
    columns = {column.header: column for column in stream_columns([unstored["a"].document()], "html")}
    assert columns["stored nothing"].cell(unstored["a"].document()) == "2"
    assert "stored nothing" not in [column.header for column in stream_columns([unstored["a"].document()], "terminal")]
    stored = summarize(["a"], scored, [response("a")])
    assert "stored nothing" not in [column.header for column in stream_columns([stored["a"].document()], "html")]
