"""One atomic writer for every artefact a reader may open while it is written."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from pytest_evomemory.util.atomicfile import write_atomically

#: Every place in the package that writes a temporary file and renames it over a target
#: must be atomicfile.py; a download moved into place (materialize) or a run moved to
#: history/ is a move of a finished file, not a write.
ALLOWED_RENAMES = {"atomicfile.py", "history.py", "materialize.py"}
PACKAGE = Path(__file__).resolve().parent.parent / "pytest_evomemory"


def test_text_bytes_and_pieces_replace_the_file_and_leave_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old", encoding="utf-8")
    write_atomically(target, "new ü")
    assert target.read_text(encoding="utf-8") == "new ü"
    write_atomically(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    write_atomically(target, (piece for piece in ["a\n", "b\n"]), encoding="ascii")
    assert target.read_bytes() == b"a\nb\n"
    assert os.listdir(tmp_path) == ["summary.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old", encoding="utf-8")

    def pieces() -> object:
        yield "half a page"
        raise RuntimeError("the page could not be made")

    with pytest.raises(RuntimeError):
        write_atomically(target, pieces())  # type: ignore[arg-type]
    with pytest.raises(UnicodeEncodeError):
        write_atomically(target, "é", encoding="ascii")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["report.html"]


def test_the_file_gets_the_usual_permissions(tmp_path: Path) -> None:
    ordinary = tmp_path / "ordinary"
    ordinary.write_text("x", encoding="utf-8")
    written = tmp_path / "written"
    write_atomically(written, "x")
    assert (written.stat().st_mode & 0o777) == (ordinary.stat().st_mode & 0o777)


def test_threads_writing_one_file_never_share_a_temporary(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            for _ in range(50):
                write_atomically(target, text * 1000)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(letter,)) for letter in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert target.read_text(encoding="utf-8") in {letter * 1000 for letter in "abcd"}
    assert os.listdir(tmp_path) == ["cache.json"]


def test_no_other_module_writes_and_renames_a_file_of_its_own() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name in ALLOWED_RENAMES:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bos\.(replace|rename)\(", text) or "mkstemp(" in text:
            offenders.append(str(path.relative_to(PACKAGE)))
    assert not offenders, f"write through pytest_evomemory.util.atomicfile instead: {offenders}"
