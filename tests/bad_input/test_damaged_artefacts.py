"""Damaged artefacts in ``evomemory report`` / ``evomemory compare``: one line, exit 2.

Generated, not hand-picked: a good run directory is written once, then every
field of summary.json, run.json and of a record of scores.jsonl, responses.jsonl
and a transcript is replaced in turn by a wrong type, a negative, huge or
non-finite number, a string that spells one, a nested value of the wrong shape,
or removed. Each damaged directory goes through the commands as a user runs them:
the result is either a page (a missing or harmless field renders as a dash) or
exit 2 with exactly one line on stderr naming the file and the key; never a
traceback, never another exit status.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import cli, run_benchmark
from pytest_evomemory.cli import main
from pytest_evomemory.configs.load import load_run_config

from ..conftest import SAMPLE_MEMORY_RUN

_DELETE = object()

#: What a field is replaced by (a bare NaN too: Python's own JSON writer makes one).
MUTATIONS: list[tuple[str, Any]] = [
    ("string", "x"), ("nan_string", "NaN"), ("list", []), ("object", {}), ("true", True), ("null", None),
    ("negative", -1), ("huge", 1e308), ("minus_huge", -1e308), ("nan", math.nan), ("infinity", math.inf),
    ("big_int", 10**400), ("nested_wrong", [{"a": [1]}]), ("deleted", _DELETE),
]


@pytest.fixture(autouse=True)
def one_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands as main() runs them, with argparse built once (building it is
    three quarters of a refused case's time)."""
    monkeypatch.setattr(cli, "build_parser", functools.cache(cli.build_parser))


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("good") / "run"
    config = load_run_config(SAMPLE_MEMORY_RUN).with_overrides(limit=2, streams=None)
    run_benchmark(config, run_dir)
    assert main(["report", str(run_dir)]) == 0
    return run_dir


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path of a JSON document, interior ones included; of a list its first
    item, of ``streams`` its first stream (the others have the same fields)."""
    if isinstance(value, dict):
        items = list(value.items())[:1] if prefix[-1:] == ("streams",) else value.items()
        for key, item in items:
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list) and value:
        yield (*prefix, 0)
        yield from _paths(value[0], (*prefix, 0))


def _mutated(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(document)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


def _write(path: Path, document: Any, jsonl: bool) -> None:
    if jsonl:
        path.write_text("".join(json.dumps(record) + "\n" for record in document), encoding="utf-8")
    else:
        path.write_text(json.dumps(document), encoding="utf-8")


def _check(
    capsys: pytest.CaptureFixture[str], argv: list[str], output: Path, file: str, key: str
) -> str | None:
    """None when the command behaved (a page, or one line and exit 2), else what went wrong."""
    output.unlink(missing_ok=True)
    try:
        status = main(argv)
    except BaseException as error:  # a traceback is what this test exists to catch
        capsys.readouterr()
        return f"raised {type(error).__name__}: {error}"[:300]
    err = capsys.readouterr().err
    lines = err.splitlines()
    if status == 0:
        page = output.read_text(encoding="utf-8") if output.is_file() else ""
        return None if page.rstrip().endswith("</html>") and not err else f"exit 0 without a page: {err[:200]}"
    if status != 2:
        return f"exit {status}: {err[:200]}"
    if len(lines) != 1 or not lines[0].startswith("evomemory: error: ") or file not in lines[0]:
        return f"not one line naming {file}: {err[:300]}"
    if "key '" in lines[0]:
        named = re.sub(r"\[(\d+)\]", r".\1", lines[0].split("key '", 1)[1].split("'", 1)[0])
        if not (named.startswith(key) or key.startswith(named)):
            return f"names key {named!r}, not {key!r}: {lines[0][:300]}"
    return None


def _run_cases(
    capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path, file: str, *, jsonl: bool = False,
    mutations: list[tuple[str, Any]] = MUTATIONS, compare: bool = False,
    keep: Callable[[tuple[Any, ...]], bool] = lambda path: True,
) -> int:
    damaged = tmp_path / "damaged"
    shutil.copytree(good_run, damaged)
    target = damaged / file
    if jsonl:
        records = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line.strip()]
        document: Any = records
        paths = [path for path in _paths(records) if path[0] == 0]
    else:
        document = json.loads(target.read_text(encoding="utf-8"))
        paths = [path for path in _paths(document) if keep(path)]
    assert len(paths) > 5
    failures = []
    cases = 0
    for path in paths:
        for name, value in mutations:
            _write(target, _mutated(document, path, value), jsonl)
            key = ".".join(str(part) for part in (path[1:] if jsonl else path))
            commands = [(["report", str(damaged), "-o", str(tmp_path / "r.html")], tmp_path / "r.html")]
            if compare:
                commands.append(
                    (["compare", str(good_run), str(damaged), "-o", str(tmp_path / "c.html")], tmp_path / "c.html")
                )
            rendered = False
            for index, (argv, output) in enumerate(commands):
                if index and not rendered and name != "string":
                    continue  # compare loads runs as report does: its refusal is checked once per path
                cases += 1
                problem = _check(capsys, argv, output, file.rpartition("/")[2], key)
                rendered = output.is_file()
                if problem:
                    failures.append(f"{argv[0]} {file} {key} = {name}: {problem}")
    _write(target, document, jsonl)
    assert failures == [], f"{len(failures)} of {cases} cases:\n" + "\n".join(failures[:25])
    return cases


@pytest.mark.slow
def test_every_field_of_summary_json(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    assert _run_cases(capsys, good_run, tmp_path, "summary.json", compare=True) > 1000


def test_every_field_of_a_score_record(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    assert _run_cases(capsys, good_run, tmp_path, "scores.jsonl", jsonl=True, compare=True) > 100


def test_every_field_of_a_response_record(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    assert _run_cases(capsys, good_run, tmp_path, "responses.jsonl", jsonl=True) > 100


def test_every_field_of_a_transcript_record(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    assert _run_cases(capsys, good_run, tmp_path, "transcripts/sample_facts.jsonl", jsonl=True) > 50


@pytest.mark.slow
def test_every_field_of_run_json(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    """Every top-level key, and what the reports read under ``run`` (the resolved
    configs: the compare page's config diff shows every one of them as text)."""
    few = [m for m in MUTATIONS if m[0] in ("string", "list", "object", "null", "nan", "big_int", "deleted")]

    def keep(path: tuple[Any, ...]) -> bool:
        return len(path) == 1 or path[0] == "streams" or path[:2] in (("run", "name"), ("run", "agent"), ("run", "memory"))

    assert _run_cases(capsys, good_run, tmp_path, "run.json", mutations=few, compare=True, keep=keep) > 100


@pytest.mark.parametrize(
    ("file", "content", "says"),
    [
        ("summary.json", "{\"streams\": {}, " * 1, "is not valid JSON"),
        ("summary.json", "[" * 100_000 + "]" * 100_000, "is not valid JSON"),
        ("summary.json", '{"streams": {}, "overall": {"tasks": ' + "9" * 5000 + "}}", "is not valid JSON"),
        ("summary.json", '{"streams": {"s": "text"}}', "key 'streams.s': expected an object, got 'text'"),
        ("summary.json", '{"streams": {"s": {"tasks": -1e308}}}', "key 'streams.s.tasks': expected a whole number"),
        ("summary.json", '{"streams": {"s": {"tasks": 2, "correct": 3}}}', "key 'streams.s.correct': expected at most tasks (2)"),
        ("summary.json", '{"streams": {}, "overall": {"accuracy_ci": [0.9, 0.1]}}', "key 'overall.accuracy_ci': expected a low bound"),
        ("summary.json", '{"streams": {"s": {"tasks": "\\u001b[2J"}}}', "got '\\x1b[2J'"),
        ("scores.jsonl", '{"stream": "s", "task_id": "t", "position": -3}\n', "scores.jsonl, record 1: key 'position'"),
    ],
    ids=["truncated", "nested_too_deep", "huge_integer", "stream_is_text", "tasks_minus_huge", "correct_over_tasks",
         "interval_reversed", "escape_in_value", "negative_position"],
)
def test_the_issue_examples_are_one_line(
    capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path, file: str, content: str, says: str
) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(good_run, damaged)
    (damaged / file).write_text(content, encoding="utf-8")
    assert main(["report", str(damaged)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "\x1b" not in err, err


def test_a_damaged_compare_json_is_only_ever_written(capsys: pytest.CaptureFixture[str], good_run: Path, tmp_path: Path) -> None:
    """compare.json is an output: no command reads it, so a damaged one is replaced."""
    (tmp_path / "c.json").write_text('{"streams": "x", "baseline": NaN', encoding="utf-8")
    assert main(["compare", str(good_run), str(good_run), "-o", str(tmp_path / "c.html")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))["baseline"] == "sample_memory"
