"""Docstrings name code that exists and does what they say it does.

A docstring that names a class after the code moved on (``RuntimeStream.deliver``
after the stream's driver became ``StreamRun``; ``Session`` creating the session
directory after ``ModelSide`` took it over) sends a reader to the wrong place."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest_evomemory
from pytest_evomemory.models import limits

PACKAGE = Path(pytest_evomemory.__file__).parent
#: A reference written out in full (``:class:`~pytest_evomemory.runtime.stream.StreamRun```).
_REFERENCE = re.compile(r":(?:class|meth|func|data|mod|attr|exc):`~?(pytest_evomemory(?:\.\w+)+)`")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_reference_written_out_in_full_names_code_that_exists() -> None:
    references = {(path.relative_to(PACKAGE).as_posix(), found.group(1))
                  for path in sorted(PACKAGE.rglob("*.py")) for found in _REFERENCE.finditer(path.read_text())}
    assert len(references) > 20  # the pattern finds the package's references
    assert [(path, dotted) for path, dotted in sorted(references) if not _resolves(dotted)] == []


def _callers(function: str) -> set[str]:
    """``module:Class`` (or ``module`` at its top level) of each call of ``function`` in the package."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef | ast.Module):
                continue
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == function:
                    found.add(f"{module}:{node.name}" if isinstance(node, ast.ClassDef) else module)
    return found


def test_the_limits_docstring_names_the_class_that_opens_the_session_directory() -> None:
    callers = {caller for caller in _callers("open_session_directory") if ":" in caller}
    assert callers == {"pytest_evomemory.runtime.modelside:ModelSide"}
    assert limits.__doc__ is not None
    assert "pytest_evomemory.runtime.modelside.ModelSide" in limits.__doc__
    assert "Session` creates" not in limits.__doc__
