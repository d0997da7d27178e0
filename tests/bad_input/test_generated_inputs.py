"""Bad input that cannot live as a static corpus file: symbolic-link loops, parser
bombs (huge integers, deep nesting), oversized records, byte-order marks. Each is
refused up front (exit 4, one line naming the file, no model call) or, for a BOM,
accepted the same way in YAML and JSONL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_evomemory.core.errors import DataError
from pytest_evomemory.testing.fixtures import ServerFactory

from .conftest import KEY_VARIABLE, SECRET, tiny_run_config

BENCHMARK = "{benchmark: files, files: [{name: mine, path: tasks.jsonl}]}"


def _refused(pytester: pytest.Pytester, run: Path, *expected: str) -> str:
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    error = result.stderr.str().strip()
    assert len(error.splitlines()) == 1, error
    for piece in expected:
        assert piece in error, error
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert "collected" not in output
    return error


@pytest.fixture
def run_with_server(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[object]]:
    """A tiny-agent run config whose model is a scripted server; the list is the
    server's received requests (it must stay empty for a refused run)."""
    server = scripted_openai_server()
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    return tiny_run_config(pytester.path, server.base_url, benchmark=BENCHMARK), server.requests  # type: ignore[return-value]


def _loop(directory: Path, name: str) -> Path:
    first, second = directory / name, directory / f"other-{name}"
    os.symlink(second, first)
    os.symlink(first, second)
    return first


# --------------------------------------------------------------------------- symbolic-link loops


def test_run_config_that_is_a_symlink_loop(pytester: pytest.Pytester) -> None:
    _refused(pytester, _loop(pytester.path, "run.yaml"), "run.yaml: is a symbolic link loop")


def test_referenced_part_that_is_a_symlink_loop(pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]]) -> None:
    _loop(pytester.path, "agent.yaml")
    run = pytester.path / "run2.yaml"
    run.write_text(f"benchmark: {BENCHMARK}\nagent: agent.yaml\n", encoding="utf-8")
    _refused(pytester, run, "key 'agent' names 'agent.yaml'", "is a symbolic link loop")


def test_data_file_that_is_a_symlink_loop(pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]]) -> None:
    run, requests = run_with_server
    (pytester.path / "tasks.jsonl").unlink()
    _loop(pytester.path, "tasks.jsonl")
    _refused(pytester, run, "tasks.jsonl is a symbolic link loop")
    assert requests == []


def test_dangling_symlink_names_its_target(pytester: pytest.Pytester) -> None:
    link = pytester.path / "run.yaml"
    os.symlink(pytester.path / "gone.yaml", link)
    _refused(pytester, link, "gone.yaml: file not found; check the path")


# --------------------------------------------------------------------------- parser bombs


@pytest.mark.parametrize(
    ("where", "text", "expected"),
    [
        ("run", "benchmark: {benchmark: sample, seed: " + "9" * 5000 + "}\nagent: {}\n", "an integer of 5,000 digits at line 1"),
        ("run", "benchmark: {benchmark: sample}\nagent: {}\nname: " + "[" * 40_000 + "]" * 40_000 + "\n", "nested more than 100 levels deep"),
        ("run", "benchmark: {benchmark: sample}\nagent: {}\nx:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)), "nested more than 100 levels deep"),
    ],
    ids=["yaml_huge_integer", "yaml_deep_flow_nesting", "yaml_deep_block_nesting"],
)
def test_yaml_parser_bombs(pytester: pytest.Pytester, where: str, text: str, expected: str) -> None:
    run = pytester.path / f"{where}.yaml"
    run.write_text(text, encoding="utf-8")
    _refused(pytester, run, run.name, expected)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "t1", "prompt": "q", "target": "a", "metadata": {"n": ' + "7" * 5000 + "}}", "an integer of 5,000 digits"),
        ('{"id": "t1", "prompt": "q", "target": "a", "metadata": {"n": ' + "[" * 40_000 + "]" * 40_000 + "}}", "nested 40,002 levels deep (limit 100)"),
        ('{"id": "t1", "prompt": "' + "y" * (5 * 1024 * 1024) + '", "target": "a"}', "over the limit of 4,194,304"),
        ('{"id": "t1", "prompt": "bad \\ud800 escape", "target": "a"}', "unpaired surrogate escape"),
        ('{"id": "t1", "prompt": "q", "target": Infinity}', "Infinity is not valid JSON"),
    ],
    ids=["jsonl_huge_integer", "jsonl_deep_nesting", "jsonl_oversized_record", "jsonl_lone_surrogate", "jsonl_infinity"],
)
def test_jsonl_bombs_are_refused_before_any_model_call(
    pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]], line: str, expected: str
) -> None:
    run, requests = run_with_server
    (pytester.path / "tasks.jsonl").write_text(line + "\n", encoding="utf-8")
    _refused(pytester, run, "tasks.jsonl, line 1", expected)
    assert requests == []


def test_record_limit_can_be_raised(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_evomemory.core.validation import (
        DEFAULT_MAX_RECORD_BYTES,
        MAX_RECORD_BYTES_ENV,
        max_record_bytes,
    )

    assert max_record_bytes() == DEFAULT_MAX_RECORD_BYTES
    monkeypatch.setenv(MAX_RECORD_BYTES_ENV, "100")
    assert max_record_bytes() == 100
    for garbage in ("lots", "0", "-5", "1e9"):
        monkeypatch.setenv(MAX_RECORD_BYTES_ENV, garbage)
        with pytest.raises(DataError, match=f"{MAX_RECORD_BYTES_ENV}='{garbage}' is not a whole number of bytes"):
            max_record_bytes()


def test_a_record_limit_that_is_no_number_is_refused_before_any_model_call(
    pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, requests = run_with_server
    monkeypatch.setenv("EVOMEMORY_MAX_RECORD_BYTES", "8MB")
    _refused(pytester, run, "EVOMEMORY_MAX_RECORD_BYTES='8MB' is not a whole number of bytes", "or unset it")
    assert requests == []


# --------------------------------------------------------------------------- byte-order marks


def test_a_bom_is_accepted_alike_in_yaml_and_jsonl(pytester: pytest.Pytester) -> None:
    data = "".join(json.dumps({"id": f"t{i}", "prompt": f"q{i}", "target": "a"}) + "\n" for i in range(2))
    (pytester.path / "tasks.jsonl").write_bytes(b"\xef\xbb\xbf" + data.encode())
    run = pytester.path / "run.yaml"
    run.write_bytes(b"\xef\xbb\xbf" + f"name: bom\noutput_dir: results\nbenchmark: {BENCHMARK}\nagent: {{}}\n".encode())
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    scores = (pytester.path / "results" / "scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["task_id"] for line in scores] == ["t0", "t1"]


def test_a_bom_after_the_first_line_is_not_a_bom(pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]]) -> None:
    run, requests = run_with_server
    (pytester.path / "tasks.jsonl").write_bytes(
        b'{"id": "t1", "prompt": "q", "target": "a"}\n\xef\xbb\xbf{"id": "t2", "prompt": "q", "target": "a"}\n'
    )
    _refused(pytester, run, "tasks.jsonl, line 2: invalid JSON")
    assert requests == []


# --------------------------------------------------------------------------- refusals with a model configured


def test_unknown_threshold_stream_is_refused_before_any_model_call(
    pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]]
) -> None:
    run, requests = run_with_server
    run.write_text(run.read_text().replace(BENCHMARK, "{benchmark: sample, thresholds: {streams: {sample_fact: 0.9}}}"))
    _refused(pytester, run, "key 'thresholds.streams': unknown stream(s) 'sample_fact'", "available: sample_facts")
    assert requests == []


def test_duplicate_key_in_a_referenced_part_names_that_file(pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]]) -> None:
    run, requests = run_with_server
    (pytester.path / "bench.yaml").write_text(
        "benchmark: files\nfiles: [{name: mine, path: tasks.jsonl}]\nthresholds: {overall: 0.99}\nthresholds: {}\n"
    )
    run.write_text(run.read_text().replace(BENCHMARK, "bench.yaml"))
    _refused(pytester, run, "bench.yaml: duplicate key 'thresholds' at line 4 (first at line 3)")
    assert requests == []


def test_a_memory_module_that_raises_on_import(
    pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, requests = run_with_server
    pytester.makepyfile(exploding_memory="import json\nraise RuntimeError('no config for exploding_memory')\n")
    monkeypatch.syspath_prepend(str(pytester.path))
    run.write_text(run.read_text().replace("memory: {backend: inprocess}", "memory: {backend: 'exploding_memory:build'}"))
    error = _refused(
        pytester, run, "key 'backend': memory factory 'exploding_memory:build'",
        "raised RuntimeError: no config for exploding_memory", "exploding_memory.py:2", "fix the module",
    )
    assert "importlib" not in error
    assert requests == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x1f\x8b\x08\x00" + bytes(range(40)), "this is a gzip file, not JSON lines; decompress it"),
        (b"PAR1\x15\x04\x15" + bytes(30), "this is a Parquet file, not JSON lines; convert it"),
        (b"PK\x03\x04" + bytes(30), "this is a zip file, not JSON lines; extract"),
    ],
    ids=["gzip", "parquet", "zip"],
)
def test_a_compressed_or_binary_data_file_says_what_it_is(
    pytester: pytest.Pytester, run_with_server: tuple[Path, list[object]], data: bytes, expected: str
) -> None:
    run, requests = run_with_server
    (pytester.path / "tasks.jsonl").write_bytes(data + b"\n")
    _refused(pytester, run, "tasks.jsonl, line 1", expected)
    assert requests == []


@pytest.mark.parametrize(("key", "name"), [("agent", "recall_baseline"), ("memory", "sqlite"), ("benchmark", "sample")])
def test_a_part_may_name_a_built_in_config(pytester: pytest.Pytester, key: str, name: str) -> None:
    """As --evomemory-config takes a built-in run config's name, a run config's part
    may name a shipped part config; an unknown name lists the choices."""
    parts = {"benchmark": "sample", "agent": "recall_baseline", "memory": "inprocess"}
    parts[key] = name
    run = pytester.path / "run.yaml"
    run.write_text("name: named\noutput_dir: results\n" + "".join(f"{k}: {v}\n" for k, v in parts.items()),
                   encoding="utf-8")
    result = pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider",
                                "--evomemory-limit=1")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    document = json.loads((pytester.path / "results" / "run.json").read_text(encoding="utf-8"))
    assert document["run"]["sources"][key].endswith(f"{name}.yaml")
    parts[key] = "no_such_config"
    run.write_text("name: named\n" + "".join(f"{k}: {v}\n" for k, v in parts.items()), encoding="utf-8")
    error = _refused(pytester, run, f"key '{key}' must name a .yaml/.yml file, a built-in {key} config (")
    assert name in error
