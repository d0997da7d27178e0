"""The report in a real headless Chromium: it loads cleanly, offline, and shows what it should.

Screenshots are written to ``$EVOMEMORY_SCREENSHOT_DIR`` when set (CI can upload
them), otherwise into the test's tmp_path.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.reporting.html import write_comparison_report, write_html_report
from pytest_evomemory.reporting.replicates import write_replicate_comparison

from ._browser import Browser, PageLoad
from .conftest import HOSTILE

pytestmark = pytest.mark.chromium

MakeRun = Callable[..., Path]

FACTS = {
    "curves": "document.querySelectorAll('svg.curve').length",
    "streams": "[...document.querySelectorAll('svg.curve')].map(s => s.dataset.stream)",
    "series_per_curve": "[...document.querySelectorAll('svg.curve')].map(s => s.querySelectorAll('g.series polyline').length)",
    "curve_sizes": "[...document.querySelectorAll('svg.curve')].map(s => { const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; })",
    "table_rows": "document.querySelector('table.streams, table.compare-streams').querySelectorAll('tbody tr').length",
    "table_visible": "(() => { const t = document.querySelector('table.streams, table.compare-streams'); return !!t && t.getBoundingClientRect().height > 40; })()",
    # scripts that run (the drill-down's data blocks are text/plain, never run)
    "scripts": "[...document.scripts].filter(s => s.type !== 'text/plain').length",
    "images": "document.images.length",
    "pwned": "typeof window.__pwned",
    "text": "document.body.innerText",
}


def screenshot(load: PageLoad, tmp_path: Path, name: str) -> Path:
    directory = Path(os.environ.get("EVOMEMORY_SCREENSHOT_DIR") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    path.write_bytes(load.screenshot)
    return path


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack("!II", data[16:24])
    return width, height


def only_the_page_was_requested(load: PageLoad) -> None:
    others = [url for url in load.requests if url != load.url and not url.startswith("data:")]
    assert not others, f"the report reached for other resources: {others}"


def test_the_harness_sees_console_errors_exceptions_and_network(browser: Browser, tmp_path: Path) -> None:
    """Without this, 'no errors' below could be true because nothing is listened to."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p><img src='http://example.invalid/x.png'>"
        "<script>console.error('planted error'); throw new Error('planted exception');</script></body></html>"
    )
    load = browser.load(page, {"scripts": FACTS["scripts"]})
    joined = "\n".join(load.errors)
    assert "console.error: planted error" in joined
    assert "planted exception" in joined
    assert any("example.invalid" in url for url in load.requests)


def test_report_loads_cleanly_and_shows_the_table_and_one_plot_per_stream(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("memory", {"aime_2024": [False, True, True, False, True, True], "gpqa_diamond": [True, None, True], "toolbench": []})
    load = browser.load(write_html_report(run_dir), FACTS)
    shot = screenshot(load, tmp_path, "report")
    assert load.errors == [], load.errors
    only_the_page_was_requested(load)
    facts = load.facts
    assert facts["curves"] == 3
    assert facts["streams"] == ["aime_2024", "gpqa_diamond", "toolbench"]
    assert facts["series_per_curve"] == [1, 1, 0]
    assert all(w >= 300 and h >= 150 for w, h in facts["curve_sizes"]), facts["curve_sizes"]
    assert facts["table_rows"] == 3 and facts["table_visible"]
    assert facts["scripts"] == 1  # the drill-down's own, allowed by its hash
    for expected in ("Per stream", "Learning curves", "tokens / stimulus", "cumulative accuracy", "task position in stream", "no scored tasks"):
        assert expected in facts["text"], expected
    width, height = png_size(shot.read_bytes())
    assert width == 1280 and height > 600


def test_comparison_shows_both_runs_on_each_plot(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    without = make_run("no_memory", {"facts": [False] * 10, "choice": [True, False] * 5})
    with_memory = make_run("memory", {"facts": [False, False, True, True, True, False, True, True, True, True], "choice": [True] * 10})
    page = write_comparison_report([without, with_memory], tmp_path / "compare.html", ["no memory", "memory"])
    load = browser.load(page, FACTS)
    screenshot(load, tmp_path, "compare")
    assert load.errors == [], load.errors
    only_the_page_was_requested(load)
    assert load.facts["curves"] == 2
    assert load.facts["series_per_curve"] == [2, 2]
    assert load.facts["table_rows"] == 6  # (2 streams + overall) x 2 runs
    assert "no memory" in load.facts["text"] and "+70.0 pp" in load.facts["text"]


#: Opens every drill-down, as a reader clicking through would, and waits for the script
#: to draw them (pages and bodies are drawn when first shown).
OPEN_ALL = """(async () => {
    const wait = ms => new Promise(r => setTimeout(r, ms));
    for (let i = 0; i < 200 && document.querySelectorAll('details.stream-tasks').length
         && !document.querySelector('details.task'); i++) await wait(20);
    for (let round = 0; round < 3; round++) { document.querySelectorAll('details').forEach(d => d.open = true); await wait(50); }
    return document.querySelectorAll('details[open]').length;
})()"""


def test_markup_in_artefacts_is_text_in_the_browser(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run(HOSTILE, {HOSTILE: [True, None, False]}, task_id=HOSTILE)
    load = browser.load(write_html_report(run_dir), {"opened": OPEN_ALL, **FACTS})
    assert load.errors == [], load.errors  # a blocked injected script would be a CSP error here
    assert load.facts["opened"] > 3  # the drill-down drew every task: the markup went through it
    assert load.facts["pwned"] == "undefined"
    assert load.facts["scripts"] == 1 and load.facts["images"] == 0
    assert "<script>window.__pwned = 1</script>" in load.facts["text"]
    assert load.facts["text"].count("window.__pwned = 2") >= 6  # ids and answers of three tasks, as text


DRILL_FACTS = {
    "opened": OPEN_ALL,
    "tasks": "document.querySelectorAll('details.task').length",
    "first_task": "document.querySelector('details.task').innerText",
    "positions": "[...document.querySelectorAll('details.task')].map(d => d.dataset.position)",
    "task_rows": "[...document.querySelectorAll('table.tasks tbody tr')].map(r => r.cells[0].innerText)",
    "overflow": "document.documentElement.scrollWidth",
    "text": "document.body.innerText",
}


def test_every_task_can_be_drilled_into(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("drill", {"facts": [True, False, None]}, cached=True)
    load = browser.load(write_html_report(run_dir), DRILL_FACTS)
    screenshot(load, tmp_path, "drill-down")
    assert load.errors == [], load.errors
    only_the_page_was_requested(load)
    facts = load.facts
    assert facts["tasks"] == 3 and facts["opened"] > 3
    assert facts["positions"] == ["1", "2", "3"] and facts["task_rows"] == ["1", "2", "3"]
    assert "1\u20133 of 3 tasks" in facts["text"]
    first = facts["first_task"]
    for expected in (
        "prompt the agent saw", "Question 0 of facts?", "memories recalled", "1 recall(s)", "answer",
        "Final Answer: answer 0", "extracted", "why", "reason 0", "task turn", "feedback turn",
        "tokens 110", "latency 500.00 ms", "cached", "no protocol violation",
        "task turn transcript", "You are a careful problem solver.", "The correct answer: target 0",
    ):
        assert expected in first, expected
    assert "responses came from the response cache" in facts["text"]
    assert facts["overflow"] <= 1280


SIX_FACTS = {
    "legend_outside": """[...document.querySelectorAll('svg.curve')].flatMap(svg => {
        const box = svg.viewBox.baseVal;
        return [...svg.querySelectorAll('g.legend text')].filter(t => {
            const b = t.getBBox();
            return b.x < box.x || b.y < box.y || b.x + b.width > box.x + box.width || b.y + b.height > box.y + box.height;
        }).map(t => t.textContent);
    })""",
    "legend_entries": "[...document.querySelectorAll('svg.curve')].map(svg => svg.querySelectorAll('g.legend text').length)",
    "legend_overlaps": """[...document.querySelectorAll('svg.curve')].map(svg => {
        const boxes = [...svg.querySelectorAll('g.legend text')].map(t => t.getBBox());
        let overlaps = 0;
        boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
            if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) overlaps++;
        }));
        return overlaps;
    })""",
    "page_width": "document.documentElement.scrollWidth",
    "tables_fit": "[...document.querySelectorAll('table')].every(t => t.closest('.scroll') || t.getBoundingClientRect().right <= 1280)",
    "flip_rows": "document.querySelectorAll('table.flips tbody tr').length",
    "diff_rows": "document.querySelectorAll('table.config-diff tbody tr').length",
    "warnings": "document.querySelectorAll('.compare-warnings li').length",
    "text": "document.body.innerText",
}


def test_six_runs_stay_readable(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    runs = []
    for index in range(6):
        outcomes = [(task + index) % 3 != 0 for task in range(12)]
        streams = {"sample_facts": outcomes, "sample_choice": outcomes[: 12 - index]}
        config = {"name": f"arm-{index}", "agent": {"kind": "tiny", "memory_strategy": "none" if index == 0 else "deterministic_recall",
                                                    "model": {"model": f"model-with-a-long-name-{index}"}}}
        runs.append(make_run(f"a_rather_long_run_name_number_{index}", streams, config=config))
    page = write_comparison_report(runs, tmp_path / "compare.html")
    load = browser.load(page, SIX_FACTS)
    screenshot(load, tmp_path, "compare-six")
    assert load.errors == [], load.errors
    only_the_page_was_requested(load)
    facts = load.facts
    assert facts["legend_entries"] == [6, 6]
    assert facts["legend_outside"] == []
    assert facts["legend_overlaps"] == [0, 0]
    assert facts["page_width"] <= 1280 and facts["tables_fit"]
    assert facts["flip_rows"] > 0 and facts["diff_rows"] >= 2  # agent.memory_strategy, agent.model.model, streams
    assert facts["warnings"] >= 5  # sample_choice: runs 2-6 ran fewer tasks than the baseline
    assert "McNemar p" in facts["text"] and "a_rather_long_run_name_number_5" in facts["text"]
    assert (tmp_path / "compare.json").is_file()


LONG = "an_arm_whose_name_goes_on_and_on_with_no_space_to_break_it_anywhere_at_all"
#: Whatever a reader could miss: a page wider than the window, a table cut off inside
#: its scroll box, a cell whose text overflows it (a shortened run label, with its
#: full name in the tooltip, is the one allowed exception).
FIT = {
    "opened": OPEN_ALL,
    "page_width": "document.documentElement.scrollWidth",
    "window": "window.innerWidth",
    "scrolled_away": "[...document.querySelectorAll('.scroll')].filter(d => d.scrollWidth > d.clientWidth + 1).map(d => d.firstElementChild.className)",
    "off_screen": "[...document.querySelectorAll('th, td, dd, summary, figure')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + ': ' + e.innerText.slice(0, 40))",
    "cut_cells": "[...document.querySelectorAll('th, td')].filter(e => !e.classList.contains('run-head') && e.scrollWidth > e.clientWidth + 1).map(e => e.innerText.slice(0, 40))",
    "shortened": "[...document.querySelectorAll('th.run-head')].map(e => e.title)",
    "headers": "[...document.querySelectorAll('table.compare-accuracy thead th')].map(e => [e.innerText, Math.round(e.getBoundingClientRect().right)])",
}


def _long_run(make_run: MakeRun, name: str, outcomes: list[bool | None]) -> Path:
    stream = f"{name}_stream_with_a_rather_long_name_too"
    config = {"name": name, "agent": {"kind": "tiny", "memory_strategy": "deterministic_recall", "model": {
        "provider": "openai", "model": f"{name}-model-served-under-a-long-name", "base_url": "http://127.0.0.1:8000/v1"}},
        "memory": {"backend": "sqlite"}}
    return make_run(name, {stream[:60]: outcomes, "sample_choice": outcomes[::-1]}, config=config,
                    task_id=f"{LONG}_task_")


def _assert_fits(load: PageLoad, width: int) -> None:
    facts = load.facts
    assert load.errors == [], load.errors
    assert facts["window"] == width
    assert facts["page_width"] <= width, facts
    assert facts["scrolled_away"] == [], facts["scrolled_away"]
    assert facts["off_screen"] == [], facts["off_screen"]
    assert facts["cut_cells"] == [], facts["cut_cells"]


@pytest.mark.parametrize("width", [800, 1400])
def test_every_figure_of_the_report_is_visible_at(width: int, browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = _long_run(make_run, LONG, [True, False, None, True])
    load = browser.load(write_html_report(run_dir), FIT, width=width)
    screenshot(load, tmp_path, f"report-long-names-{width}")
    _assert_fits(load, width)
    assert load.facts["opened"] > 4  # the drill-down was open when measured


@pytest.mark.parametrize("width", [800, 1400])
def test_every_figure_of_the_comparison_is_visible_at(width: int, browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    runs = [_long_run(make_run, f"{LONG}_{index}", [index % 2 == 0, True, False, index > 0]) for index in range(3)]
    page = write_comparison_report(runs, tmp_path / "compare.html")
    load = browser.load(page, FIT, width=width)
    screenshot(load, tmp_path, f"compare-long-names-{width}")
    _assert_fits(load, width)
    headers = dict(load.facts["headers"])
    assert {"McNemar p", "paired tasks", "\u0394 vs baseline"} <= set(headers)
    assert all(right <= width for right in headers.values())
    assert set(load.facts["shortened"]) == {f"{LONG}_{index}" for index in range(3)}  # tooltips hold the names


PAGING = """(async () => {
    const wait = ms => new Promise(r => setTimeout(r, ms));
    const until = async test => { for (let i = 0; i < 200 && !test(); i++) await wait(20); };
    const root = document.querySelector('details.stream-tasks');
    root.open = true;
    const positions = () => [...root.querySelectorAll('details.task')].map(d => d.dataset.position);
    const status = () => root.querySelector('.page-status').textContent.trim();
    await until(() => positions().length);
    const seen = {first: [positions()[0], positions().at(-1), status()]};
    const [previous, next, go] = root.querySelectorAll('.pager button');
    next.click(); await until(() => positions()[0] === '101');
    seen.second = [positions()[0], positions().at(-1), status(), previous.disabled];
    const select = root.querySelector('.pager select');
    select.value = 'e'; select.dispatchEvent(new Event('change')); await until(() => positions()[0] !== '101');
    seen.errors = [positions(), status()];
    root.querySelector('.pager input').value = '234'; go.click();
    await until(() => root.querySelector("details.task[data-position='234'][open]"));
    await wait(50);
    const opened = root.querySelector("details.task[data-position='234']");
    seen.jump = [status(), opened.open, opened.innerText.includes('prompt the agent saw')];
    return seen;
})()"""


def test_a_long_stream_is_paged_filtered_and_jumped_through(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    outcomes: list[bool | None] = [None if task % 97 == 0 else task % 3 == 0 for task in range(250)]
    run_dir = make_run("long", {"facts": outcomes})
    load = browser.load(write_html_report(run_dir), {"paging": PAGING})
    assert load.errors == [], load.errors
    seen = load.facts["paging"]
    assert seen["first"] == ["1", "100", "1\u2013100 of 250 tasks"]
    assert seen["second"] == ["101", "200", "101\u2013200 of 250 tasks", False]
    assert seen["errors"] == [["1", "98", "195"], "1\u20133 of 3 shown"]  # positions 0, 97, 194 failed
    assert seen["jump"] == ["201\u2013250 of 250 tasks", True, True]


def _replicates(make_run: MakeRun, tmp_path: Path, arms: dict[str, list[list[bool]]]) -> Path:
    """A repeated session's replicates.html over ``arms`` (label -> each replicate's outcomes)."""
    groups = []
    for label, per_replicate in arms.items():
        dirs = []
        for index, outcomes in enumerate(per_replicate, 1):
            run_dir = make_run(f"{label}-r{index}", {"sample_facts": outcomes, "sample_choice": outcomes[::-1][:8]})
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
            summary["replicate"] = {"index": index, "count": len(per_replicate), "seed": index - 1}
            (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
            dirs.append(run_dir)
        groups.append((label, dirs))
    write_replicate_comparison(groups, tmp_path / "session")
    return tmp_path / "session" / "replicates.html"


FIGURES = {
    **FIT,
    "text": "document.body.innerText",
    "legends": "[...document.querySelectorAll('svg.curve .legend-label')].map(t => t.textContent)",
    "forests": "document.querySelectorAll('svg.forest').length",
    "gains": "[...document.querySelectorAll('svg.forest g.gain')].map(g => g.dataset.scope + ' ' + g.dataset.run)",
    "bands": "[...document.querySelectorAll('svg.curve')].map(s => s.querySelectorAll('polygon.band').length)",
    # where each series' markers are on screen: identical curves must not share one
    "marker_spots": """[...document.querySelectorAll('svg.curve')].map(svg => [...svg.querySelectorAll('g.series')].map(g =>
        [...g.querySelectorAll('.marker')].map(m => { const r = m.getBoundingClientRect(); return Math.round(r.x + r.width / 2); })))""",
    "forest_text_overlaps": """[...document.querySelectorAll('svg.forest')].map(svg => {
        const boxes = [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect());
        let n = 0;
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i], b = boxes[j];
            if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) n++;
        }
        return n; })""",
}


@pytest.mark.parametrize("width", [800, 1400])
def test_replicates_page_shows_the_gains_and_the_curves_across_replicates(
    width: int, browser: Browser, make_run: MakeRun, tmp_path: Path
) -> None:
    control = [[(task + r) % 3 == 0 for task in range(12)] for r in range(3)]
    memory = [[(task + r) % 4 != 0 for task in range(12)] for r in range(3)]
    page = _replicates(make_run, tmp_path, {"control": control, "memory": memory, f"{LONG}_copy": memory})
    load = browser.load(page, FIGURES, width=width)
    screenshot(load, tmp_path, f"replicates-{width}")
    _assert_fits(load, width)
    only_the_page_was_requested(load)
    facts = load.facts
    assert facts["forests"] == 1 and facts["forest_text_overlaps"] == [0]
    assert facts["gains"] == [f"{scope} {arm}" for scope in ("sample_facts", "sample_choice", "overall")
                              for arm in ("memory", f"{LONG}_copy")]
    assert facts["bands"] == [3, 3]
    for series in facts["marker_spots"]:
        memory_spots, copy_spots = set(series[1]), set(series[2])  # the same curve, drawn twice
        assert memory_spots and copy_spots and memory_spots.isdisjoint(copy_spots)
    assert sum(text.endswith("= memory") for text in facts["legends"]) == 2  # one per stream, never cut off
    assert "lowest to the highest replicate" in facts["text"] and "95 % interval (whisker)" in facts["text"]
