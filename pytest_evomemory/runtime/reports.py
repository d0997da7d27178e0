"""What the engine has the renderers write, declared without importing them.

A run ends with its page (report.html); a session of arms, or a merge of shards,
with the comparison (compare.html and compare.json, or a repeated session's
replicates.json); each arm's end in the terminal with its tables. Pages and tables
are the renderers' (:mod:`pytest_evomemory.reporting`), which sit above the engine
and read what it wrote. So the engine declares here what it asks of them, and the
entry points hand it the renderers' implementation,
:data:`pytest_evomemory.reporting.reports.REPORTS`. The engine imports the figures
it computes from below (:mod:`pytest_evomemory.analysis`) and never the renderers
(``tests/test_import_graph.py`` checks).

Every method that writes raises :class:`~pytest_evomemory.core.errors.ReportError` when
the runs cannot be read or a page cannot be written, and may raise ``OSError`` or
``ValueError`` (a full disk, text a page cannot hold); the caller decides what
that failure means for the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the comparison's models load with the pages, at the end
    from ..rundocs.compare import Comparison


class WrittenComparison(Protocol):
    """A comparison of runs, written: the page, compare.json beside it, and its document."""

    @property
    def html(self) -> Path: ...

    @property
    def json(self) -> Path: ...

    @property
    def document(self) -> Mapping[str, Any]: ...

    @property
    def model(self) -> Comparison:
        """The document as its model (what the terminal and the gain gates read)."""
        ...


class WrittenReplicates(Protocol):
    """A repeated session's comparison across its replicates, written: replicates.json's
    document and the files (replicates.json, each replicate's comparison)."""

    @property
    def document(self) -> Mapping[str, Any]: ...

    @property
    def paths(self) -> Sequence[Path]: ...


class Reports(Protocol):
    """The pages the engine asks for (see the module docstring)."""

    def check_run(self, run_dir: Path) -> None:
        """Raise unless ``run_dir`` holds a finished run a comparison can read (the
        run a session compares itself with, ``compare``: refused when it opens)."""
        ...

    def prepare(self) -> None:
        """Load what the pages need (their modules, the models of the documents they
        write) before any is asked for: a session does it while its chains wait on
        the network (:func:`.run.prepare_finish`). It writes nothing."""
        ...

    def run_report(self, run_dir: Path, *, compared: bool = False) -> Path:
        """Write ``run_dir``'s report.html from what the run wrote; its path. With
        ``compared`` (an arm of a session, whose comparison follows in this process),
        also read now what the comparison reads of the run, kept while its files stay
        as they are."""
        ...

    def comparison(
        self, run_dirs: Sequence[Path], output: Path, labels: Sequence[str] | None = None
    ) -> WrittenComparison:
        """Write the page ``output`` comparing ``run_dirs`` (the first is the baseline)
        and compare.json beside it; ``labels`` name the runs (by default, their names)."""
        ...

    def replicate_comparison(
        self, groups: Sequence[tuple[str, Sequence[Path]]], directory: Path
    ) -> WrittenReplicates:
        """Write ``directory``'s replicates.json from each arm's replicate runs
        (``groups``: an arm's name and its runs) and, with several arms, each
        replicate's comparison."""
        ...


__all__ = ["Reports", "WrittenComparison", "WrittenReplicates"]
