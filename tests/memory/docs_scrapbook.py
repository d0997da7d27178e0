"""The copyable adapter of docs/memory.md ("A complete adapter to copy": Scrapbook),
run from the page itself.

This module executes the page's ``my_memory.py`` block as it is written, so that a
change to the documented adapter is a change to what the conformance suites run:
``tests.memory.docs_scrapbook:create`` is a backend of tests/memory/conftest.py's
``BACKENDS`` (retain/recall/reset/close/tools, recent, forget, snapshots) and of
tests/memory/test_memory_strategies.py (ExpRAG, ExpRecent, ReMem, LoCoMo ingestion,
resume after an interruption).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[2] / "docs" / "memory.md"
_BLOCK = re.compile(r"<!-- doc-snippet: file my_memory\.py -->\n```python\n(?P<body>.*?)^```", re.S | re.M)


def documented_adapter() -> str:
    """The source of the page's ``my_memory.py`` block."""
    found = _BLOCK.search(PAGE.read_text(encoding="utf-8"))
    assert found is not None, f"{PAGE} has no '<!-- doc-snippet: file my_memory.py -->' python block"
    return found.group("body")


_namespace: dict[str, Any] = {"__name__": __name__}
# the page's own code, executed as a reader who copied it would run it
exec(compile(documented_adapter(), f"{PAGE}:my_memory.py", "exec"), _namespace)

create = _namespace["create"]
Scrapbook = _namespace["Scrapbook"]
