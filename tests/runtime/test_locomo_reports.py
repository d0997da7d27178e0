"""LoCoMo's figures where a user reads and gates them: ``--min-accuracy`` gates on the
mean F1 (the match mode's declared headline), ``summary.json``, the terminal and
``report.html`` carry the mean F1 per category with its interval and the evidence
recall, and a comparison of two arms adds the paired mean difference (MOVER) and Wilcoxon test of
the F1 beside McNemar. Driven in process through ``evomemory run`` / ``compare``
(:func:`pytest_evomemory.cli.main`) on the bundled sample conversations."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.categories import category_summary
from pytest_evomemory.analysis.clustered import mean_interval, paired_mean_interval
from pytest_evomemory.analysis.stats import wilcoxon_signed_rank
from pytest_evomemory.cli import main
from pytest_evomemory.evaluation.modes import MatchModeSpec, Metric, exact, match_mode
from pytest_evomemory.reporting.compare import build_comparison
from pytest_evomemory.reporting.rundata import RunData
from pytest_evomemory.reporting.terminal import format_comparison

from ..schema import assert_run_dir_valid, assert_valid


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _summary(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The memory arm gated at two minimums (overall met, one stream missed) and the
    control arm, run once for the module: about 2 s."""
    root = tmp_path_factory.mktemp("locomo-reports")
    memory, control = root / "memory", root / "control"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main([
            "run", "--config", "locomo_sample_memory", "--output-dir", str(memory),
            "--min-accuracy", "0.05", "--min-accuracy", "conv-sample-2=0.1",
        ])
        control_status = main(["run", "--config", "locomo_sample_no_memory", "--output-dir", str(control), "-q"])
    return {"memory": memory, "control": control, "status": status, "control_status": control_status,
            "stdout": out.getvalue()}


def test_min_accuracy_gates_locomo_on_the_mean_f1_not_on_accuracy(arms: dict[str, Any]) -> None:
    summary = _summary(arms["memory"])
    overall = summary["overall"]
    # the sample's recall baseline answers no question with F1 >= 0.5, yet its mean F1 is above 0.05
    assert overall["accuracy"] == 0.0 and 0.05 < overall["f1_mean"] < 0.1
    assert overall["headline"] == {"metric": "f1_mean", "label": "mean F1", "value": overall["f1_mean"]}
    gates = {gate["scope"]: gate for gate in summary["thresholds"]}
    assert gates["overall"] == {
        "scope": "overall", "metric": "f1_mean", "label": "mean F1", "minimum": 0.05,
        "value": overall["f1_mean"], "accuracy": 0.0, "met": True,
    }
    stream = summary["streams"]["conv-sample-2"]
    assert gates["conv-sample-2"]["value"] == stream["f1_mean"] < 0.1 and not gates["conv-sample-2"]["met"]
    assert arms["status"] == 1 and not summary["passed"]  # the stream's gate missed
    lines = arms["stdout"].splitlines()
    assert f"met: overall mean F1 {overall['f1_mean']:.3f}, minimum 0.050 (gated on mean F1, not accuracy)" in lines
    assert any(line.startswith("MISSED: conv-sample-2 mean F1") for line in lines)
    assert "evomemory: 1 threshold(s) missed; the session fails" in arms["stdout"]


def test_the_summary_gives_mean_f1_per_category_with_interval_and_evidence_recall(arms: dict[str, Any]) -> None:
    summary = _summary(arms["memory"])
    assert_run_dir_valid(arms["memory"])
    scores = _jsonl(arms["memory"] / "scores.jsonl")
    categories = summary["categories"]
    assert (categories["metric"], categories["label"]) == ("f1", "F1")
    rows = {row["category"]: row for row in categories["by_category"]}
    # the paper's names in its table order (the data's categories 4, 1, 2, 3, 5)
    assert list(rows) == ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]
    for name, row in rows.items():
        mine = [s for s in scores if s["group"] == name]
        assert row["tasks"] == len(mine)
        assert row["mean"] == pytest.approx(sum(s["details"]["f1"] for s in mine) / len(mine))
        recalls = [s["details"]["evidence_recall"] for s in mine if s["details"]["evidence_recall"] is not None]
        assert row["evidence_recall"] == pytest.approx(sum(recalls) / len(recalls))
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert categories["overall"]["mean"] == pytest.approx(summary["overall"]["f1_mean"])
    assert categories["overall"]["tasks"] == 15
    control = _summary(arms["control"])["categories"]
    assert all(row["evidence_recall"] is None for row in control["by_category"])  # nothing recalled by design


def test_terminal_and_page_show_the_category_table(arms: dict[str, Any]) -> None:
    text = arms["stdout"]
    assert "category     questions  mean F1       95% CI  Acc.  evidence recall  with evidence" in text
    assert "95% CI: Wilson interval of the mean F1 on the effective number of tasks, in percent" in text
    page = (arms["memory"] / "report.html").read_text(encoding="utf-8")
    table = page[page.index('<table class="categories">'):]
    table = table[: table.index("</table>")]
    assert [name for name in ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
            if f'title="{name}"' in table] == ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]
    assert "gated on" in page and "mean F1" in page


def test_compare_of_two_locomo_arms_adds_the_paired_f1_statistics(
    arms: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    page = tmp_path / "compare.html"
    assert main(["compare", str(arms["control"]), str(arms["memory"]), "-o", str(page)]) == 0
    document = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    assert_valid("compare.json", document)
    control = {(s["stream"], s["task_id"]): s["value"] for s in _jsonl(arms["control"] / "scores.jsonl")}
    memory = {(s["stream"], s["task_id"]): s["value"] for s in _jsonl(arms["memory"] / "scores.jsonl")}
    continuous = document["overall"]["vs_baseline"][0]["continuous"]
    interval, wilcoxon = paired_mean_interval(control, memory), wilcoxon_signed_rank(control, memory)
    assert continuous == {
        "metric": "f1", "label": "F1", "paired_tasks": 15, "mean_difference": pytest.approx(interval.mean),
        "ci_low": interval.low, "ci_high": interval.high, "wilcoxon_statistic": wilcoxon.statistic,
        "wilcoxon_p": wilcoxon.p_value, "wilcoxon_method": wilcoxon.method, "nonzero": wilcoxon.nonzero,
        "power": continuous["power"],
        "no_test": None,
    }
    # the smallest F1 gain detectable: (z(0.975) + z(0.80)) * sd of the F1 differences / sqrt(15)
    differences = [memory[key] - control[key] for key in control]
    mean = sum(differences) / 15
    sd = (sum((d - mean) ** 2 for d in differences) / 15) ** 0.5
    assert continuous["power"]["minimum_detectable_effect"] == pytest.approx((1.959964 + 0.841621) * sd / 15**0.5)
    assert document["overall"]["vs_baseline"][0]["mcnemar_p"] == 1.0  # nobody reaches F1 >= 0.5
    assert "Wilcoxon" in document["methods"]["continuous_p_value"]
    out = capsys.readouterr().out
    assert "F1 diff" in out and "Wilcoxon p" in out
    html = page.read_text(encoding="utf-8")
    assert "Wilcoxon p" in html and "95% CI (MOVER)" in html


def test_the_gain_gate_of_locomo_arms_judges_the_mean_f1_difference(
    arms: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As every gate of a LoCoMo stream: on the headline, the mean F1 (its paired
    difference and Wilcoxon p), not the share with F1 >= 0.5 (0 for both arms here)."""
    capsys.readouterr()
    page = tmp_path / "compare.html"
    gates = ["--min-gain", "0.1", "--min-gain", "conv-sample-1=100"]
    assert main(["compare", str(arms["control"]), str(arms["memory"]), "-o", str(page), *gates]) == 1
    continuous = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))["overall"]["vs_baseline"][0]["continuous"]
    assert continuous["mean_difference"] * 100 >= 0.1  # the accuracy difference is 0: that gate would be missed
    out = capsys.readouterr().out
    assert (f"met: overall gain of locomo_sample_memory over locomo_sample_no_memory "
            f"{continuous['mean_difference'] * 100:+.1f} points of mean F1 over 15 paired tasks, "
            f"95% CI [{continuous['ci_low'] * 100:+.1f}, {continuous['ci_high'] * 100:+.1f}] (MOVER), "
            f"Wilcoxon p={continuous['wilcoxon_p']:.3g}, minimum +0.1 points") in out, out
    effect = continuous["power"]["minimum_detectable_effect"] * 100
    assert f"power: locomo_sample_memory: the smallest gain detectable with 80% power (two-sided alpha 0.05) on " \
           f"15 tasks is {effect:.1f} pp" in out
    assert "MISSED: conv-sample-1 gain of locomo_sample_memory over locomo_sample_no_memory" in out


def test_replicates_of_locomo_arms_compare_and_gate_the_mean_f1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", "--config", "locomo_sample_no_memory", "--config", "locomo_sample_memory", "--repeats", "2",
                 "--output-dir", str(out), "-q", "--min-gain", "0.1"]) == 0
    document = json.loads((out / "replicates.json").read_text(encoding="utf-8"))
    assert_valid("replicates.json", document)
    assert document["figure"] == "mean F1"
    for arm in document["arms"]:
        means = [_summary(out / arm["label"] / f"r{index}")["overall"]["f1_mean"] for index in (1, 2)]
        assert arm["overall"]["accuracies"] == means
    assert min(document["arms"][1]["overall"]["accuracies"]) > 0  # the memory arm's accuracy is 0 in every run
    printed = capsys.readouterr().out
    assert "mean F1" in printed.splitlines()[printed.splitlines().index(next(
        line for line in printed.splitlines() if line.startswith("stream ") and "per replicate" in line))]
    assert "points of mean F1, the per-task mean over 2 replicates" in printed
    # across replicates, each question's F1 is averaged over the replicates: the interval is over questions
    memory = document["arms"][1]["overall"]
    assert memory["tasks"] == 15 and 0 <= memory["ci_low"] < memory["mean"] < memory["ci_high"] <= 1
    assert "mean F1</th>" in (out / "replicates.html").read_text(encoding="utf-8")


# ------------------------------------------------------- statistics by hand


def _run(label: str, values: dict[tuple[str, str], float]) -> RunData:
    scores = [
        {"stream": stream, "task_id": task, "position": index, "correct": value >= 0.5, "error": None,
         "match_mode": "locomo_f1", "value": value, "details": {"f1": value}}
        for index, ((stream, task), value) in enumerate(values.items())
    ]
    streams = {
        stream: {"tasks": sum(s["stream"] == stream for s in scores),
                 "correct": sum(s["stream"] == stream and s["correct"] for s in scores)}
        for stream in dict.fromkeys(s["stream"] for s in scores)
    }
    summary = {"streams": streams, "overall": {"tasks": len(scores), "correct": sum(s["correct"] for s in scores)}}
    return RunData(run_dir=Path(label), label=label, summary=summary, run={}, given_scores=scores)


def test_the_continuous_comparison_agrees_with_a_hand_computation() -> None:
    """Stream ``a``: differences (run - baseline) 0.1, 0.2, -0.3, 0.4: mean 0.1; no
    zero and no tie, so the exact null distribution: ranks of |d| are 1, 2, 3, 4 and
    W+ = 1 + 2 + 4 = 7. Of the 16 sign patterns of ranks 1..4, the sums >= 7 are
    {7: 2 patterns, 8: 1, 9: 1, 10: 1} = 5, the sums <= 7 are 13: p = 2 * 5/16.
    McNemar on F1 >= 0.5: two tasks go from wrong to right, none back: 2 * 0.5**2.

    This re-implements ``scipy.stats.wilcoxon(d)`` with its defaults as the SciPy
    reference defines them (https://docs.scipy.org/doc/scipy/reference/generated/
    scipy.stats.wilcoxon.html: ``zero_method="wilcox"`` "discards all
    zero-differences", ``correction=False``, ``alternative="two-sided"``,
    ``method="auto"``: the exact distribution for small samples without ties or
    zeros); SciPy reports min(W+, W-) = 3 as its two-sided statistic where we report
    W+ = 7, and the p-value is the same.

    Stream ``b``: F1 0.5, 0.0 against 0.5, 1.0: the runs' task scores have
    correlation -1, so MOVER's interval adds the two runs' half-widths on each side:
    [0.5 - (p2 - l2) - (u1 - p1), 0.5 + (u2 - p2) + (p1 - l1)] (Zou & Donner 2008),
    each run's interval being its own :func:`mean_interval`."""
    baseline = _run("base", {("a", "1"): 0.4, ("a", "2"): 0.3, ("a", "3"): 0.8, ("a", "4"): 0.5,
                             ("b", "1"): 0.5, ("b", "2"): 0.0})
    other = _run("other", {("a", "1"): 0.5, ("a", "2"): 0.5, ("a", "3"): 0.5, ("a", "4"): 0.9,
                           ("b", "1"): 0.5, ("b", "2"): 1.0})
    document = build_comparison([baseline, other])
    versus = document["streams"]["a"]["vs_baseline"][0]
    continuous = versus["continuous"]
    assert continuous["mean_difference"] == pytest.approx(0.1)
    assert (continuous["wilcoxon_statistic"], continuous["wilcoxon_method"], continuous["nonzero"]) == (7, "exact", 4)
    assert continuous["wilcoxon_p"] == pytest.approx(2 * 5 / 16)
    assert continuous["ci_low"] < 0.1 < continuous["ci_high"]
    assert (versus["only_this_correct"], versus["only_baseline_correct"], versus["mcnemar_p"]) == (
        2, 0, pytest.approx(2 * 0.5**2)
    )
    two = document["streams"]["b"]["vs_baseline"][0]["continuous"]
    first, second = mean_interval([0.5, 0.0]), mean_interval([0.5, 1.0])
    assert (first.mean, second.mean) == (0.25, 0.75)
    low = 0.5 - (second.mean - second.low) - (first.high - first.mean)  # type: ignore[operator]
    high = 0.5 + (second.high - second.mean) + (first.mean - first.low)  # type: ignore[operator]
    assert (two["mean_difference"], two["ci_low"], two["ci_high"]) == (
        0.5, pytest.approx(max(low, -1.0)), pytest.approx(min(high, 1.0))
    )
    # one zero difference among two: a single ranked pair, p = 1 by sign-flip enumeration
    assert (two["nonzero"], two["wilcoxon_method"], two["wilcoxon_p"]) == (1, "permutation", 1.0)


def test_an_arm_with_no_paired_task_gets_no_test_and_is_told_why() -> None:
    """An arm whose every stream stopped before its first score (the Mem0 arm that
    could not ingest) ran, but shares no scored task with the baseline: no McNemar,
    no Wilcoxon, no difference or interval, and the reason instead of a p of 1."""
    baseline = _run("base", {("a", "1"): 0.4, ("a", "2"): 0.9})
    stopped = RunData(
        run_dir=Path("stopped"), label="stopped", run={}, given_scores=[],
        summary={"streams": {"a": {"tasks": 0, "correct": 0}}, "overall": {"tasks": 0, "correct": 0}},
    )
    document = build_comparison([baseline, stopped])
    assert_valid("compare.json", document)
    for scope in (document["streams"]["a"], document["overall"]):
        versus = scope["vs_baseline"][0]
        assert versus["paired_tasks"] == 0
        assert (versus["mcnemar_p"], versus["difference"], versus["ci_low"], versus["ci_high"]) == (None,) * 4
        assert versus["no_test"] == "no task was scored in both runs, so there is no paired test"
        continuous = versus["continuous"]
        assert (continuous["wilcoxon_p"], continuous["wilcoxon_statistic"], continuous["mean_difference"]) == (None,) * 3
        assert continuous["no_test"] == versus["no_test"]
    assert any(
        warning.startswith("overall: stopped against base: no task was scored in both runs") and "2 in base" in warning
        for warning in document["warnings"]
    ), document["warnings"]
    lines = "\n".join(format_comparison(document))
    assert "1.000" not in lines and "no paired test" in lines
    # an arm that did pair with the baseline says nothing of the kind
    assert build_comparison([baseline, baseline])["overall"]["vs_baseline"][0]["no_test"] is None


def test_an_accuracy_comparison_has_no_continuous_statistics() -> None:
    def accuracy_run(label: str, correct: list[bool]) -> RunData:
        scores = [{"stream": "s", "task_id": str(i), "position": i, "correct": c, "error": None, "match_mode": "exact"}
                  for i, c in enumerate(correct)]
        summary = {"streams": {"s": {"tasks": 2, "correct": sum(correct)}}, "overall": {"tasks": 2}}
        return RunData(run_dir=Path(label), label=label, summary=summary, run={}, given_scores=scores)

    document = build_comparison([accuracy_run("a", [True, False]), accuracy_run("b", [True, True])])
    assert document["overall"]["vs_baseline"][0]["continuous"] is None
    assert "continuous_p_value" not in document["methods"]


def test_the_headline_is_declared_by_the_mode_and_must_be_a_mean_figure() -> None:
    assert match_mode("locomo_f1").headline_metric is not None
    assert match_mode("exact").headline_metric is None
    share = Metric("api", "api_ok", "API")
    with pytest.raises(ValueError, match="headline 'api' is not one of its declared mean figures"):
        MatchModeSpec("m", exact, (share,), headline="api")


def test_category_rows_name_their_category_in_order() -> None:
    rows = category_summary([{"group": "adversarial", "value": 1.0}, {"group": "single-hop", "value": 0.0}])
    assert [row["category"] for row in rows["by_category"]] == ["single-hop", "adversarial"]


def test_the_comparison_as_built_reads_as_its_document_does() -> None:
    """A session's terminal lines and gain gates read the comparison as it was built
    (ComparisonFiles.model), not compare.json's document validated again: both must
    say the same, for a continuous comparison, an arm with no paired task and an
    accuracy one."""
    from pytest_evomemory.analysis.gain import REQUIRES, GainThreshold, check_gains
    from pytest_evomemory.reporting.compare import comparison_model
    from pytest_evomemory.rundocs.base import RunDoc

    baseline = _run("base", {("a", "1"): 0.4, ("a", "2"): 0.9, ("a", "3"): 0.0})
    better = _run("better", {("a", "1"): 0.9, ("a", "2"): 1.0, ("a", "3"): 0.6})
    stopped = RunData(
        run_dir=Path("stopped"), label="stopped", run={}, given_scores=[],
        summary={"streams": {"a": {"tasks": 0, "correct": 0}}, "overall": {"tasks": 0, "correct": 0}},
    )
    gates = [GainThreshold(scope, points, requires) for scope in ("a", "overall") for points in (0.0, 5.0) for requires in REQUIRES]
    for runs in ([baseline, better], [baseline, stopped, better], [better, baseline]):
        built = comparison_model(runs)
        # written by the parts' own walk, as pydantic's serializer writes it: same keys, order and values
        assert json.dumps(built.written()) == json.dumps(RunDoc.written(built))
        assert built.written() == RunDoc.written(built)
        document = json.loads(json.dumps({**built.written(), "generated": "2026-01-01T00:00:00+00:00"}))
        assert format_comparison(built) == format_comparison(document)
        assert check_gains(built, gates) == check_gains(document, gates)
        assert check_gains(built, gates, complete=False) == check_gains(document, gates, complete=False)
