"""``report.html``: one self-contained page per run, or one page comparing runs.

The page is read from the run directory's artefacts (``summary.json``, plus
``run.json``, ``scores.jsonl``, ``responses.jsonl`` and ``transcripts/`` when
present), never from live objects, so the same code serves the plugin at session
end and the ``evomemory`` command long after; the per-task records are streamed,
never all held (:mod:`.rundata`). It must open anywhere, offline, from a CI
artefact store: CSS is inline, the learning curves are SVG drawn here
(:mod:`.chart`, thinned for display on long streams), and a Content-Security-Policy
forbids the browser from loading anything and from running any script but the
drill-down's own (:mod:`.drilldown`, allowed by its hash), which pages a long
run's tasks in from compressed data blocks. Every string that came from an
artefact (task ids, answers, run names, failure reasons) goes through ``_e``
(:mod:`._markup`) or, in the drill-down, ``textContent``, because a dataset or an
agent can put markup in them. The comparison's numbers are :mod:`.compare`'s.

The pages are built by one module each: :mod:`.htmlpage` (the shell and shared
markup), :mod:`.runpage`, :mod:`.comparepage` and :mod:`.replicatespage`; this
module writes them and is the one the rest of the package imports.

Every figure stays visible from an 800 px window up: the per-stream metrics are
three narrow tables rather than one wide one, long run and stream names wrap or
are shortened with the full name in a tooltip, and the run's metadata is a list.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import WRITE_HINT
from ..rundir import REPORT, utc_now
from ..rundocs.compare import Comparison
from ..util.atomicfile import write_atomically
from ..util.redaction import dumps_redacted
from ..util.text import storable
from .chart import LegendEntry, Series, curve_svg, legend_layout
from .compare import comparison_model
from .comparepage import render_comparison
from .replicatespage import render_replicates
from .rundata import ReportError, RunData, load_run, load_runs
from .runpage import render_report, report_parts

REPORT_NAME = REPORT  # rundir names every file of a run directory


def _write(path: Path, text: str | Iterable[str]) -> Path:
    """Atomic, so a browser or CI upload never picks up half a page; ``text`` may
    come in pieces, written as they are made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # an artefact keeps lone surrogates (escaped, lossless); a page cannot hold them
        write_atomically(path, (storable(piece) for piece in ([text] if isinstance(text, str) else text)))
    except OSError as error:
        raise ReportError(f"cannot write {path}: {error.strerror or error}; {WRITE_HINT}") from None
    return path


def write_html_report(run_dir: Path | str, output: Path | str | None = None) -> Path:
    """Write ``report.html`` (or ``output``) for a finished run; returns its path.

    The run's records are read as the page is written, never all at once."""
    return write_run_page(load_run(run_dir), output)


def write_run_page(run: RunData, output: Path | str | None = None) -> Path:
    """:func:`write_html_report` of a run already read (:func:`.rundata.load_for_comparison`)."""
    return _write(Path(output) if output is not None else run.run_dir / REPORT_NAME, report_parts(run))


def comparison_json_path(output: Path | str) -> Path:
    """compare.json sits next to the page: ``compare.html`` -> ``compare.json``."""
    return Path(output).with_suffix(".json")


@dataclass(frozen=True)
class ComparisonFiles:
    """What a comparison wrote: the page, compare.json beside it, and the document
    (``model``: the same as its model, which the terminal and the gain gates read
    rather than validate the document again)."""

    html: Path
    json: Path
    document: Mapping[str, Any]
    model: Comparison


def write_comparison(
    run_dirs: Sequence[Path | str], output: Path | str, labels: Sequence[str] | None = None
) -> ComparisonFiles:
    """Write one page comparing the runs (the first is the baseline of the Δ columns)
    and its statistics as JSON next to it (:func:`comparison_json_path`)."""
    if len(run_dirs) < 2:
        raise ReportError("a comparison needs at least two run directories")
    runs = load_runs(run_dirs, labels)
    comparison = comparison_model(runs)
    path = Path(output)
    json_path = comparison_json_path(path)
    if json_path == path:
        raise ReportError(f"{path}: give the comparison page an .html name, so compare.json can sit beside it")
    document = {**comparison.written(), "generated": utc_now()}
    _write(json_path, dumps_redacted(document, indent=2) + "\n")  # as every artefact: redacted, strict JSON
    reports = [_relative_link(run.run_dir / REPORT_NAME, path.parent) for run in runs]
    return ComparisonFiles(_write(path, render_comparison(runs, comparison, reports)), json_path, document, comparison)


def _relative_link(target: Path, start: Path) -> str | None:
    """A relative URL from ``start`` to ``target`` when it exists: the pages move
    together (a CI artefact, a copied results folder), absolute paths would not."""
    if not target.is_file():
        return None
    try:
        relative = os.path.relpath(target.resolve(), start.resolve())
    except (OSError, ValueError):  # another drive, an unreadable path: no link
        return None
    return urllib.parse.quote(Path(relative).as_posix())


def write_page(path: Path, text: str) -> Path:
    """Write a page or its data atomically (:class:`ReportError` when it cannot be)."""
    return _write(path, text)


def write_comparison_report(
    run_dirs: Sequence[Path | str], output: Path | str, labels: Sequence[str] | None = None
) -> Path:
    """:func:`write_comparison`, returning the page's path."""
    return write_comparison(run_dirs, output, labels).html



__all__ = [
    "REPORT_NAME",
    "ComparisonFiles",
    "LegendEntry",
    "ReportError",
    "RunData",
    "Series",
    "comparison_json_path",
    "curve_svg",
    "legend_layout",
    "load_run",
    "load_runs",
    "render_comparison",
    "render_replicates",
    "render_report",
    "report_parts",
    "write_comparison",
    "write_comparison_report",
    "write_html_report",
    "write_page",
    "write_run_page",
]

