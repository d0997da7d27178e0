"""One rule for every path in a config (:mod:`pytest_evomemory.config.paths`): a path
written in a config file is relative to that file, one given on the command line
(``--evomemory-set`` / ``--set``) to the working directory.

Each path-valued key is loaded three ways: from a part file in another directory than
the run config, from an inline part, and from the command line in a third directory.
run.json records the value as written (the fingerprint of a moved checkout is the
same) and where it resolved (``run.paths``). The readers that once joined a relative
path to another directory (the built-in config's folder for ``order_from`` on the
command line; the run config's for a benchmark file's ``files`` and ``path``) are
checked end to end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evomemory.cli import main as evomemory
from pytest_evomemory.config import AgentConfig, BenchmarkConfig, ModelConfig, StreamFile
from pytest_evomemory.config.paths import path_keys
from pytest_evomemory.configs.load import _RunFile, load_run_config
from pytest_evomemory.runtime.run import config_fingerprint

from .conftest import SAMPLE_MEMORY_RUN, SAMPLE_NO_MEMORY_RUN

PRICES = "input_per_million: 1.0\noutput_per_million: 2.0\n"
TINY = {"kind": "tiny", "model": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}}

#: dotted key -> (the part it is in, the part's other keys, the key within the part,
#: how a value is written there, what the loaded config holds for it)
CASES: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "output_dir": ("run", {}, ("output_dir",)),
    "benchmark.data_dir": ("benchmark", {"benchmark": "evomemory_single_turn"}, ("data_dir",)),
    "benchmark.path": ("benchmark", {"benchmark": "locomo"}, ("path",)),
    "benchmark.order_from": ("benchmark", {"benchmark": "sample", "order": "easy_to_hard"}, ("order_from",)),
    "benchmark.files.0.path": ("benchmark", {"benchmark": "files"}, ("files", "0", "path")),
    "agent.model.cache_dir": ("agent", TINY, ("model", "cache_dir")),
    "agent.model.model_path": ("agent", {"kind": "tiny", "model": {"provider": "local"}}, ("model", "model_path")),
    "agent.model.pricing": ("agent", TINY, ("model", "pricing")),
    "agent.model.mock.answers": (
        "agent", {"kind": "tiny", "model": {"provider": "mock", "mock": {"mode": "answers"}}}, ("model", "mock", "answers"),
    ),
}


def test_every_path_valued_key_of_the_config_is_declared_a_path() -> None:
    """The rule covers a key by its type (``PathText``); a key named like a path
    that is not declared one would silently keep a relative value."""
    declared = {
        "run": path_keys(_RunFile), "benchmark": path_keys(BenchmarkConfig), "agent": path_keys(AgentConfig),
    }
    assert declared == {
        "run": (("output_dir",),),
        "benchmark": (("data_dir",), ("files", "[]", "path"), ("order_from",), ("path",)),
        "agent": (("model", "cache_dir"), ("model", "model_path"), ("model", "pricing"), ("model", "mock", "answers")),
    }
    named_like_paths = {
        (model.__name__, name) for model in (_RunFile, BenchmarkConfig, StreamFile, AgentConfig, ModelConfig)
        for name in model.model_fields if name.endswith(("path", "_dir", "_from")) or name == "pricing"
    }
    covered = {("_RunFile", "output_dir"), ("BenchmarkConfig", "data_dir"), ("BenchmarkConfig", "order_from"),
               ("BenchmarkConfig", "path"), ("StreamFile", "path"), ("ModelConfig", "cache_dir"),
               ("ModelConfig", "model_path"), ("ModelConfig", "pricing")}
    assert named_like_paths == covered
    assert set(CASES) == {
        ".".join(key if part == "run" else (part, *key)).replace("[]", "0")
        for part, keys in declared.items() for key in keys
    }


def _place(document: dict[str, Any], key: tuple[str, ...], value: Any) -> dict[str, Any]:
    if key == ("files", "0", "path"):
        return {**document, "files": [{"name": "s", "path": value}]}
    if len(key) > 1:
        return {**document, key[0]: _place(document.get(key[0], {}), key[1:], value)}
    return {**document, key[0]: value}


def _value(config: Any, dotted: str) -> Any:
    """The loaded config's value of ``dotted`` (a pricing file: the prices it gave)."""
    if dotted == "output_dir":
        return config.output_dir
    target: Any = config
    for part in dotted.split("."):
        target = target[int(part)] if isinstance(target, list) else getattr(target, part)
    return target.input_per_million if dotted == "agent.model.pricing" else target


def _recorded(config: Any, dotted: str) -> Any:
    """run.json's value of ``dotted``."""
    target: Any = config.to_dict()
    for part in dotted.split("."):
        target = target[int(part)] if isinstance(target, list) else target[part]
    return target


def _write_run(directory: Path, part: str, keys: dict[str, Any], inline: bool) -> Path:
    """A run config in ``directory``; its ``part`` in ``directory/parts`` unless inline."""
    document: dict[str, Any] = {
        "name": "paths", "benchmark": {"benchmark": "sample"}, "agent": {"kind": "recall_baseline"},
        "memory": {"backend": "inprocess"},
    }
    if part == "run":
        document.update(keys)
    elif inline:
        document[part] = keys
    else:
        (directory / "parts").mkdir(parents=True, exist_ok=True)
        (directory / "parts" / f"{part}.yaml").write_text(yaml.safe_dump(keys), encoding="utf-8")
        document[part] = f"parts/{part}.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.mark.parametrize("dotted", list(CASES))
def test_a_path_in_a_config_file_is_relative_to_that_file_and_on_the_command_line_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dotted: str
) -> None:
    part, others, key = CASES[dotted]
    for directory in ("configs/parts/data", "configs/data", "work/data"):  # a pricing file wherever it may be read
        (tmp_path / directory).mkdir(parents=True)
        (tmp_path / directory / "x").write_text(PRICES, encoding="utf-8")
    work = tmp_path / "work"
    monkeypatch.chdir(work)

    # written in a part file (configs/parts/): relative to that file, not to the run config nor here
    in_file = _write_run(tmp_path / "configs", part, _place(others, key, "data/x"), inline=False)
    loaded = load_run_config(in_file)
    expected = tmp_path / "configs" / ("parts" if part != "run" else "") / "data" / "x"
    if dotted == "agent.model.pricing":  # read at load, from that file
        assert _value(loaded, dotted) == 1.0 and loaded.located[dotted] == str(expected)
    else:
        assert _value(loaded, dotted) == str(expected)
        recorded = loaded.to_dict()
        if part != "run":  # run.json: the value as written, and where it resolved
            assert _recorded(loaded, dotted) == "data/x"
        assert recorded["paths"][dotted] == str(expected)

    # written inline in the run config (configs/): relative to the run config
    inline = _write_run(tmp_path / "configs", part, _place(others, key, "data/x"), inline=True)
    assert load_run_config(inline).located[dotted] == str(tmp_path / "configs" / "data" / "x")

    # given on the command line: relative to the working directory, wherever the configs are
    if part == "run":
        setting = "output_dir=data/x"
    elif key == ("files", "0", "path"):
        setting = "benchmark.files=[{name: s, path: data/x}]"
    else:
        setting = f"{part}.{'.'.join(key)}=data/x"
    given = _write_run(tmp_path / "configs", part, others if part != "run" else {}, inline=False)
    assert load_run_config(given, [setting]).located[dotted] == str(work / "data" / "x")
    monkeypatch.chdir(tmp_path)  # ~ is the home directory, on the command line and in a file
    monkeypatch.setenv("HOME", str(work))
    assert load_run_config(given, [setting.replace("data/x", "~/data/x")]).located[dotted] == str(work / "data" / "x")


def test_a_moved_checkout_is_the_same_config(tmp_path: Path) -> None:
    """run.json records paths as written: the config fingerprint (what a resume and
    the shards of one session compare) does not change with where the files are."""
    keys = {"benchmark": "sample", "order": "easy_to_hard", "order_from": ["runs/a", "runs/b"]}
    first = load_run_config(_write_run(tmp_path / "here", "benchmark", keys, inline=False))
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    second = load_run_config(tmp_path / "there" / "run.yaml")
    assert first.benchmark.order_from == [str(tmp_path / "here" / "parts" / "runs" / name) for name in "ab"]
    assert first.to_dict()["benchmark"]["order_from"] == ["runs/a", "runs/b"]
    assert config_fingerprint(first) == config_fingerprint(second)
    assert first.to_dict()["paths"]["benchmark.order_from.1"] == str(tmp_path / "here" / "parts" / "runs" / "b")


def test_the_documented_order_from_on_the_command_line_finds_the_run_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/paper.md's recipe with a built-in config: before, ``order_from`` resolved
    against the installed config's folder, and the error suggested the form given."""
    monkeypatch.chdir(tmp_path)
    assert evomemory(["run", "--config", str(SAMPLE_MEMORY_RUN), "--output-dir", "results/control", "-q"]) == 0
    assert evomemory(["run", "--config", str(SAMPLE_NO_MEMORY_RUN), "--output-dir", "results/h2e", "-q",
                      "--set", "benchmark.order=hard_to_easy", "--set", "benchmark.order_from=results/control"]) == 0
    run = json.loads((tmp_path / "results" / "h2e" / "run.json").read_text(encoding="utf-8"))
    assert run["run"]["benchmark"]["order_from"] == "results/control"
    assert run["run"]["paths"] == {"benchmark.order_from": str(tmp_path / "results" / "control")}
    assert run["streams"][0]["order"]["difficulty"].startswith("order_from")
    capsys.readouterr()
    assert evomemory(["run", "--config", str(SAMPLE_NO_MEMORY_RUN), "--output-dir", "results/bad",
                      "--set", "benchmark.order=hard_to_easy", "--set", "benchmark.order_from=results/nothing"]) == 4
    error = capsys.readouterr().err
    assert f"{tmp_path / 'results' / 'nothing'} is not a directory" in error and error.count("\n") == 1


def test_a_benchmark_file_reads_its_streams_relative_to_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``files[].path`` in a benchmark config kept beside its data, named by a run
    config elsewhere (before: read relative to the run config, against the docs)."""
    data = tmp_path / "benchmarks"
    data.mkdir()
    (data / "qa.jsonl").write_text(json.dumps({"id": "t1", "prompt": "2+2?", "target": "4"}) + "\n", encoding="utf-8")
    (data / "qa.yaml").write_text("benchmark: files\nfiles:\n  - {name: qa, path: qa.jsonl}\n", encoding="utf-8")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "qa.yaml").write_text(
        "name: qa\nbenchmark: ../benchmarks/qa.yaml\nagent: {kind: recall_baseline}\nmemory: {backend: inprocess}\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert evomemory(["run", "--config", "runs/qa.yaml", "--output-dir", "out", "-q"]) == 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["streams"]["qa"]["tasks"] == 1
