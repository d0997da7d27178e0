"""The renderers the engine is handed: what :class:`..runtime.reports.Reports` asks for.

The engine declares the pages it needs and never imports this package; each entry
point (``evomemory run`` and ``run_benchmark``, ``evomemory merge``, the pytest
plugin) hands it :data:`REPORTS` when the session opens, which writes them with the
page code here. The page modules load when a page is first asked for (a session's
or a merge's end, or a ``compare`` run checked at opening), not at start-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import ReportError

if TYPE_CHECKING:
    from .html import ComparisonFiles
    from .replicates import ReplicateFiles


class Renderers:
    """Structurally a :class:`..runtime.reports.Reports` (mypy checks it where it is
    handed over). Each call looks its function up in its module when it is made, as
    the engine's own imports at the end of a run did (a test may replace one)."""

    def check_run(self, run_dir: Path) -> None:
        from . import rundata

        rundata.load_run(run_dir)

    def prepare(self) -> None:
        from ..rundocs import compare as comparison
        from ..rundocs.base import build_validators
        from . import html  # noqa: F401  (every page's module: html imports them)

        build_validators(comparison)

    def run_report(self, run_dir: Path, *, compared: bool = False) -> Path:
        from . import html, rundata

        if not compared:
            return html.write_html_report(run_dir)
        # read once for the page and the comparison (its scores too, on the page's way)
        run, keep = rundata.load_for_comparison(run_dir)
        path = html.write_run_page(run)
        try:
            keep()
        except (ReportError, OSError, ValueError):
            pass  # the comparison reads the run itself, and says what is wrong there
        return path

    def comparison(
        self, run_dirs: Sequence[Path], output: Path, labels: Sequence[str] | None = None
    ) -> ComparisonFiles:
        from . import html

        return html.write_comparison(run_dirs, output, labels)

    def replicate_comparison(
        self, groups: Sequence[tuple[str, Sequence[Path]]], directory: Path
    ) -> ReplicateFiles:
        from . import replicates

        return replicates.write_replicate_comparison(groups, directory)


#: What the entry points hand the engine.
REPORTS = Renderers()

__all__ = ["REPORTS", "Renderers"]
