"""report.html and the comparison page, read back as a tree (no browser needed)."""

from __future__ import annotations

import json
import re
import shutil
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.analysis.stats import wilson_interval
from pytest_evomemory.reporting.chart import _ticks, display_points
from pytest_evomemory.reporting.drilldown import SCRIPT
from pytest_evomemory.reporting.html import (
    ReportError,
    Series,
    curve_svg,
    legend_layout,
    load_run,
    load_runs,
    render_report,
    write_comparison_report,
    write_html_report,
)

from .conftest import (
    HOSTILE,
    Element,
    assert_only_our_script,
    parse_html,
    stream_rows,
    task_records,
    write_responses,
)

MakeRun = Callable[..., Path]

STREAMS: dict[str, list[bool | None]] = {"facts": [False, True, True, None], "choice": [True, False, True]}
TABLE_HEADERS = [
    "stream", "tasks", "correct", "errors", "accuracy", "95% CI", "stimuli", "agent turns",
    "tool calls", "retains", "recalls", "violations", "cached", "tokens", "tokens / stimulus", "turns / stimulus",
    "time / stimulus",
]


def read(path: Path) -> tuple[str, Element]:
    text = path.read_text(encoding="utf-8")
    return text, parse_html(text)


def rows(table: Element) -> list[list[str]]:
    return [[cell.all_text().strip() for cell in tr.children if cell.tag in ("td", "th")] for tr in table.find_all("tr")]


def test_report_is_written_into_the_run_directory_with_table_and_one_curve_per_stream(make_run: MakeRun) -> None:
    run_dir = make_run("with_memory", STREAMS)
    path = write_html_report(run_dir)
    assert path == run_dir / "report.html"
    _, tree = read(path)
    assert [t.find_all("caption")[0].all_text() for t in tree.find_all("table", "streams")] == ["Accuracy", "Work done", "Cost"]
    body = stream_rows(tree)
    assert body[0] == TABLE_HEADERS
    low, high = wilson_interval(2, 4)
    assert body[1][:6] == ["facts", "4", "2", "1", "50.0%", f"[{low * 100:.1f}, {high * 100:.1f}]"]
    assert body[1][6:14] == ["7", "14", "7", "3", "4", "0", "0", "770"]  # no feedback turn (retain) after the failed episode
    assert body[1][14:] == ["110.0", "2.00", "500.00 ms"]
    assert body[2][:5] == ["choice", "3", "2", "0", "66.7%"]
    assert body[3][:5] == ["overall", "7", "4", "1", "57.1%"]
    curves = tree.find_all("svg", "curve")
    assert [svg.attrs["data-stream"] for svg in curves] == ["facts", "choice"]
    for svg, outcomes in zip(curves, STREAMS.values(), strict=True):
        (series,) = svg.find_all("g", "series")
        assert series.attrs["data-run"] == "with_memory"
        points = series.find_all("polyline")[0].attrs["points"].split()
        assert len(points) == len(outcomes)
        assert len(series.find_all("circle", "point")) == len(outcomes)  # a hover target per task


def test_a_long_curve_is_thinned_for_display_keeping_its_shape() -> None:
    """20,000 points would be 20,000 coordinates per curve: the drawing keeps each
    stretch's lowest and highest point (a dip stays visible); the data is untouched."""
    values = [0.5] * 20_000
    values[12_345] = 0.1  # one dip
    drawn = display_points(values)
    assert len(drawn) <= 1000
    assert drawn[0] == (1, 0.5) and drawn[-1] == (20_000, 0.5) and (12_346, 0.1) in drawn
    assert [position for position, _ in drawn] == sorted({position for position, _ in drawn})
    svg = parse_html(curve_svg("s", [Series("run", values)]))
    (series,) = svg.find_all("g", "series")
    assert series.attrs["data-tasks"] == "20000" and len(series.find_all("polyline")[0].attrs["points"].split()) == len(drawn)
    assert display_points([0.1, 0.2]) == [(1, 0.1), (2, 0.2)]


def test_curve_points_map_position_to_x_and_cumulative_accuracy_to_y() -> None:
    svg = parse_html(curve_svg("s", [Series("run", [0.0, 0.5, 1.0])], width=560, height=300))
    (polyline,) = svg.find_all("polyline")
    points = [tuple(map(float, p.split(","))) for p in polyline.attrs["points"].split()]
    # plot area: x 56..544, y 16..228, values inset 6px (1.0 near the top, 0.0 near the bottom)
    assert points == [(56.0, 222.0), (300.0, 122.0), (544.0, 22.0)]
    texts = [t.all_text() for t in svg.find_all("text")]
    assert {"0.00", "0.25", "0.50", "0.75", "1.00"} <= set(texts)
    assert {"1", "2", "3"} <= set(texts)
    assert "task position in stream" in texts and "cumulative accuracy" in texts
    assert "run (100.0%)" in texts  # the legend shows the final accuracy


@pytest.mark.parametrize(("length", "expected"), [(1, [1]), (5, [1, 2, 3, 4, 5]), (12, [1, 2, 4, 6, 8, 10, 12]), (100, [1, *range(10, 101, 10)]), (2500, [1, *range(500, 2501, 500)])])
def test_x_ticks_stay_few_and_readable(length: int, expected: list[int]) -> None:
    assert _ticks(length) == expected


def test_empty_and_single_task_streams_still_get_a_plot(make_run: MakeRun) -> None:
    run_dir = make_run("tiny", {"empty": [], "one": [True]})
    _, tree = read(write_html_report(run_dir))
    empty, one = tree.find_all("svg", "curve")
    assert "no scored tasks" in empty.all_text()
    assert not empty.find_all("polyline")
    assert len(one.find_all("polyline")[0].attrs["points"].split()) == 1
    assert stream_rows(tree)[1][4] == "\u2013"  # accuracy of no tasks


def test_every_artefact_string_is_escaped(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("x", {HOSTILE: [True, None]}, task_id=HOSTILE)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["run"] = HOSTILE
    summary["thresholds"][0]["scope"] = HOSTILE
    (run_dir / "summary.json").write_text(json.dumps(summary))
    scores = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    for scored in scores:
        scored.update(extracted=HOSTILE, target=HOSTILE, match_mode=HOSTILE)
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores))
    other = make_run("y", {HOSTILE: [False, False]})
    for path in (write_html_report(run_dir), write_comparison_report([run_dir, other], tmp_path / "c.html", ["<marquee>a</marquee>", "b\"'&"])):
        text, tree = read(path)
        assert_only_our_script(tree, text)  # the planted <script> is text, not a script
        assert not tree.find_all("img") and not tree.find_all("marquee")
        assert "onerror=" not in text.replace("onerror=&quot;", "")
        assert HOSTILE in tree.all_text()  # shown as text, not dropped
        for element in tree.iter():
            assert not any(name.startswith("on") for name in element.attrs), element.tag
    (records,) = task_records(run_dir / "report.html").values()  # the drill-down's data keeps it as text
    assert {record["i"] for record in records} == {f"{HOSTILE}0", f"{HOSTILE}1"} and records[0]["x"] == HOSTILE


def test_page_is_self_contained(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir, other = make_run("a", STREAMS), make_run("b", STREAMS)
    for path in (write_html_report(run_dir), write_comparison_report([run_dir, other], tmp_path / "c.html")):
        text, tree = read(path)
        assert_only_our_script(tree, text)
        # nothing fetched from anywhere; the only links are relative ones to the runs' own reports
        assert not re.search(r"src\s*=\s*[\"'](?!data:)", text), "no external resources"
        assert not re.search(r"href\s*=\s*[\"'](?!#|data:|(?:\.\./|[\w%.-]+/)*report\.html[\"'])", text), "no external links"
        assert not re.search(r"@import|url\(|fetch\(|XMLHttpRequest|import\(|\.src\s*=|href\s*=", SCRIPT)
        assert not re.search(r"@import|url\(", text)


def test_comparison_links_each_run_to_its_report_by_a_relative_path(make_run: MakeRun, tmp_path: Path) -> None:
    """From a difference to the tasks behind it: the links survive moving the folder."""
    first, second = make_run("a b%", STREAMS), make_run("b", STREAMS)
    write_html_report(first)  # the second run has no report.html: no link for it
    page = write_comparison_report([first, second], tmp_path / "out" / "c.html")
    moved = tmp_path / "moved"
    for name in ("a b%", "b", "out"):
        shutil.copytree(tmp_path / name, moved / name)
    _, tree = read(moved / "out" / page.name)
    links = [a.attrs["href"] for a in tree.find_all("a") if not a.attrs.get("href", "#").startswith("#")]
    assert links == ["../a%20b%25/report.html"]
    assert (moved / "out" / urllib.parse.unquote(links[0])).resolve() == (moved / "a b%" / "report.html").resolve()


def test_comparison_has_every_run_on_each_plot_and_a_side_by_side_table(make_run: MakeRun, tmp_path: Path) -> None:
    without = make_run("no_memory", {"facts": [False] * 4, "choice": [False, True, False]})
    with_memory = make_run("memory", {"facts": [False, True, True, True], "only_here": [True]})
    path = write_comparison_report([without, with_memory], tmp_path / "out" / "compare.html", ["no memory", "memory"])
    _, tree = read(path)
    curves = {svg.attrs["data-stream"]: svg for svg in tree.find_all("svg", "curve")}
    assert list(curves) == ["facts", "choice", "only_here"]
    assert [g.attrs["data-run"] for g in curves["facts"].find_all("g", "series")] == ["no memory", "memory"]
    assert [g.attrs["data-run"] for g in curves["choice"].find_all("g", "series")] == ["no memory"]
    colours = {p.attrs["stroke"] for p in curves["facts"].find_all("polyline")}
    assert len(colours) == 2
    legend = curves["facts"].find_all("g", "legend")[0].all_text()
    assert "no memory (0.0%)" in legend and "memory (75.0%)" in legend
    accuracy = rows(tree.find_all("table", "compare-accuracy")[0])
    assert accuracy[0] == [
        "stream", "run", "accuracy", "95% CI", "\u0394 vs baseline", "95% CI of \u0394",
        "McNemar p", "paired tasks",
    ]  # no stream carries a figure beyond accuracy here (ToolBench's API would get its column)
    (named,) = [p for p in tree.find_all("p", "meta") if p.all_text().startswith("Baseline: ")]
    assert named.find_all("b")[0].all_text() == "no memory"  # named once, not in a column header
    assert accuracy[1][:3] == ["facts", "no memory", "0.0% (0/4)"] and accuracy[1][4] == "baseline"
    assert accuracy[2][:2] == ["memory", "75.0% (3/4)"]
    assert accuracy[2][3:] == ["+75.0 pp", "[-1.6, +100.0]", "0.250", "4"]
    assert accuracy[4][:2] == ["memory", "\u2013"]  # choice: not in the second run
    assert [t.find_all("caption")[0].all_text() for t in tree.find_all("table", "compare-streams")] == [
        "Accuracy", "Work done", "Cost",
    ]
    side = rows(tree.find_all("table", "compare-streams")[0])
    assert side[0] == [TABLE_HEADERS[0], "run", *TABLE_HEADERS[1:6]]
    assert side[1][:3] == ["facts", "no memory", "4"] and side[2][:2] == ["memory", "4"]
    assert side[4] == ["memory", "not in this run"]
    assert [r[0] for r in side if len(r) > 2 and r[0] == "overall"] == ["overall"]


def test_default_labels_are_run_names_made_unique(make_run: MakeRun, tmp_path: Path) -> None:
    first = make_run("same", STREAMS)
    second = write_html_report(first).parent.parent / "copy"
    second.mkdir()
    for name in ("summary.json", "run.json"):
        (second / name).write_bytes((first / name).read_bytes())
    assert [r.label for r in load_runs([first, second])] == ["same", "same #2"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "is not a directory"),
        (lambda d: d.mkdir(), "has no summary.json; it is not a finished evomemory run"),
        (lambda d: (d.mkdir(), (d / "summary.json").write_text('{"streams": ')), "is not valid JSON"),
        (lambda d: (d.mkdir(), (d / "summary.json").write_text("[]")), "does not hold a JSON object"),
        (lambda d: (d.mkdir(), (d / "summary.json").write_text('{"schema_version": 99, "streams": {}}')), "schema version 99, newer"),
        (lambda d: (d.mkdir(), (d / "summary.json").write_text('{"schema_version": 1}')), "has no 'streams' object"),
    ],
)
def test_unusable_run_directories_are_clear_errors(tmp_path: Path, setup: Callable[[Path], object], message: str) -> None:
    directory = tmp_path / "run"
    setup(directory)
    with pytest.raises(ReportError, match=re.escape(message)):
        load_run(directory)


def test_label_count_must_match(make_run: MakeRun, tmp_path: Path) -> None:
    a, b = make_run("a", STREAMS), make_run("b", STREAMS)
    with pytest.raises(ReportError, match="1 label"):
        write_comparison_report([a, b], tmp_path / "c.html", ["only"])
    with pytest.raises(ReportError, match="at least two"):
        write_comparison_report([a], tmp_path / "c.html")


def test_interrupted_scores_file_and_missing_run_json_still_render(make_run: MakeRun) -> None:
    run_dir = make_run("partial", STREAMS)
    (run_dir / "run.json").unlink()
    with (run_dir / "scores.jsonl").open("a") as handle:
        handle.write('{"stream": "facts", "task_id": "torn')
    text = render_report(load_run(run_dir))
    assert text.count('<svg class="curve"') == 2


def test_streams_keep_the_run_order_although_summary_json_sorts_its_keys(make_run: MakeRun) -> None:
    run_dir = make_run("ordered", {"zeta": [True], "alpha": [False], "mid": [True]})
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps(summary, sort_keys=True))
    run = json.loads((run_dir / "run.json").read_text())
    run["streams"] = [{"name": "zeta"}, {"name": "alpha"}, {"name": "mid"}]
    (run_dir / "run.json").write_text(json.dumps(run))
    assert list(load_run(run_dir).streams) == ["zeta", "alpha", "mid"]
    (run_dir / "run.json").unlink()  # then scores.jsonl, in stream order, decides
    assert list(load_run(run_dir).streams) == ["zeta", "alpha", "mid"]


def test_report_shows_api_acc_groups_and_what_memory_returned(make_run: MakeRun) -> None:
    run_dir = make_run("tools", {"toolbench": [True, False, False], "mmlu_pro": [True, False, True]})
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["streams"]["toolbench"].update(api_matches=2, api_accuracy=2 / 3)
    summary["streams"]["mmlu_pro"]["groups"] = {
        "Economics": {"tasks": 2, "correct": 2, "accuracy": 1.0, "accuracy_ci": list(wilson_interval(2, 2))},
        "Philosophy": {"tasks": 1, "correct": 0, "accuracy": 0.0, "accuracy_ci": list(wilson_interval(0, 1))},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    responses = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines()]
    responses[0]["memory_recalled"] = [{"content": "Task: earlier <b>task</b>\nCorrect answer: x", "score": 0.75}]
    responses[0]["tool_calls"].insert(0, {"name": "recall", "arguments": {"query": "q"}, "result": '[{"content": "hit"}]', "error": False})
    responses[0]["protocol_violation"] = "ended without final_answer"
    write_responses(run_dir, responses)
    _, tree = read(write_html_report(run_dir))
    body = stream_rows(tree)
    assert body[1][0] == "toolbench" and body[1][6] == "66.7% / 33.3%"
    assert body[2][0] == "mmlu_pro" and body[2][6] == "\u2013"
    (groups,) = tree.find_all("table", "groups")
    assert groups.attrs["data-stream"] == "mmlu_pro"
    low, high = wilson_interval(0, 1)
    assert rows(groups)[2] == ["Philosophy", "1", "0", "0.0%", f"[{low * 100:.1f}, {high * 100:.1f}]"]
    first = task_records(run_dir / "report.html")["toolbench"][0]
    assert first["R"] == {"i": [["Task: earlier <b>task</b>\nCorrect answer: x", "score 0.750"]]}  # the same hits, listed once
    responses[0]["memory_recalled"] = []
    write_responses(run_dir, responses)
    first = task_records(write_html_report(run_dir))["toolbench"][0]
    assert first["R"] == {"i": [['recall(q) returned\n[{"content": "hit"}]', None]]}  # a recall tool's result, when hits are not listed
    assert first["T"][6] == "ended without final_answer" and first["p"] == "1"
    assert first["T"][:5] == [110, 100, 10, 0.5, 2]


def test_legend_wraps_inside_the_picture_and_shortens_what_cannot_fit() -> None:
    entries = legend_layout(["a" * 20] * 6 + ["b" * 200], 56, 488)
    assert max(e.row for e in entries) >= 2
    for entry in entries:
        assert entry.x >= 56 and entry.x + 30 + 7.5 * len(entry.text) <= 56 + 488
    assert "\u2026" in entries[-1].text and entries[-1].full == "b" * 200
    (kept,) = legend_layout(["x" * 100 + " (50.0%) = baseline"], 56, 488)
    assert kept.text.endswith("x (50.0%) = baseline") and len(kept.text) <= (488 - 30) / 7.5  # the end is kept
    svg = curve_svg("s", [Series(f"run number {i} with a long label", [0.5, 1.0]) for i in range(6)])
    height = int(re.search(r'viewBox="0 0 560 (\d+)"', svg).group(1))  # type: ignore[union-attr]
    assert height > 300
    ys = [float(y) for y in re.findall(r'class="legend-label" x="[\d.]+" y="([\d.]+)"', svg)]
    assert len(ys) == 6 and max(ys) <= height - 4


def test_compare_json_sits_beside_the_page_with_paired_statistics(make_run: MakeRun, tmp_path: Path) -> None:
    base = make_run("base", {"facts": [False, False, True, False], "choice": [True, True]})
    other = make_run("other", {"facts": [True, True, True, False]})
    write_comparison_report([base, other], tmp_path / "c.html")
    document = json.loads((tmp_path / "c.json").read_text())
    facts = document["streams"]["facts"]
    assert [r["accuracy"] for r in facts["runs"]] == [0.25, 0.75]
    assert (facts["runs"][0]["ci_low"], facts["runs"][0]["ci_high"]) == pytest.approx(wilson_interval(1, 4))
    versus = facts["vs_baseline"][0]
    assert versus["difference"] == 0.5 and versus["paired_tasks"] == 4 and versus["mcnemar_p"] == 0.5
    assert facts["task_sets_differ"] is False
    assert document["streams"]["choice"]["runs"][1] == {"label": "other", "present": False}
    assert document["overall"]["task_sets_differ"] is True
    assert any("other did not run this stream" in w for w in document["warnings"])
    assert any(w.startswith("overall: other and base ran different tasks") for w in document["warnings"])
    # A task only one run ran is no flip: 1-based positions of the two that changed.
    assert [(f["stream"], f["position"], f["correct"]) for f in document["flips"]] == [
        ("facts", 1, [False, True]), ("facts", 2, [False, True]),
    ]
    assert any(row["key"] == "name" and row["values"] == ["base", "other"] for row in document["config_diff"])


def test_cached_is_read_from_the_transcript_when_the_response_does_not_say(make_run: MakeRun) -> None:
    run_dir = make_run("replay", {"facts": [True, False]})
    path = run_dir / "transcripts" / "facts.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for message in records[0]["messages"]:  # t0's task turn: its one model call was replayed
        if message["role"] == "assistant":
            message["cached"] = True
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    first, second = task_records(write_html_report(run_dir))["facts"]
    assert first["T"][5] is True and second["T"][5] is False
    assert [cached for _, _, cached in first["tt"]["m"]] == [0, 0, 1] and not any(m[2] for m in second["tt"]["m"])


def test_an_own_agents_tool_calls_and_an_empty_recall_read_as_what_happened(make_run: MakeRun) -> None:
    """An agent of your own with a memory whose recall tool is `lookup`: it records no
    messages, so its transcript shows its tool calls; a recall that returned an empty
    list says so, and only a recall that answered free text 'did not record'."""
    run_dir = make_run("own", {"facts": [False, True]})
    lookup = {"name": "lookup", "arguments": {"question": "q"}, "result": "[]", "error": False}
    answer = {"name": "final_answer", "arguments": {"answer": "x"}, "result": "answer recorded", "error": False}
    responses = [json.loads(line) for line in (run_dir / "responses.jsonl").read_text().splitlines()]
    task = next(r for r in responses if r["kind"] == "task")
    task.update(memory_recalled=[], memory_recalls=1, tool_calls=[lookup, answer])
    second = [r for r in responses if r["kind"] == "task"][1]
    second.update(memory_recalled=[], memory_recalls=1,
                  tool_calls=[{**lookup, "result": "I found nothing like that"}, answer])
    write_responses(run_dir, responses)
    path = run_dir / "transcripts" / "facts.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0].update(messages=[], tool_calls=[lookup, answer])
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    first, other = task_records(write_html_report(run_dir))["facts"]
    assert first["R"] == {"n": "1 recall(s), no record returned"}
    assert first["tt"] == {"c": ['\u2192 lookup({"question": "q"}) = []', "\u2192 final_answer({\"answer\": \"x\"}) = answer recorded"]}
    assert other["R"]["n"].startswith("1 recall(s); the run did not record what they returned")


def test_the_page_grows_linearly_with_a_small_constant(make_run: MakeRun) -> None:
    """Every task is in the page (the drill-down's data), at a fraction of its records' size."""
    sizes = {}
    for tasks in (500, 2000):
        run_dir = make_run(f"n{tasks}", {"facts": [task % 3 == 0 for task in range(tasks)]})
        page = write_html_report(run_dir)
        sizes[tasks] = page.stat().st_size
        records = sum(path.stat().st_size for path in run_dir.rglob("*.jsonl"))
        assert len(task_records(page)["facts"]) == tasks
        assert sizes[tasks] < records / 4
    per_task = (sizes[2000] - sizes[500]) / 1500
    assert per_task < 150, per_task  # bytes per further task
    assert sizes[2000] < 4 * sizes[500]


def test_a_run_kept_for_its_comparison_is_taken_once_and_only_while_its_files_are_unchanged(
    make_run: MakeRun, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's arm is read for the comparison as it finishes (``evomemory run``'s
    chains at once); the comparison takes that copy, without reading the directory,
    only while summary.json, run.json and scores.jsonl are the files read."""
    from pytest_evomemory.reporting import rundata

    def keep_for_comparison(run_dir: Path) -> None:
        rundata.load_for_comparison(run_dir)[1]()

    run_dir = make_run("kept", {"s": [True, False, True]})
    keep_for_comparison(run_dir)
    fresh = rundata.load_run(run_dir)  # the copy is taken once: this one is read
    keep_for_comparison(run_dir)
    with monkeypatch.context() as patched:
        patched.setattr(rundata, "open_finished_run", lambda *args: pytest.fail("the kept run was read again"))
        kept = rundata.load_run(run_dir, "arm")
    assert kept.label == "arm" and kept.summary == fresh.summary
    assert [(s.task_id, s.correct) for s in kept.scores] == [(s.task_id, s.correct) for s in fresh.scores]

    keep_for_comparison(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    (run_dir / "summary.json").write_text(json.dumps({**summary, "run": "renamed"}), encoding="utf-8")
    assert rundata.load_run(run_dir).label == "renamed"  # changed since: read again


def test_a_run_reported_for_a_comparison_is_read_once_for_both_and_read_again_once_changed(
    make_run: MakeRun, tmp_path: Path,
) -> None:
    """A session's arm writes its page and keeps what its comparison pairs from the
    same read (:meth:`.Renderers.run_report`, ``compared``): the page is the one a
    fresh read writes, the comparison reads nothing again, and a scores.jsonl
    changed after the page was written is read again (here: no longer adding up)."""
    from pytest_evomemory.reporting import rundata
    from pytest_evomemory.reporting.reports import REPORTS
    from pytest_evomemory.rundir import FinishedRun

    run_dir = make_run("kept", {"s": [True, False, True], "t": [False, True]})
    fresh = load_run(run_dir)
    expected = write_html_report(run_dir, tmp_path / "fresh.html").read_bytes()
    page = REPORTS.run_report(run_dir, compared=True).read_bytes()
    assert page.split(b"<footer>")[0] == expected.split(b"<footer>")[0]  # the same page, but for its time
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(rundata, "open_finished_run", lambda *args: pytest.fail("the kept run was read again"))
        patched.setattr(FinishedRun, "scores", lambda self: pytest.fail("the kept scores were read again"))
        kept = rundata.load_run(run_dir, "arm")
        outcomes = [(s.stream, s.task_id, s.correct, s.raw_answer) for s in kept.scores]
    assert kept.label == "arm" and kept.run_dir == run_dir.absolute() and kept.summary == fresh.summary
    assert outcomes == [(s.stream, s.task_id, s.correct, None) for s in fresh.scores]

    def edit_scores() -> None:
        lines = (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        first = json.loads(lines[0])
        lines[0] = json.dumps({**first, "correct": not first["correct"]}) + "\n"
        (run_dir / "scores.jsonl").write_text("".join(lines), encoding="utf-8")

    from pytest_evomemory.reporting import html

    def page_then_edit(run: rundata.RunData, output: Path | str | None = None) -> Path:
        written = write_run_page(run, output)
        edit_scores()  # changed after the page's read, before the run is kept
        return written

    write_run_page = html.write_run_page
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(html, "write_run_page", page_then_edit)
        REPORTS.run_report(run_dir, compared=True)
    with pytest.raises(ReportError, match="does not add up"):
        _ = rundata.load_run(run_dir).scores


# --------------------------------------------------------------------------- the pages' text, fast paths


_TEXTS = ["", "plain", "a < b & c > d", "it's \"quoted\"", "\u2013 dash", "nul\x00byte", "lone \ud800 surrogate",
          "pair \ud83d\ude00", "\U0001f600 emoji", "\u2028", "&amp;"]


@pytest.mark.parametrize("text", [*_TEXTS, None, 3, 0.5])
def test_escaping_is_html_escape(text: object) -> None:
    """_e returns text with nothing to escape as it is: the same as html.escape's."""
    from html import escape

    from pytest_evomemory.reporting._markup import _e

    assert _e(text) == escape("" if text is None else str(text), quote=True)


@pytest.mark.parametrize("text", [*_TEXTS, "x" * 10_000 + "\ud800", "\u00e9" * 1000])
def test_storable_text_is_the_substitution(text: str) -> None:
    """storable's fast paths (ASCII, UTF-8 encodable) give what replacing every NUL
    and lone surrogate gives."""
    from pytest_evomemory.util.text import _UNSTORABLE, storable

    assert storable(text) == _UNSTORABLE.sub("\ufffd", text)


@pytest.mark.parametrize("messages, replayed", [
    ([], False),
    ([{"role": "user", "content": "q"}], False),  # no model call: not replayed
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "cached": True}], True),
    ([{"role": "assistant", "content": "a", "cached": True}, {"role": "assistant", "content": "b"}], False),
    ([{"role": "assistant", "content": "a", "cached": False}, {"role": "tool", "content": "r"}], False),
    ([{"role": "assistant", "content": None, "cached": 1, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}], True),
])
def test_a_transcript_is_replayed_when_every_model_reply_was(messages: list[dict[str, object]], replayed: bool) -> None:
    """The drill-down's cached mark of a turn: every assistant message replayed from
    the response cache (and at least one), each message shown with its own mark."""
    from pytest_evomemory.reporting.drilldown import transcript_entry
    from pytest_evomemory.rundocs import TranscriptEntry

    entry, cached = transcript_entry(TranscriptEntry.model_validate(
        {"stream": "s", "task_id": "t", "kind": "task", "messages": messages}))
    assert cached is replayed
    if messages:
        assert [row[0] for row in entry["m"]] == [m["role"] for m in messages]
        assert [row[2] for row in entry["m"]] == [1 if m.get("cached") else 0 for m in messages]
