"""Config loading: every mistake names the file and key and says what to do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory import ConfigError, load_run_config
from pytest_evomemory.options import BY_NAME, CLI_FLAGS, PYTEST_FLAGS, Flags, read_options

from ..conftest import CONFIGS, SAMPLE_MEMORY_RUN


def test_shipped_sample_config_resolves_its_three_parts() -> None:
    config = load_run_config(SAMPLE_MEMORY_RUN)
    assert config.name == "sample_memory"
    assert config.benchmark.benchmark == "sample"
    assert config.agent.memory_strategy == "deterministic_recall"
    assert config.memory.backend == "inprocess" and config.memory.top_k == 4
    assert config.sources["agent"] == str(CONFIGS / "agents" / "recall_baseline.yaml")


@pytest.mark.parametrize("path", sorted((CONFIGS / "runs").rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_run_config_is_valid(path: Path) -> None:
    load_run_config(path)


def test_inline_parts_and_overrides(write_run_config: Callable[..., Path]) -> None:
    path = write_run_config(benchmark={"benchmark": "sample", "limit": 5})
    config = load_run_config(path).with_overrides(limit=2, streams=["sample_choice"])
    assert config.benchmark.limit == 2
    assert config.benchmark.streams == ["sample_choice"]
    assert "inline 'benchmark'" in config.sources["benchmark"]


@pytest.mark.parametrize(
    ("part", "value", "expected"),
    [
        ("agent", {"kind": "recall_baseline", "memory_strategy": "sometimes"}, "key 'memory_strategy'"),
        ("agent", {"kind": "recall_baseline", "max_step": 3}, "key 'max_step': unknown key"),
        ("agent", {"kind": "gpt9000"}, "unknown agent kind 'gpt9000'"),
        ("agent", {"kind": "tiny"}, "key 'model': required for kind 'tiny'"),
        ("agent", {"kind": "tiny", "model": {"base_url": "localhost:8000/v1"}}, "key 'model.base_url'"),
        ("agent", {"kind": "tiny", "model": {"base_url": "http:///v1"}}, "http:// or https:// URL with a host"),
        ("memory", {"backend": "inprocess", "top_k": "four"}, "key 'top_k'"),
        ("memory", {"backend": "inprocess", "top_k": 0}, "key 'top_k'"),
        ("memory", {"backend": "redis"}, "unknown memory backend 'redis'"),
        ("benchmark", {"benchmark": "sample", "limit": -1}, "key 'limit'"),
        ("benchmark", {"benchmark": "sample", "thresholds": {"overall": 1.5}}, "key 'thresholds.overall'"),
        ("benchmark", {"benchmark": "sample", "streams": ["a", "a"]}, "listed twice"),
    ],
)
def test_invalid_values_name_the_file_and_key(
    write_run_config: Callable[..., Path], part: str, value: dict[str, object], expected: str
) -> None:
    path = write_run_config(**{part: value})
    with pytest.raises(ConfigError) as raised:
        load_run_config(path)
    assert str(path) in str(raised.value)
    assert expected in str(raised.value)


def test_missing_referenced_file_is_named(tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text("benchmark: ../nowhere/bench.yaml\nagent: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"key 'benchmark' names '../nowhere/bench.yaml', but .* does not exist"):
        load_run_config(run)


def test_missing_run_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_run_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"benchmark: [unclosed\n", "invalid YAML at line"),
        (b"- just\n- a list\n", "expected a mapping"),
        (b"a: &x [1]\nb: *x\n", "YAML aliases are not allowed"),
        (b"name: \xff\xfe\n", "not UTF-8"),
        (b"benchmark: {}\nagent: {}\nsurprise: 1\n", "key 'surprise': unknown key"),
        (b"agent: {}\n", "key 'benchmark': required key is missing"),
        (b"benchmark: /etc/passwd\nagent: {}\n", "must name a .yaml/.yml file"),
    ],
)
def test_malformed_run_files_are_refused_clearly(tmp_path: Path, content: bytes, expected: str) -> None:
    run = tmp_path / "run.yaml"
    run.write_bytes(content)
    with pytest.raises(ConfigError, match=expected):
        load_run_config(run)


def test_huge_config_file_is_refused_before_parsing(tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text("name: " + "x" * 1_100_000, encoding="utf-8")
    with pytest.raises(ConfigError, match="too large"):
        load_run_config(run)


@pytest.mark.parametrize(("flags", "spelled"), [(PYTEST_FLAGS, "--evomemory-limit"), (CLI_FLAGS, "--limit")])
def test_bad_limit_names_the_flag_as_its_entry_point_spells_it(flags: Flags, spelled: str) -> None:
    with pytest.raises(ConfigError, match=f"^{spelled} must be at least 1"):
        read_options({flags.dest(BY_NAME["limit"]): "0"}, flags)


def test_the_documented_configs_path_falls_back_to_the_shipped_file(tmp_path: Path) -> None:
    from pytest_evomemory.configs import BUILTIN_DIR, resolve_run_config

    shipped = resolve_run_config("configs/runs/testing/evomemory_single_turn_medium.yaml", tmp_path)
    assert shipped == (BUILTIN_DIR / "runs" / "testing" / "evomemory_single_turn_medium.yaml").resolve()
    # a file of the user's own always wins, and other missing paths stay missing
    own = tmp_path / "configs" / "runs" / "sample_memory.yaml"
    own.parent.mkdir(parents=True)
    own.write_text("benchmark: {benchmark: sample}\nagent: {kind: recall_baseline}\n", encoding="utf-8")
    assert resolve_run_config("configs/runs/sample_memory.yaml", tmp_path) == own
    assert resolve_run_config("configs/runs/nothing.yaml", tmp_path) == tmp_path / "configs/runs/nothing.yaml"


def _three_files_with_typos(root: Path) -> Path:
    (root / "configs" / "runs").mkdir(parents=True)
    (root / "configs" / "agents").mkdir()
    (root / "configs" / "memory").mkdir()
    (root / "configs" / "agents" / "mine.yaml").write_text("kind: recall_baseline\nmax_step: 4\n")
    (root / "configs" / "memory" / "mine.yaml").write_text("backend: sqlite\ntopk: 8\n")
    run = root / "configs" / "runs" / "mine.yaml"
    run.write_text("name: mine\nbenchmark: sample\nagent: ../agents/mine.yaml\nmemory: ../memory/mine.yaml\n")
    return run


def test_every_files_problems_are_reported_at_once(tmp_path: Path) -> None:
    """Not one typo per attempt: the run file's, the agent's and the memory's together."""
    run = _three_files_with_typos(tmp_path)
    run.write_text(run.read_text() + "outptu_dir: x\n")
    with pytest.raises(ConfigError) as caught:
        load_run_config(run)
    message = str(caught.value)
    assert "\n" not in message
    files = message.split(" | ")
    assert [part.split(": key ")[0] for part in files] == [
        str(run), str(tmp_path / "configs" / "agents" / "mine.yaml"), str(tmp_path / "configs" / "memory" / "mine.yaml"),
    ]
    assert "'outptu_dir': unknown key" in files[0] and "'max_step'" in files[1] and "'topk'" in files[2]
    assert caught.value.source == str(run)


def test_the_documented_refusal_is_the_one_printed(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    (documented,) = [line.strip() for line in docs.splitlines() if line.strip().startswith("ERROR: evomemory: /repo/")]
    with pytest.raises(ConfigError) as caught:
        load_run_config(_three_files_with_typos(tmp_path))
    assert f"ERROR: evomemory: {caught.value}" == documented.replace("/repo/", f"{tmp_path}/")
