"""The renderers the engine is handed: what :class:`..runtime.reports.Reports` asks for.

The engine declares the pages and tables it needs and never imports this package;
each entry point (``evomemory run``, ``evomemory merge``, the pytest plugin's end
of session) hands it :data:`REPORTS`, which writes them with the page and terminal
code here. Loaded when a session or a merge ends, not at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..analysis.summary import StreamMetrics
from ..rundocs import Categories
from . import html, replicates, terminal


class Renderers:
    """Structurally a :class:`..runtime.reports.Reports` (mypy checks it where it is
    handed over). Each call looks its function up in its module when it is made, as
    the engine's own imports at the end of a run did (a test may replace one)."""

    def run_report(self, run_dir: Path) -> Path:
        return html.write_html_report(run_dir)

    def comparison(self, run_dirs: Sequence[Path], output: Path, labels: Sequence[str]) -> html.ComparisonFiles:
        return html.write_comparison(run_dirs, output, labels)

    def replicate_comparison(
        self, groups: Sequence[tuple[str, Sequence[Path]]], directory: Path
    ) -> replicates.ReplicateFiles:
        return replicates.write_replicate_comparison(groups, directory)

    def arm_tables(self, metrics: Mapping[str, StreamMetrics], categories: Categories | None) -> list[str]:
        return [*terminal.format_table(metrics), *terminal.format_categories(categories)]


#: What the entry points hand the engine.
REPORTS = Renderers()

__all__ = ["REPORTS", "Renderers"]
