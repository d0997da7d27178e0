"""The helpers every refusal's words pass through: the secret-shape test that masks
a pasted key in a config error, the did-you-mean suggestion, the redaction of prose
about a key, the refusal of a setting given twice and of an output directory that
holds the user's own files."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import pytest
from pydantic import BaseModel

from pytest_evomemory import config as config_models
from pytest_evomemory.config.settings import parse_settings
from pytest_evomemory.configs import builtin_names, builtin_part_names
from pytest_evomemory.core.errors import ConfigError
from pytest_evomemory.memory.factory import MEMORY_BACKENDS
from pytest_evomemory.rundir.layout import RunDirError
from pytest_evomemory.rundir.paths import check_output_dir, foreign_entries
from pytest_evomemory.util.redaction import shown
from pytest_evomemory.util.secretshape import SECRET_SHOWN, mask_secret_shaped, secret_shaped
from pytest_evomemory.util.text import did_you_mean


def _config_keys() -> set[str]:
    """Every key of every config model: what a refusal names most."""
    keys: set[str] = set()
    models: list[type[BaseModel]] = [
        value for value in vars(config_models).values() if isinstance(value, type) and issubclass(value, BaseModel)
    ]
    models += [spec for name in MEMORY_BACKENDS.names() if (spec := MEMORY_BACKENDS.get(name).options) is not None]
    for model in models:
        keys.update(model.model_fields)
    return keys


#: Names a refusal quotes that are no secret: model files and names, stream and run names.
_ORDINARY = (
    "Qwen2.5-0.5B-Instruct-Q4_K_M", "llama-3.1-8b-instruct-q4_k_m", "gpt-4o-mini-2024-07-18",
    "MyAgentProject2024ExperimentsV3Final", "test_a_password_in_the_base_url_is_refused0",
    "evomemory_single_turn_medium", "2026-12-06T223401Z-2", "BAAI/bge-base-en-v1.5", "claude-3-7-sonnet-20250219",
)


def test_no_key_name_or_shipped_name_looks_like_a_secret() -> None:
    names = _config_keys() | set(builtin_names()) | set(_ORDINARY)
    names |= {name for part in ("benchmark", "agent", "memory") for name in builtin_part_names(part)}
    assert len(names) > 120
    assert [name for name in names if secret_shaped(name)] == []
    sentence = " ".join(sorted(names))
    assert mask_secret_shaped(sentence) == sentence


@pytest.mark.parametrize(
    "token",
    ["sk-proj-abcdefghijklmnop", "ghp_0123456789abcdefABCDEF", "hf_AbCdEfGhIjKlMnOpQr", "AIzaSyA-1234567890abcdef",
     "gw-Zq8xV3mK9pL2nR7tY4wB6cD1fH5jS0aE"],
)
def test_a_provider_s_key_is_masked_in_a_message(token: str) -> None:
    message = f"run.yaml: key 'kind': unknown agent kind {token!r}; use one of tiny, recall_baseline"
    masked = mask_secret_shaped(message)
    assert token not in masked and SECRET_SHOWN in masked and masked.startswith("run.yaml: key 'kind'")


def test_random_tokens_are_masked() -> None:
    """The shape test on what a key is: random text (base64url, 32 characters and up)."""
    tokens = [secrets.token_urlsafe(24) for _ in range(2000)]
    assert sum(map(secret_shaped, tokens)) / len(tokens) > 0.95


def test_a_config_error_never_holds_a_secret_shaped_value() -> None:
    token = "Zq8xV3mK9pL2nR7tY4wB6cD1fH5jS0aE"
    error = ConfigError(f"x.yaml: key 'model.{token}': unknown key", key=f"model.{token}", source="x.yaml")
    assert token not in str(error) and token not in (error.key or "")
    assert str(error).startswith("x.yaml: key 'model.")


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("max_step", ["kind", "max_steps", "model"], " (did you mean 'max_steps'?)"),
        ("tooluse", ["none", "deterministic_recall", "tool_use"], " (did you mean 'tool_use'?)"),
        ("lowerbound", ["estimate", "lower-bound", "p-value"], " (did you mean 'lower-bound'?)"),
        ("Agent", ["agent", "memory"], " (did you mean 'agent'?)"),
        ("redis", ["inprocess", "sqlite", "postgres"], ""),
        ("sqlite", ["inprocess", "sqlite"], ""),  # not misspelt: nothing to suggest
        (None, ["a"], ""),
    ],
)
def test_did_you_mean(word: object, choices: list[str], expected: str) -> None:
    assert did_you_mean(word, choices) == expected


def test_prose_about_the_api_key_key_is_not_masked_but_its_value_is() -> None:
    """A config error names ``model.api_key``; a header echoes its value."""
    prose = "run.yaml (with --set agent.model.api_key=***): key 'model.api_key': unknown key; the keys here are: x"
    assert shown(prose) == prose
    assert "hunter2xyz" not in shown("'api_key': 'hunter2xyz'") and "hunter2xyz" not in shown("api-key: hunter2xyz")


def test_a_setting_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="set the same key; keep one of them") as caught:
        parse_settings(["memory.top_k=1", "memory.top_k=3"])
    assert caught.value.option == "set" and caught.value.key == "memory.top_k"


@pytest.mark.parametrize("order", [1, -1])
def test_a_key_and_a_key_inside_it_apply_outer_first_in_either_order(order: int) -> None:
    from pytest_evomemory.config.settings import apply_settings

    settings = parse_settings(["agent.model={model: x, seed: 5}", "agent.model.seed=1"][::order])
    assert apply_settings({"kind": "tiny"}, settings, "agent") == {"kind": "tiny", "model": {"model": "x", "seed": 1}}


def test_settings_of_different_keys_are_taken() -> None:
    parsed = parse_settings(["agent.model.seed=1", "agent.model.model=x", "memory.top_k=2"])
    assert [setting.path for setting in parsed] == [("agent", "model", "seed"), ("agent", "model", "model"),
                                                   ("memory", "top_k")]


def test_an_output_dir_holding_the_user_s_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("mine", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "report.html").write_text("<p>mine</p>", encoding="utf-8")
    assert foreign_entries(tmp_path) == ["README.md", "src"]
    with pytest.raises(RunDirError, match=r"already holds files that are no run's \(README.md, src\)"):
        check_output_dir(tmp_path)
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == "<p>mine</p>"  # nothing moved


def test_an_earlier_run_s_directory_or_an_empty_one_is_an_output_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name in ("run.json", "summary.json", "scores.jsonl", "report.html", ".lock"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("{}", encoding="utf-8")
    for name in ("memory", "transcripts", "history", "side-run"):
        (run / name).mkdir()
    (run / "dbs").mkdir()  # a memory backend's files at a path relative to the run directory
    (tmp_path / "empty").mkdir()
    interrupted = tmp_path / "interrupted"
    (interrupted / "dbs").mkdir(parents=True)
    (interrupted / ".lock").write_text("", encoding="utf-8")
    assert check_output_dir(run) == run.resolve()
    assert check_output_dir(interrupted) == interrupted.resolve()
    assert check_output_dir(tmp_path / "empty") == (tmp_path / "empty").resolve()
    assert check_output_dir(tmp_path / "new" / "dir") == (tmp_path / "new" / "dir").resolve()


def test_an_output_file_that_is_a_device_pipe_or_directory_is_refused(tmp_path: Path) -> None:
    """A page is written beside its path and renamed over it: over ``/dev/stdout`` (as
    root) that replaced the device with a file; a pipe would take the page's place."""
    from pytest_evomemory.rundir import output_path_problem

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.html"
    link.symlink_to(fifo)
    assert "is a FIFO (named pipe), not a regular file; give the path of a file" in (output_path_problem(fifo) or "")
    assert "is a FIFO (named pipe), not a regular file" in (output_path_problem(link) or "")
    assert "is a device, not a regular file" in (output_path_problem(Path(os.devnull)) or "")
    assert "is a directory, not a regular file" in (output_path_problem(tmp_path) or "")
    assert "is a device, not a directory" in (output_path_problem(Path(os.devnull), directory=True) or "")
    assert "is a regular file, not a directory" in (
        output_path_problem(_file(tmp_path / "notes.txt"), folder=True) or ""
    )
    assert output_path_problem(tmp_path / "new.html") is None
    assert output_path_problem(_file(tmp_path / "old.html")) is None  # replaced, as asked
    assert output_path_problem(tmp_path, folder=True) is None
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_init_into_a_device_is_refused_and_leaves_it_alone(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_evomemory import cli

    assert cli.main(["init", os.devnull]) == 1
    assert "is a device, not a directory; give a directory" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def _file(path: Path) -> Path:
    path.write_text("mine", encoding="utf-8")
    return path
