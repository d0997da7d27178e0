"""The report in a real headless Chromium: it loads cleanly, offline, and shows what it should.

Screenshots are written to ``$EVOMEMORY_SCREENSHOT_DIR`` when set (CI can upload
them), otherwise into the test's tmp_path.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.reporting.html import write_comparison_report, write_html_report

from ._browser import Browser, PageLoad
from .conftest import HOSTILE

pytestmark = pytest.mark.chromium

MakeRun = Callable[..., Path]

FACTS = {
    "curves": "document.querySelectorAll('svg.curve').length",
    "streams": "[...document.querySelectorAll('svg.curve')].map(s => s.dataset.stream)",
    "series_per_curve": "[...document.querySelectorAll('svg.curve')].map(s => s.querySelectorAll('g.series polyline').length)",
    "curve_sizes": "[...document.querySelectorAll('svg.curve')].map(s => { const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; })",
    "table_rows": "[...document.querySelectorAll('table.streams tbody tr, table.compare-streams tbody tr')].length",
    "table_visible": "(() => { const t = document.querySelector('table.streams, table.compare-streams'); return !!t && t.getBoundingClientRect().height > 40; })()",
    "scripts": "document.scripts.length",
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
    assert facts["scripts"] == 0
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


def test_markup_in_artefacts_is_text_in_the_browser(browser: Browser, make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run(HOSTILE, {HOSTILE: [True, None, False]}, task_id=HOSTILE)
    load = browser.load(write_html_report(run_dir), FACTS)
    assert load.errors == [], load.errors  # a blocked injected script would be a CSP error here
    assert load.facts["pwned"] == "undefined"
    assert load.facts["scripts"] == 0 and load.facts["images"] == 0
    assert "<script>window.__pwned = 1</script>" in load.facts["text"]
