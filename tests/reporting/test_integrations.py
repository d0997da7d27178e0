"""What other tools read from a benchmark run: pytest-json-report, JUnit XML, the compare page."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.analysis.stats import mcnemar_exact

from ..conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN, read_jsonl
from .conftest import parse_html, task_records
from .test_cli import console_script

STREAMS = ["sample_facts", "sample_choice"]


def run_sample(pytester: pytest.Pytester, config: Path, output: str, *extra: str, limit: int | None = None) -> Path:
    """Run a sample config (12 tasks per stream, or the first ``limit``) and return its run directory."""
    args = [f"--evomemory-config={config}", f"--evomemory-output-dir={output}", "-p", "no:randomly", *extra]
    if limit is not None:
        args.append(f"--evomemory-limit={limit}")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=len(STREAMS) * (limit or 12))
    return pytester.path / output


def scores_by_task(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {f"{s['stream']}/{s['task_id']}": s for s in read_jsonl(run_dir / "scores.jsonl")}


def task_id_of(nodeid: str) -> str:
    return nodeid.rsplit("[", 1)[1].rstrip("]")


def json_report_run(pytester: pytest.Pytester, limit: int | None = None) -> tuple[dict[str, Any], Path]:
    run_dir = run_sample(pytester, SAMPLE_MEMORY_RUN, "out", "--json-report", "--json-report-file=report.json", limit=limit)
    return json.loads((pytester.path / "report.json").read_text(encoding="utf-8")), run_dir


def test_json_report_gives_each_task_its_score_as_metadata(pytester: pytest.Pytester) -> None:
    report, run_dir = json_report_run(pytester)
    scores = scores_by_task(run_dir)
    tasks = [t for t in report["tests"] if "test_task[" in t["nodeid"]]
    assert len(tasks) == 24
    for test in tasks:
        scored = scores[task_id_of(test["nodeid"])]
        metadata = test["metadata"]["evomemory"]
        assert {key: metadata[key] for key in ("correct", "extracted", "target", "match_mode", "position", "reason")} == {
            key: scored[key] for key in ("correct", "extracted", "target", "match_mode", "position", "reason")
        }
        assert metadata["stream"] == scored["stream"] and metadata["cached"] is False and metadata["violation"] is None
    assert sum(t["metadata"]["evomemory"]["correct"] for t in tasks) == 14


def test_json_report_has_an_evomemory_section_with_the_summary(pytester: pytest.Pytester) -> None:
    report, run_dir = json_report_run(pytester, limit=4)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    block = report["evomemory"]
    assert [arm["name"] for arm in block["arms"]] == ["sample_memory"] and block["baseline"] == "sample_memory"
    section = block["arms"][0]["summary"]
    assert set(section["streams"]) == set(STREAMS)
    assert section["overall"]["tasks"] == 8
    assert section["overall"]["accuracy"] == pytest.approx(summary["overall"]["accuracy"])
    for name in STREAMS:
        assert section["streams"][name]["learning_curve"] == summary["streams"][name]["learning_curve"]
    assert section["run"] == "sample_memory" and section["passed"] is True
    assert report["exitcode"] == 0


@pytest.mark.parametrize(
    "family",
    [
        "xunit1",
        "xunit2",
    ],
)
def test_junit_xml_carries_each_task_score_as_properties(pytester: pytest.Pytester, family: str) -> None:
    run_dir = run_sample(pytester, SAMPLE_MEMORY_RUN, "out", "--junitxml=junit.xml", "-o", f"junit_family={family}", limit=4)
    scores = scores_by_task(run_dir)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    cases = [case for case in root.iter("testcase") if "test_task[" in case.get("name", "")]
    assert len(cases) == len(scores) == 8
    for case in cases:
        scored = scores[task_id_of(case.get("name", ""))]
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        # JUnit XML holds strings: pytest writes str(value), so a missing answer is "None".
        for key in ("correct", "extracted", "target", "match_mode", "position"):
            assert properties[f"evomemory_{key}"] == str(scored[key])
    correct = [p for p in root.iter("property") if p.get("name") == "evomemory_correct" and p.get("value") == "True"]
    assert len(correct) == sum(s["correct"] for s in scores.values()) > 0


def test_compare_memory_against_no_memory_draws_two_curves_per_stream(pytester: pytest.Pytester) -> None:
    without = run_sample(pytester, SAMPLE_NO_MEMORY_RUN, "runs/no_memory")
    with_memory = run_sample(pytester, SAMPLE_MEMORY_RUN, "runs/memory")
    output = pytester.path / "compare.html"
    result = subprocess.run(
        [*console_script(), "compare", str(without), str(with_memory), "-o", str(output)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-2:] == [str(output), str(output.with_suffix(".json"))]
    assert any(line.startswith("sample_facts") and "baseline" in line for line in lines)
    document = json.loads(output.with_suffix(".json").read_text(encoding="utf-8"))
    facts = document["streams"]["sample_facts"]["vs_baseline"][0]
    assert facts["paired_tasks"] == 12 and round(facts["difference"], 4) == round(7 / 12, 4)
    assert facts["mcnemar_p"] == mcnemar_exact(0, 7) and document["warnings"] == []
    tree = parse_html(output.read_text(encoding="utf-8"))
    curves = tree.find_all("svg", "curve")
    assert [svg.attrs["data-stream"] for svg in curves] == STREAMS
    for svg in curves:
        series = svg.find_all("g", "series")
        assert [g.attrs["data-run"] for g in series] == ["sample_no_memory", "sample_memory"]
        assert all(len(g.find_all("polyline")[0].attrs["points"].split()) == 12 for g in series)
    text = tree.all_text()
    assert "+58.3 pp" in text  # 0/12 without memory, 7/12 with


def test_a_pytest_run_leaves_report_html_in_the_run_directory(pytester: pytest.Pytester) -> None:
    run_dir = run_sample(pytester, SAMPLE_MEMORY_RUN, "out")
    tree = parse_html((run_dir / "report.html").read_text(encoding="utf-8"))
    assert len(tree.find_all("svg", "curve")) == 2
    # The drill-down shows what memory returned into each task turn, as the runtime recorded it.
    tasks = [r for r in read_jsonl(run_dir / "responses.jsonl") if r["kind"] == "task"]
    recalled = [r for r in tasks if r["memory_recalled"]]
    assert recalled and all(hit["content"].startswith("Task:") for r in recalled for hit in r["memory_recalled"])
    assert all(r["memory_recalled"] == [] for r in tasks if r["memory_recalls"] == 0)
    pages = task_records(run_dir / "report.html")
    details = {(stream, task["i"]): task for stream, tasks in pages.items() for task in tasks}
    first = recalled[0]
    shown = [text for text, _ in details[(first["stream"], first["task_id"])]["R"]["i"]]
    assert first["memory_recalled"][0]["content"] in shown
    assert [task["p"] for task in pages["sample_facts"]][:3] == ["1", "2", "3"]


def test_evomemory_compare_option_writes_the_comparison_after_the_run(pytester: pytest.Pytester) -> None:
    baseline = run_sample(pytester, SAMPLE_NO_MEMORY_RUN, "no_memory")
    run_dir = run_sample(pytester, SAMPLE_MEMORY_RUN, "memory", f"--evomemory-compare={baseline}")
    # the terminal names both files, as a session of arms does
    printed = pytester.runpytest(
        f"--evomemory-config={SAMPLE_MEMORY_RUN}", "--evomemory-output-dir=memory", "-p", "no:randomly",
        f"--evomemory-compare={baseline}",
    ).stdout.str()
    assert f"comparison: {run_dir.resolve() / 'compare.html'} (" in printed
    assert f"comparison data: {run_dir.resolve() / 'compare.json'}" in printed
    tree = parse_html((run_dir / "compare.html").read_text(encoding="utf-8"))
    for svg in tree.find_all("svg", "curve"):
        assert [g.attrs["data-run"] for g in svg.find_all("g", "series")] == ["sample_no_memory", "sample_memory"]


def test_what_a_ci_gate_reads_for_each_exit_status(pytester: pytest.Pytester) -> None:
    """docs/artefacts.md ("pytest-json-report and JUnit XML", summary.json's `passed`) and
    docs/protocol.md's exit statuses, as a team's CI step reads them: a missed accuracy
    gate is exit 1 with the arm's `passed` false; a missed gain gate is exit 1 with every
    arm's `passed` true and the verdict in `gains`; a session that ran no task is exit 5
    without an `evomemory` key; a refused config is exit 4 without a report file."""

    def session(name: str, *args: str) -> tuple[int, dict[str, Any] | None]:
        report = pytester.path / f"{name}.json"
        result = pytester.runpytest(*args, f"--evomemory-output-dir={name}", "--evomemory-limit=2", "-p", "no:randomly",
                                    "--json-report", f"--json-report-file={report}")
        return int(result.ret), json.loads(report.read_text(encoding="utf-8")) if report.exists() else None

    memory, control = f"--evomemory-config={SAMPLE_MEMORY_RUN}", f"--evomemory-config={SAMPLE_NO_MEMORY_RUN}"
    status, report = session("accuracy", memory, "--evomemory-min-accuracy=0.9")
    assert status == 1 and report is not None and report["evomemory"]["arms"][0]["summary"]["passed"] is False
    status, report = session("gain", control, memory, "--evomemory-min-gain=90")
    assert status == 1 and report is not None
    assert [arm["summary"]["passed"] for arm in report["evomemory"]["arms"]] == [True, True]
    assert [gain["met"] for gain in report["evomemory"]["gains"]] == [False]
    status, report = session("none", memory, "-k", "no_such_task")
    assert status == 5 and report is not None and "evomemory" not in report
    status, report = session("refused", memory, "--evomemory-set", "agent.max_step=3")
    assert status == 4 and report is None
