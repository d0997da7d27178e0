"""Every Python block of docs/memory.md runs in a test, as written.

* The copyable adapter (the ``my_memory.py`` file block, Scrapbook) is executed from
  the page by tests/memory/docs_scrapbook.py, which is a backend of the conformance
  suite (tests/memory/test_memory_conformance.py and test_memory_capabilities.py:
  recent, forget, snapshots) and of the strategy suite
  (tests/memory/test_memory_strategies.py: ExpRAG, ExpRecent, ReMem, LoCoMo
  ingestion, resume); tests/plugin/test_newcomer_docs.py runs the page's commands
  with it (the sample streams and LoCoMo through pytest).
* The ``conftest.py`` block is the conftest tests/memory/test_memory_plugin.py runs.
* Any other ``file PATH`` block (the scripted extraction server) is written to its
  file and run with the page's next ``run`` block by tests/plugin/test_newcomer_docs.py.
* The excerpts of the repository's adapters (KeywordNotebook, FactMemory) are the
  files' own lines, the elided ones written ``...``: every other line is in the file
  the block excerpts, and that file runs in the conformance suite. The excerpt of
  Jar (a memory on the backends' base) is likewise the lines of the test file that
  runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_evomemory.memory.base import Forgetting, Ingestible, MemorySystem, RecencyRecall
from pytest_evomemory.memory.snapshot import SnapshotCapable

from .conftest import BACKENDS, CONSOLIDATING_ADAPTER, DOCS_ADAPTER, EXAMPLE_ADAPTER
from .docs_scrapbook import PAGE, Scrapbook, documented_adapter

REPO = PAGE.parents[1]
_BLOCK = re.compile(r"(?:<!-- doc-snippet: (?P<marker>[^>]*?) -->\n)?```python\n(?P<body>.*?)^```", re.S | re.M)
#: The repository file each excerpt is cut from, by the class the block starts with.
EXCERPTS = {
    "class KeywordNotebook:": "tests/memory/example_adapter.py",
    "class FactMemory:": "tests/memory/consolidating_adapter.py",
    "class Jar(MemoryBase):": "tests/memory/test_memory_backend_base.py",
}
CONFTEST_BLOCK_START = "import pytest\nfrom tests.memory.example_adapter import create"


def python_blocks() -> list[tuple[int, str | None, str]]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, found.start()) + 1, found.group("marker"), found.group("body"))
        for found in _BLOCK.finditer(text)
    ]


def _code(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


def test_every_python_block_is_run_by_a_test() -> None:
    blocks = python_blocks()
    assert blocks
    for line, marker, body in blocks:
        where = f"docs/memory.md:{line}"
        if marker == "file my_memory.py":
            assert body == documented_adapter(), where
            continue
        if marker is not None and marker.startswith("file "):
            # written to that file before the page's next run block, which
            # tests/plugin/test_newcomer_docs.py runs as written
            assert "<!-- doc-snippet: run -->" in PAGE.read_text(encoding="utf-8").split(body, 1)[1], where
            continue
        if body.startswith(CONFTEST_BLOCK_START):
            source = (REPO / "tests" / "memory" / "test_memory_plugin.py").read_text(encoding="utf-8")
            assert "documented_conftest()" in source, f"{where}: the conftest block no longer runs"
            continue
        first = body.splitlines()[0]
        assert first in EXCERPTS, f"{where}: a python block no test runs (starting {first!r})"
        lines = {_code(text) for text in (REPO / EXCERPTS[first]).read_text(encoding="utf-8").splitlines()}
        missing = [text for text in map(_code, body.splitlines()) if text and "..." not in text and text not in lines]
        assert not missing, f"{where}: lines that are not in {EXCERPTS[first]}: {missing}"


def test_the_excerpted_adapters_run_in_the_conformance_suite() -> None:
    assert {EXAMPLE_ADAPTER, CONSOLIDATING_ADAPTER, DOCS_ADAPTER} <= set(BACKENDS)


def test_the_copyable_adapter_offers_what_every_strategy_and_locomo_need(tmp_path: Path) -> None:
    scrapbook = Scrapbook(top_k=2)
    assert isinstance(scrapbook, MemorySystem) and isinstance(scrapbook, RecencyRecall)
    assert isinstance(scrapbook, Forgetting) and isinstance(scrapbook, Ingestible) and isinstance(scrapbook, SnapshotCapable)
    roles = {tool.name: tool.role for tool in scrapbook.tools()}
    assert roles == {"jot": "retain", "lookup": "recall", "tear_out": "forget"}
    with pytest.raises(Exception, match="at least 1"):
        scrapbook.recent(0)


def documented_conftest() -> str:
    """The page's ``conftest.py`` block (the evomemory_memory_factory fixture)."""
    for _, _, body in python_blocks():
        if body.startswith(CONFTEST_BLOCK_START):
            return body
    raise AssertionError(f"{PAGE} lost its conftest.py block")
