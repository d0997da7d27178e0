"""Every file the package reads goes through one bounded reader (issue 35).

A device, a FIFO, a file over its size bound, JSON nested 200,000 levels deep or an
integer of 6,000 digits is refused in one line naming the file and the bound, by
every reader: configs, pricing, LoCoMo files, caches, run artefacts, the pytest
settings file; what an endpoint sends is bounded alike (test_hostile_replies.py).
A regression would hang (a FIFO) or fill memory (/dev/zero), so each case is cheap
and in-process; one case per door runs the plugin as a user does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main
from pytest_evomemory.cli.pytestini import _section
from pytest_evomemory.config.pricing import PricingFileError, load_pricing_file
from pytest_evomemory.config.yamlio import read_yaml_mapping
from pytest_evomemory.core import boundedread
from pytest_evomemory.core.errors import EvoMemoryError
from pytest_evomemory.models.cache import _read_entry
from pytest_evomemory.rundir import RunDirError, read_json
from pytest_evomemory.streams.locomo import SAMPLE_FILE
from pytest_evomemory.streams.locomo.userfile import read_user_file

from .conftest import assert_no_internal_error


@pytest.fixture(params=["dev_zero", "fifo"])
def endless(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Make a file of a given name that never ends when read: a symbolic link to
    /dev/zero, or a FIFO no one writes to."""

    def make(name: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if request.param == "dev_zero":
            path.symlink_to("/dev/zero")
        else:
            os.mkfifo(path)
        return path

    yield make


def _one_line(error: BaseException, path: Path) -> None:
    text = str(error)
    assert "\n" not in text and str(path) in text and "regular file" in text, text


#: Each reader, given an endless file: it raises (checked) or reads it as absent/damaged.
READERS: dict[str, tuple[str, Callable[[Path], Any], type[BaseException] | None]] = {
    "run_config": ("run.yaml", read_yaml_mapping, EvoMemoryError),
    "pricing": ("prices.yaml", lambda path: load_pricing_file(path, "m"), PricingFileError),
    "locomo_file": ("mine.json", read_user_file, EvoMemoryError),
    "run_document": ("run.json", read_json, RunDirError),
    "any_file": ("x.json", lambda path: boundedread.read_json(path), boundedread.UnreadableFile),
    "response_cache_entry": ("entry.json", _read_entry, None),  # a miss: the call is made again
    "pytest_ini": ("pytest.ini", _section, None),  # no pytest section
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_endless_file_is_refused_by_every_reader(endless: Callable[[str], Path], reader: str) -> None:
    name, read, refused = READERS[reader]
    path = endless(name)
    if refused is None:
        assert read(path) is None
        return
    with pytest.raises(refused) as raised:
        read(path)
    _one_line(raised.value, path)


@pytest.mark.parametrize("artefact", ["scores.jsonl", "responses.jsonl"])
def test_a_run_artefact_that_is_endless_is_one_line_in_report(
    endless: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], artefact: str
) -> None:
    from ..conftest import SAMPLE_MEMORY_RUN

    run = tmp_path / "run"
    assert main(["run", "-q", "--config", str(SAMPLE_MEMORY_RUN), "--limit", "1", "--output-dir", str(run)]) == 0
    (run / artefact).unlink()
    endless(f"run/{artefact}")
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(tmp_path / "page.html")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and artefact in error and "regular file" in error, error


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested 200,000 levels deep (limit 100)"),
        (None, "an integer of 6,000 digits (limit 4300)"),
    ],
    ids=["nested_200000_deep", "category_of_6000_digits"],
)
def test_json_bounds_hold_in_a_locomo_file(tmp_path: Path, document: str | None, says: str) -> None:
    path = tmp_path / "mine.json"
    if document is None:  # a well-formed sample whose question category is huge
        sample = json.loads(SAMPLE_FILE.read_text(encoding="utf-8"))[0]
        document = re.sub(r'"category": \d+', '"category": ' + "7" * 6000, json.dumps([sample]), count=1)
        assert "7" * 6000 in document
    path.write_text(document, encoding="utf-8")
    with pytest.raises(EvoMemoryError) as raised:
        read_user_file(path)
    assert says in str(raised.value) and str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_the_bounds_are_cheap_and_exact() -> None:
    # the depth scan ignores brackets in strings and escaped quotes
    assert boundedread.nesting_depth('{"a\\"[": [1, [2, "]]]"]]}') == 3
    assert boundedread.loads("[" * 100 + "]" * 100) == boundedread.loads("[" * 100 + "]" * 100)
    with pytest.raises(boundedread.BoundExceeded, match="nested 101 levels deep"):
        boundedread.loads("[" * 101 + "]" * 101)
    assert boundedread.loads("9" * 4300) == int("9" * 4300)
    with pytest.raises(boundedread.BoundExceeded, match="4,301 digits"):
        boundedread.loads("-" + "9" * 4301)


def test_a_pricing_file_that_is_dev_zero_through_both_doors(
    pytester: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's example: read whole, it took 21 GB; now refused before any task."""
    from ..conftest import SAMPLE_MEMORY_RUN

    (pytester.path / "prices.yaml").symlink_to("/dev/zero")
    config = pytester.path / "run.yaml"
    shutil.copy(SAMPLE_MEMORY_RUN, config)
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("../benchmarks/sample.yaml", str(SAMPLE_MEMORY_RUN.parents[1] / "benchmarks" / "sample.yaml"))
        .replace("../agents/recall_baseline.yaml", "{kind: tiny, model: {model: m, base_url: 'http://127.0.0.1:9/v1', "
                 "api_key_env: EVOMEMORY_NO_KEY, pricing: prices.yaml}}")
        .replace("../memory/inprocess.yaml", "{backend: inprocess}"),
        encoding="utf-8",
    )
    result = pytester.runpytest(f"--evomemory-config={config}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "prices.yaml" in result.stderr.str() and "regular file" in result.stderr.str()
    capsys.readouterr()
    assert main(["run", "-q", "--config", str(config), "--output-dir", str(tmp_path / "out")]) == 4
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "prices.yaml" in error and "regular file" in error, error


@pytest.mark.parametrize("text", [
    '{"answer": "x"}', " [1, 2.5, -0, 1e400, NaN] ", '"caf\\u00e9"', "\ufeff{}", "[1, 2", "", "{}{}", "1" * 5000,
])
def test_the_bounded_reader_reads_and_refuses_as_json_loads_does(text: str) -> None:
    """The reader keeps one decoder for every call: what it reads, and the words of
    what it refuses (a BOM, a syntax error where), are ``json.loads``'s."""

    def outcome(read: Callable[[str], Any]) -> tuple[str, str]:
        try:
            return "read", repr(read(text))
        except ValueError as error:
            return type(error).__name__, str(error)

    expected = outcome(lambda value: json.loads(value, parse_int=boundedread.bounded_int))
    assert outcome(boundedread.loads) == expected
