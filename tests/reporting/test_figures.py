"""The figures: curves that stay apart (palette, dashes, staggered markers, "= other"
in the legend), bands across replicates, and the forest plot of gains, as SVG whose
geometry a test can read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from pathlib import Path

import pytest

from pytest_evomemory.reporting.chart import Series, band_points, curve_svg
from pytest_evomemory.reporting.forest import Gain, forest_svg
from pytest_evomemory.reporting.palette import COLOURS, marker_positions, style
from pytest_evomemory.reporting.replicatefigures import band, gains, replicate_figures
from pytest_evomemory.reporting.replicates import write_replicate_comparison
from pytest_evomemory.reporting.rundata import load_run

from .conftest import HOSTILE, parse_html

MakeRun = Callable[..., Path]
MEMORY = f"memory {HOSTILE}"


def _luminance(colour: str) -> float:
    """WCAG relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_line_colour_stands_out_on_white_and_each_series_differs_in_three_ways() -> None:
    # contrast with white of at least 2:1 (Okabe-Ito's yellow, #F0E442, has 1.2:1 and is left out)
    assert all((1.05) / (_luminance(colour) + 0.05) >= 2.0 for colour in COLOURS), COLOURS
    looks = [style(index) for index in range(7)]
    assert len({look.colour for look in looks}) == len({look.marker for look in looks}) == 7
    assert len({look.dash for look in looks[:6]}) == 6


def test_identical_curves_both_stay_visible() -> None:
    values = [0.0, 0.5, 2 / 3, 0.75, 0.8, 0.83, 0.86, 0.875, 0.89, 0.9, 0.91, 0.92]
    svg = parse_html(curve_svg("s", [Series("first", values), Series("second", values), Series("other", values[::-1])]))
    first, second, _ = svg.find_all("g", "series")
    # markers of identical curves sit at positions of their own, in shapes of their own
    first_x = {float(m.attrs["cx"]) for m in first.iter() if "marker" in m.classes}
    second_x = {round(sum(float(p.split(",")[0]) for p in m.attrs["points"].split()) / 4, 1)
                for m in second.iter() if "marker" in m.classes}
    assert len(first_x) == len(second_x) == 4 and first_x.isdisjoint(second_x)
    assert first.find_all("polyline")[0].attrs["stroke"] != second.find_all("polyline")[0].attrs["stroke"]
    assert "stroke-dasharray" not in first.find_all("polyline")[0].attrs
    assert "stroke-dasharray" in second.find_all("polyline")[0].attrs
    legend = [t.all_text() for t in svg.find_all("text") if "legend-label" in t.classes]
    assert legend == ["first (92.0%)", "second (92.0%) = first", "other (0.0%)"]


def test_markers_are_staggered_and_stay_on_the_curve() -> None:
    assert marker_positions(0, 0, 2) == []
    assert marker_positions(5, 0, 1) == [1, 2, 3, 4, 5]  # a short curve alone: every point
    assert marker_positions(5, 0, 2) == [1, 3] and marker_positions(5, 1, 2) == [2, 4]
    assert marker_positions(2, 2, 3) == [1]  # fewer points than series: one marker each
    for count in (2, 3, 7):  # never two series' markers at one position
        taken = [p for index in range(count) for p in marker_positions(50, index, count)]
        assert len(taken) == len(set(taken))
    a, b = marker_positions(80, 0, 2), marker_positions(80, 1, 2)
    assert a == [1, 11, 21, 31, 41, 51, 61, 71] and b == [6, 16, 26, 36, 46, 56, 66, 76]
    assert all(1 <= p <= 7 for p in marker_positions(7, 3, 4))


def test_a_band_is_drawn_under_the_lines_and_thinning_never_narrows_it() -> None:
    svg = parse_html(curve_svg("s", [Series("arm", [0.5, 0.5, 0.5], [0.25, 0.0, 0.5], [0.75, 1.0, 0.5])]))
    (polygon,) = [p for p in svg.find_all("polygon") if "band" in p.classes]
    ys = [float(p.split(",")[1]) for p in polygon.attrs["points"].split()]
    # y of 1.0 is 22, of 0.0 is 222 (inset 6 px in a 16..228 plot); upper edge then lower edge reversed
    assert ys == [72.0, 22.0, 122.0, 122.0, 222.0, 172.0]
    children = [child.tag for child in svg.children[0].children]
    assert children.index("polygon") < children.index("g")  # the band is under every line
    low, high = [0.5] * 5000, [0.6] * 5000
    low[2345], high[4321] = 0.1, 0.9
    drawn = band_points(low, high)
    assert len(drawn) <= 1000 and min(p[1] for p in drawn) == 0.1 and max(p[2] for p in drawn) == 0.9


def test_the_band_across_replicates_is_their_mean_lowest_and_highest(make_run: MakeRun) -> None:
    runs = [
        load_run(make_run("r1", {"s": [True, True, False, False]})),  # 1, 1, 2/3, 1/2
        load_run(make_run("r2", {"s": [False, True, True]})),  # 0, 1/2, 2/3
        load_run(make_run("r3", {"s": [True, False, True, True]})),  # 1, 1/2, 2/3, 3/4
    ]
    found = band(runs, "s")
    assert found is not None and (found.replicates, found.shortest, found.longest) == (3, 3, 4)
    assert found.mean == pytest.approx([2 / 3, 2 / 3, 2 / 3])
    assert found.low == pytest.approx([0.0, 0.5, 2 / 3]) and found.high == pytest.approx([1.0, 1.0, 2 / 3])
    assert band(runs, "absent") is None


def test_the_forest_plot_puts_each_gain_where_its_value_is() -> None:
    rows = [Gain("facts", "memory", 1, 0.2, 0.1, 0.3), Gain("overall", "memory", 1, -0.05, -0.2, 0.1),
            Gain("overall", "no value", 2, None, None, None)]
    svg = parse_html(forest_svg(rows, baseline="control", width=680))
    frame = svg.find_all("rect", "frame")[0]
    left, width = float(frame.attrs["x"]), float(frame.attrs["width"])
    zero = float(svg.find_all("line", "zero")[0].attrs["x1"])
    # axis from -20 to +30 points (1-2-5 ticks at 10): zero sits 2/5 of the way
    assert zero == pytest.approx(left + width * 20 / 50, abs=0.1)
    facts = svg.find_all("g", "gain")[0]
    whisker = facts.find_all("line", "whisker")[0]
    assert float(whisker.attrs["x1"]) == pytest.approx(left + width * 30 / 50, abs=0.1)
    assert float(whisker.attrs["x2"]) == pytest.approx(left + width * 50 / 50, abs=0.1)
    assert [t.all_text() for t in svg.find_all("text") if "value" in t.classes] == [
        "+20.0 [+10.0, +30.0]", "-5.0 [-20.0, +10.0]", "\u2013"]
    assert ["".join(t.text) for t in svg.find_all("text") if "scope" in t.classes] == ["facts", "overall"]
    # an interval beyond what accuracy allows is cut at the frame, not drawn off the picture
    wide = parse_html(forest_svg([Gain("s", "a", 1, 0.3, -0.8, 1.4)], baseline="b"))
    frame = wide.find_all("rect", "frame")[0]
    ends = [float(wide.find_all("line", "whisker")[0].attrs[key]) for key in ("x1", "x2")]
    assert ends[1] == pytest.approx(float(frame.attrs["x"]) + float(frame.attrs["width"]), abs=0.1)


def test_replicates_page_draws_the_forest_and_the_curves_from_the_runs(make_run: MakeRun, tmp_path: Path) -> None:
    outcomes = {"control": [[False, True, False, False], [False, False, True, False]],
                "memory": [[True, True, False, True], [True, True, True, False]]}
    groups = []
    for arm, per_replicate in outcomes.items():
        dirs = []
        for index, stream in enumerate(per_replicate, 1):
            run_dir = make_run(f"{arm}-r{index}", {"facts": stream, "choice": stream[:2]})
            summary = json.loads((run_dir / "summary.json").read_text())
            summary["replicate"] = {"index": index, "count": 2, "seed": index - 1}
            (run_dir / "summary.json").write_text(json.dumps(summary))
            dirs.append(run_dir)
        groups.append((arm if arm == "control" else MEMORY, dirs))
    files = write_replicate_comparison(groups, tmp_path / "out")
    page = (tmp_path / "out" / "replicates.html").read_text(encoding="utf-8")
    tree = parse_html(page)
    assert HOSTILE not in page and "<script>" not in page  # the label is text, never markup
    (forest,) = tree.find_all("svg", "forest")
    rows = [(g.attrs["data-scope"], g.attrs["data-run"]) for g in forest.find_all("g", "gain")]
    assert rows == [("facts", MEMORY), ("choice", MEMORY), ("overall", MEMORY)]
    values = [t.all_text() for t in forest.find_all("text") if "value" in t.classes]
    overall = files.document["vs_baseline"][0]["overall"]
    assert values[-1].startswith(f"{overall['mean'] * 100:+.1f}")
    curves = {svg.attrs["data-stream"]: svg for svg in tree.find_all("svg", "curve")}
    assert list(curves) == ["facts", "choice"]
    polygons = [p for p in curves["facts"].find_all("polygon") if "band" in p.classes]
    assert [p.attrs["data-run"] for p in polygons] == ["control", MEMORY]
    # the mean line of memory on facts: (1, 1) -> 1, (1, 1) -> 1, (2/3, 1) -> 5/6, (3/4, 3/4) -> 3/4
    memory = next(g for g in curves["facts"].find_all("g", "series") if g.attrs["data-run"] == MEMORY)
    ys = [float(p.split(",")[1]) for p in memory.find_all("polyline")[0].attrs["points"].split()]
    assert ys == pytest.approx([22.0, 22.0, 22 + 200 / 6, 72.0], abs=0.06)
    # the captions name the band, and the interval's method in replicates.json's own words
    assert "lowest to the highest replicate" in page
    assert escape(files.document["methods"]["difference_ci"]) in page
    assert replicate_figures(files.document, []).count("<svg") == 1  # no runs: the forest alone
    assert gains({"arms": [{"label": "a"}], "vs_baseline": []}) == []


def test_a_long_legend_entry_keeps_its_value_and_its_twin() -> None:
    long = "a_rather_long_run_name_number_"
    values = [0.5, 2 / 3]
    svg = parse_html(curve_svg("s", [Series(f"{long}1", values), Series(f"{long}3", values)]))
    texts = [t.all_text() for t in svg.find_all("text") if "legend-label" in t.classes]
    assert texts[0] == f"{long}1 (66.7%)"
    second = texts[1]
    assert " (66.7%) = " in second and second.endswith("_1") and "\u2026" in second and len(second) <= (488 - 30) / 7.5
    titles = [g.find_all("title")[0].all_text() for g in svg.find_all("g", "legend-entry")]
    assert titles[1] == f"{long}3 (66.7%) = {long}1"  # the tooltip has it whole
