"""LoCoMo as a user runs it: ``pytest --evomemory-config=locomo_sample_memory``,
serially and with ``-n 2`` (one conversation per worker), offline and model-free,
gated with ``--evomemory-min-accuracy`` on the mean F1, the per-category table in
the terminal summary."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "workers", [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)]
)
def test_locomo_sample_runs_ingestion_then_questions(pytester: pytest.Pytester, workers: list[str]) -> None:
    # in process: under -n 2 the workers are processes anyway
    result = pytester.runpytest(
        "--evomemory-config=locomo_sample_memory", "--evomemory-set=benchmark.ingest=agent",
        "--evomemory-min-accuracy=0.05", "-p", "no:randomly", "-v", *workers,
    )
    result.assert_outcomes(passed=15)
    out = pytester.path / "evomemory-results" / "locomo_sample_memory"
    responses = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    ingestion = defaultdict(list)
    for response in responses:
        assert response["kind"] in ("task", "ingestion")  # no feedback on a static-memory stream
        if response["kind"] == "ingestion":
            ingestion[response["stream"]].append(response["task_id"])
    assert dict(ingestion) == {
        "conv-sample-1": ["session_1", "session_2", "session_3"], "conv-sample-2": ["session_1", "session_2"],
    }
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 15 and {s["match_mode"] for s in scores} == {"locomo_f1"}
    assert all(isinstance(s["details"]["evidence_recall"], float) for s in scores)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["stimuli"] == 20 and summary["passed"]
    # the gate reads the mean F1 (accuracy, F1 >= 0.5, is 0 for this model-free agent)
    (gate,) = summary["thresholds"]
    assert (gate["metric"], gate["value"], gate["met"]) == ("f1_mean", summary["overall"]["f1_mean"], True)
    assert summary["overall"]["accuracy"] == 0.0
    text = result.stdout.str()
    assert f"met: overall mean F1 {gate['value']:.3f}, minimum 0.050 (gated on mean F1, not accuracy)" in text
    assert [row["category"] for row in summary["categories"]["by_category"]] == [
        "single-hop", "multi-hop", "temporal", "open-domain", "adversarial",
    ]
    result.stdout.fnmatch_lines(["category *questions*mean F1*95% CI*evidence recall*", "single-hop *"])
    if workers:
        worker_of = defaultdict(set)
        for match in re.finditer(r"\[(gw\d)\].*test_task\[(conv-sample-\d)/", result.stdout.str()):
            worker_of[match.group(2)].add(match.group(1))
        assert set(worker_of) == {"conv-sample-1", "conv-sample-2"}
        assert all(len(found) == 1 for found in worker_of.values()), worker_of  # a conversation stays on one worker
    assert Path(out / "report.html").is_file()
