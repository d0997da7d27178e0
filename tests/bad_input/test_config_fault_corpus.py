"""The config fault corpus, through both doors: every malformed run config, part,
option or ini value is ONE line naming the file, the key (its full dotted path) or
the option, and what to do; exit 4 before any model call; no traceback; no secret.

Each case runs through ``evomemory run`` in this process (its ``main``, as the
console script calls it: the exit status and stderr the user sees) against the
scripted server, whose request count proves no model was called; and through the
engine as the pytest door drives it (:meth:`Session.open`, then the preflight the
plugin runs at session start, each error rendered for pytest), which must say the
same words with pytest's option spelling. A few end-to-end cases below run the
real doors (``pytester``, the ``evomemory`` process). The corpus of files in
``corpus/`` (test_bad_input.py) is the pytest door's; this one adds the cases of
both doors at once: secrets, suggestions, options, output directories.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory import cli
from pytest_evomemory.core.errors import EvoMemoryError
from pytest_evomemory.options import CLI_FLAGS, PYTEST_FLAGS, Flags, read_options, render
from pytest_evomemory.reporting.reports import REPORTS
from pytest_evomemory.runtime.session import Session, SessionSetup
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import ScriptedServer
from pytest_evomemory.util.redaction import shown

from .conftest import KEY_VARIABLE
from .test_bad_input import SAYS_WHAT_TO_DO

#: A gateway's token: no ``sk-`` prefix, so only its shape says it is a secret.
SHAPED = "gw-Zq8xV3mK9pL2nR7tY4wB6cD1fH5jS0aE"
#: The value of the variable ``model.api_key_env`` names: plain words, no secret's
#: shape, known to be a secret only because the config names its variable.
NAMED = "plain-words-but-the-env-key-value"

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    """An edit setting the dotted ``path`` of the run config (``agent.model.seed``)."""
    def edit(config: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = config
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value
    return edit


def _drop(path: str) -> Edit:
    def edit(config: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = config
        for part in parents:
            target = target[part]
        del target[last]
    return edit


@dataclass(frozen=True)
class Case:
    """One bad input: how the run config (or command line) differs from a good one,
    and what the one line must say."""

    expected: tuple[str, ...]
    edit: Edit | None = None
    #: the run config's whole text (bytes: written as they are) instead of the good one
    text: str | bytes | None = None
    #: words after ``evomemory run --config run.yaml`` (pytest: with --evomemory-)
    args: tuple[str, ...] = ()
    #: files beside the run config (a directory when the content is None)
    files: Mapping[str, str | None] = field(default_factory=dict)
    #: the file the line names (relative to the repository); None: an option is at fault
    names: str | None = "run.yaml"
    #: the dotted key the ConfigError carries (``error.key``), when one is at fault
    key: str | None = None
    #: the command line names run.yaml first (else ``args`` name the config)
    own_config: bool = True
    #: environment variables set (a value) or unset (None) for the run
    environment: Mapping[str, str | None] = field(default_factory=dict)


def _good(base_url: str) -> dict[str, Any]:
    return {
        "name": "faults",
        "benchmark": {"benchmark": "files", "files": [{"name": "mine", "path": "tasks.jsonl"}],
                      "thresholds": {"overall": 0.0}},
        "memory": {"backend": "inprocess", "top_k": 2},
        "agent": {
            "kind": "tiny", "memory_strategy": "none", "max_steps": 4,
            "model": {"model": "scripted-model", "base_url": base_url, "api_key_env": KEY_VARIABLE,
                      "max_retries": 0, "cache": False},
        },
    }


_GOOD_TEXT = "name: faults\nbenchmark: sample\nagent: recall_baseline\n"

CASES: dict[str, Case] = {
    # ----------------------------------------------------------------- YAML and the file itself
    "yaml_tab_indent": Case(("invalid YAML at line 3", "indent with spaces, not tabs"),
                            text="name: faults\nagent:\n\tkind: tiny\n"),
    "yaml_unclosed_quote": Case(("invalid YAML at line", "need quotes"), text='name: "faults\nagent: x\n'),
    "yaml_duplicate_key": Case(("duplicate key 'agent' at line 4 (first at line 3)", "remove one"),
                               text=_GOOD_TEXT + "agent: tiny_mock\n", key="agent"),
    "empty_file": Case(("key 'benchmark': required key is missing", "key 'agent': required key is missing"),
                       text="", key="benchmark"),
    "only_comments": Case(("key 'benchmark': required key is missing",), text="# to do\n", key="benchmark"),
    "not_utf8": Case(("not UTF-8 text (byte", "save the file as UTF-8"), text=_GOOD_TEXT.encode() + b"# caf\xe9\n"),
    "utf16": Case(("this is UTF-16 text",), text=_GOOD_TEXT.encode("utf-16")),
    "top_level_list": Case(("expected a mapping of keys to values, got a list",), text="- benchmark\n- agent\n"),
    "top_level_scalar": Case(("expected a mapping of keys to values, got a string",), text="sample_memory\n"),
    "yaml_tag": Case(("YAML tags",), text=_GOOD_TEXT + "output_dir: !!python/name:os.getcwd\n"),
    "part_file_missing": Case(("key 'agent' names 'agents/mine.yaml', but", "does not exist", "check the path"),
                              edit=_set("agent", "agents/mine.yaml"), key="agent"),
    "part_is_a_directory": Case(("key 'agent' names 'agents.yaml', but", "is a directory, not a file"),
                                edit=_set("agent", "agents.yaml"), files={"agents.yaml": None}, key="agent"),
    "part_file_empty": Case(("agent.yaml: the file is empty; write the agent config in it",),
                            edit=_set("agent", "agent.yaml"), files={"agent.yaml": "# nothing yet\n"},
                            names="agent.yaml"),
    "part_file_bad_yaml": Case(("agent.yaml: invalid YAML at line 2, column 1: expected ',' or ']'",), edit=_set("agent", "agent.yaml"),
                               files={"agent.yaml": "kind: [tiny\n"}, names="agent.yaml"),
    "run_config_named_as_the_agent": Case(("my_run.yaml: this is a run config (it has agent, memory), not an agent "
                                           "config; name an agent config here",), edit=_set("agent", "my_run.yaml"),
                                          files={"my_run.yaml": "benchmark: sample\nagent: tiny_mock\nmemory: inprocess\n"},
                                          names="my_run.yaml"),
    "memory_config_inline_as_the_agent": Case(("(inline 'agent'): this is a memory config (it has backend, top_k)",),
                                              edit=_set("agent", {"backend": "sqlite", "top_k": 3})),
    "agent_config_as_the_run_config": Case(("this is an agent config (it has kind, model), not a run config; pass a "
                                            "run config",), text="kind: tiny\nmodel: {provider: mock}\n"),
    # ----------------------------------------------------------------- unknown keys, at every level
    "unknown_top_level_key": Case(("key 'agnet': unknown key (did you mean 'agent'?)", "the keys here are: name,"),
                                  edit=_set("agnet", {}), key="agnet"),
    "unknown_agent_key": Case(("key 'max_step': unknown key (did you mean 'max_steps'?)",),
                              edit=_set("agent.max_step", 3), key="max_step"),
    "unknown_model_key": Case(("key 'model.temprature': unknown key (did you mean 'temperature'?)",),
                              edit=_set("agent.model.temprature", 0.5), key="model.temprature"),
    "unknown_mock_key": Case(("key 'model.mock.anwser': unknown key (did you mean 'answer'?)",),
                             edit=_set("agent.model", {"provider": "mock", "mock": {"mode": "fixed", "anwser": "1"}}),
                             key="model.mock.anwser"),
    "unknown_memory_key": Case(("key 'topk': unknown key (did you mean 'top_k'?)",), edit=_set("memory.topk", 2),
                               key="topk"),
    "unknown_memory_section_key": Case(("key 'sqlite.pth': unknown key (did you mean 'path'?)", "keys here are: path"),
                                       edit=_set("memory", {"backend": "sqlite", "sqlite": {"pth": "m.db"}}),
                                       key="sqlite.pth"),
    "unknown_benchmark_key": Case(("key 'limt': unknown key (did you mean 'limit'?)",),
                                  edit=_set("benchmark.limt", 1), key="limt"),
    "unknown_key_in_a_list_entry": Case(
        ("key 'files.0.pth': unknown key (did you mean 'path'?); the keys here are: name, path, match_mode",),
        edit=_set("benchmark.files", [{"name": "mine", "pth": "tasks.jsonl", "path": "tasks.jsonl"}]),
        key="files.0.pth"),
    "unknown_threshold_key": Case(("key 'thresholds.overal': unknown key (did you mean 'overall'?)",),
                                  edit=_set("benchmark.thresholds", {"overal": 0.5}), key="thresholds.overal"),
    "two_unknown_keys_in_one_mapping": Case(("key 'max_step': unknown key (did you mean 'max_steps'?); the keys here are: "
                                             "kind,", "; key 'modl': unknown key (did you mean 'model'?)"),
                                            edit=lambda config: config["agent"].update(max_step=3, modl={}),
                                            key="max_step"),
    # ----------------------------------------------------------------- wrong types
    "string_for_int": Case(("key 'max_steps': Input should be a valid integer; write a whole number",),
                           edit=_set("agent.max_steps", "4"), key="max_steps"),
    "list_for_mapping": Case(("key 'model': Input should be a valid dictionary; write a mapping",),
                             edit=_set("agent.model", ["scripted-model"]), key="model"),
    "bool_for_number": Case(("key 'model.temperature': Input should be a valid number (true/false is not a number",),
                            edit=_set("agent.model.temperature", True), key="model.temperature"),
    "null_for_count": Case(("key 'max_steps': Input should be a valid integer",), edit=_set("agent.max_steps", None),
                           key="max_steps"),
    "null_part": Case(("key 'agent': expected a valid string or a valid dictionary; name a config file",),
                      edit=_set("agent", None), key="agent"),
    "number_for_text": Case(("key 'model.model': Input should be a valid string; write text",),
                            edit=_set("agent.model.model", 4), key="model.model"),
    # ----------------------------------------------------------------- out of range
    "negative_temperature": Case(("key 'model.temperature': Input should be greater than or equal to 0",),
                                 edit=_set("agent.model.temperature", -0.5), key="model.temperature"),
    "negative_top_k": Case(("key 'top_k': Input should be greater than or equal to 1",), edit=_set("memory.top_k", -3),
                           key="top_k"),
    "negative_max_connections": Case(("key 'model.max_connections': Input should be greater than or equal to 1",),
                                     edit=_set("agent.model.max_connections", -1), key="model.max_connections"),
    "zero_repeats": Case(("key 'repeats': Input should be greater than or equal to 1",),
                         edit=_set("benchmark.repeats", 0), key="repeats"),
    "negative_limit": Case(("key 'limit'",), edit=_set("benchmark.limit", -1), key="limit"),
    "threshold_above_one": Case(("key 'thresholds.overall'",), edit=_set("benchmark.thresholds.overall", 80),
                                key="thresholds.overall"),
    # ----------------------------------------------------------------- bad names and enum values
    "bad_provider": Case(("key 'model.provider': Input should be 'openai', 'local' or 'mock'",
                          "(did you mean 'openai'?)"), edit=_set("agent.model.provider", "opnai"), key="model.provider"),
    "bad_memory_strategy": Case(("(did you mean 'tool_use'?)",), edit=_set("agent.memory_strategy", "tooluse"),
                                key="memory_strategy"),
    "bad_order": Case(("key 'order': Input should be 'given',", "(did you mean 'shuffle'?)"),
                      edit=_set("benchmark.order", "shufle"), key="order"),
    "unknown_agent_kind": Case(("key 'kind': unknown agent kind 'tiyn' (did you mean 'tiny'?)",),
                               edit=_set("agent.kind", "tiyn"), key="kind"),
    "unknown_memory_backend": Case(("key 'backend': unknown memory backend 'sqlit' (did you mean 'sqlite'?)",),
                                   edit=_set("memory.backend", "sqlit"), key="backend"),
    "builtin_part_misspelt": Case(("got 'sampel' (did you mean 'sample'?); write one of those",),
                                  edit=_set("benchmark", "sampel"), key="benchmark"),
    "unknown_stream_in_config": Case(("unknown stream(s) 'mien' (did you mean 'mine'?)",),
                                     edit=_set("benchmark.streams", ["mien"]), key="streams"),
    "env_variable_in_a_value": Case(("'${EVOMEMORY_UNSET_MODEL}' at line", "do not expand environment variables",
                                     "--set"),
                                    edit=_set("agent.model.model", "${EVOMEMORY_UNSET_MODEL}")),
    "value_too_long_for_a_line": Case(("key 'kind': unknown agent kind 'xxxx", "...(20,001 characters)'"),
                                      edit=_set("agent.kind", "x" * 20_000), key="kind"),
    "part_name_too_long_for_a_file_name": Case(("key 'benchmark' must name a .yaml/.yml file",),
                                               edit=_set("benchmark", "x" * 300), key="benchmark"),
    # ----------------------------------------------------------------- secrets, wherever they are pasted
    "secret_as_agent_kind": Case(("key 'kind': unknown agent kind",), edit=_set("agent.kind", SHAPED), key="kind"),
    "secret_as_backend": Case(("key 'backend': unknown memory backend",), edit=_set("memory.backend", SHAPED),
                              key="backend"),
    "secret_in_a_url_that_is_no_url": Case(("key 'model.base_url':", "is not an http:// or https:// URL"),
                                           edit=_set("agent.model.base_url", f"localhost:8000/{SHAPED}"),
                                           key="model.base_url"),
    "secret_as_a_key_name": Case(("unknown key",), edit=_set(f"agent.model.{SHAPED}", 1)),
    "secret_in_api_key_env": Case(("key 'model.api_key_env': holds what looks like the secret itself",),
                                  edit=_set("agent.model.api_key_env", SHAPED), key="model.api_key_env"),
    "named_secret_as_agent_kind": Case(("key 'kind': unknown agent kind",), edit=_set("agent.kind", NAMED),
                                       key="kind"),
    "named_secret_in_a_stream_name": Case(("key 'files.0.name'",),
                                          edit=_set("benchmark.files", [{"name": f"{NAMED}/x", "path": "tasks.jsonl"}]),
                                          key="files.0.name"),
    "secret_in_a_setting": Case(("key 'model.api_key': unknown key (did you mean 'api_key_env'?)",),
                                args=("--set", f"agent.model.api_key={SHAPED}")),
    "named_secret_as_an_option_value": Case(("{--limit} must be at least 1",), args=("--limit", NAMED), names=None),
    "secret_as_a_choice": Case(("{--min-gain-by} must be one of",), args=("--min-gain-by", SHAPED, "--min-gain", "1"),
                               names=None),
    # ----------------------------------------------------------------- files a config refers to
    "stream_file_missing": Case(("stream 'mine': data file", "nope.jsonl not found", "check 'path'"),
                                edit=_set("benchmark.files.0.path", "nope.jsonl")),
    "stream_file_is_a_directory": Case(("must be a .jsonl file",), edit=_set("benchmark.files.0.path", "."),
                                       key="files"),
    "pricing_file_missing": Case(("key 'model.pricing':",), edit=_set("agent.model.pricing", "prices.yaml"),
                                 key="model.pricing"),
    "mock_answers_missing": Case(("key 'model.mock.answers':",),
                                 edit=_set("agent.model", {"provider": "mock", "mock": {"mode": "answers",
                                                                                       "answers": "answers.yaml"}}),
                                 key="model.mock.answers"),
    "agent_factory_not_importable": Case(("key 'kind': agent factory 'no_such_module_xyz:make': cannot import module",),
                                         edit=_set("agent", {"kind": "no_such_module_xyz:make"}), key="kind"),
    "agent_factory_raises_on_import": Case(("importing 'raising_agents' raised RuntimeError: broken on purpose",
                                            "fix the module"),
                                           edit=_set("agent", {"kind": "raising_agents:make"}),
                                           files={"raising_agents.py": "raise RuntimeError('broken on purpose')\n"},
                                           key="kind"),
    "agent_factory_missing_attribute": Case(("module 'plain_agents' has no callable 'make'",),
                                            edit=_set("agent", {"kind": "plain_agents:make"}),
                                            files={"plain_agents.py": "VALUE = 1\n"}, key="kind"),
    "memory_factory_not_importable": Case(("no_such_memory_xyz",), edit=_set("memory", {"backend": "no_such_memory_xyz:make"})),
    "cache_dir_is_a_file": Case(("key 'model.cache_dir':", "tasks.jsonl is a file where a directory is expected",
                                 "set model.cache: false"),
                                edit=_set("agent.model", {"model": "m", "api_key_env": KEY_VARIABLE, "cache": True,
                                                          "cache_dir": "tasks.jsonl", "max_retries": 0}),
                                key="model.cache_dir", environment={"EVOMEMORY_CACHE_DIR": None}),
    "cache_dir_variable_under_a_file": Case(("the environment variable EVOMEMORY_CACHE_DIR names the response cache",
                                             "unset it"),
                                            edit=_set("agent.model.cache", True), names=None,
                                            environment={"EVOMEMORY_CACHE_DIR": "tasks.jsonl/cache"}),
    # ----------------------------------------------------------------- the command line
    "builtin_run_config_misspelt": Case(("no built-in run config named 'sampel_memory' (did you mean 'sample_memory'?)",),
                                        args=("--config", "sampel_memory"), names=None, own_config=False),
    "same_arm_twice": Case(("two arms are named 'faults'", "set another `name:`"), args=("--config", "run.yaml")),
    "set_the_same_key_twice": Case(("set the same key; keep one of them",),
                                   args=("--set", "memory.top_k=1", "--set", "memory.top_k=3"), names=None),
    "set_an_unknown_part": Case(("unknown key 'agnet.kind' (did you mean 'agent'?)",),
                                args=("--set", "agnet.kind=tiny"), names=None),
    "set_without_equals": Case(("expected KEY=VALUE",), args=("--set", "agent.kind"), names=None),
    "chains_zero": Case(("{--chains} must be at least 1",), args=("--chains", "0"), names=None),
    "chains_negative": Case(("{--chains} must be at least 1", "got '-1'"), args=("--chains=-1",), names=None),
    "chains_not_a_number": Case(("{--chains} must be at least 1", "got 'x'"), args=("--chains", "x"), names=None),
    "limit_zero": Case(("{--limit} must be at least 1",), args=("--limit", "0"), names=None),
    "repeats_too_many": Case(("{--repeats} must be at most 100",), args=("--repeats", "101"), names=None),
    "max_cost_negative": Case(("{--max-cost} must be a positive number",), args=("--max-cost=-1",), names=None),
    "shard_out_of_range": Case(("{--shard} must be I/N",), args=("--shard", "3/2"), names=None),
    "shard_by_without_shard": Case(("{--shard-by} chooses what a shard's cell is",), args=("--shard-by", "arm"),
                                   names=None),
    "min_gain_by_misspelt": Case(("(did you mean 'lower-bound'?)",), args=("--min-gain", "1", "--min-gain-by",
                                                                         "lowerbound"), names=None),
    "min_gain_with_one_arm": Case(("{--min-gain} gates the gain of an arm over the baseline",),
                                  args=("--min-gain", "5"), names=None),
    "min_accuracy_percent": Case(("the fraction must be between 0 and 1",), args=("--min-accuracy", "90"), names=None),
    "min_accuracy_words": Case(("expected [STREAM=]FRACTION; write e.g. 0.5",), args=("--min-accuracy", "high"),
                               names=None),
    "min_accuracy_stream_misspelt": Case(("unknown stream 'mien' (did you mean 'mine'?)",),
                                         args=("--min-accuracy", "mien=0.5"), names=None),
    "stream_option_misspelt": Case(("{--stream}: unknown stream(s) 'mien' (did you mean 'mine'?)",),
                                   args=("--stream", "mien")),
    "stream_option_joined_by_commas": Case(("not one joined by commas",), args=("--stream", "mine,mine")),
    "empty_option_value": Case(("{--output-dir} is given an empty value",), args=("--output-dir=",), names=None),
    "resume_nowhere": Case(("{--resume}", "no readable run.json there"), args=("--resume", "nowhere"), names=None),
    "compare_nowhere": Case(("{--compare}", "is not a directory"), args=("--compare", "nowhere"), names=None),
    # ----------------------------------------------------------------- where the run would be written
    "output_dir_under_a_file": Case(("tasks.jsonl is a file, not a directory", "give another {--output-dir}"),
                                    args=("--output-dir", "tasks.jsonl/out"), names=None),
    "output_dir_in_proc": Case(("holds no files", "{--output-dir}"), args=("--output-dir", "/proc/evomemory-out"),
                               names=None),
    "output_dir_holds_other_files": Case(("already holds files that are no run's (run.yaml, tasks.jsonl)",
                                          "give a new or empty {--output-dir}"), args=("--output-dir", "."),
                                         names=None),
    "output_dir_name_in_config_holds_other_files": Case(("already holds files that are no run's (notes.txt)",),
                                                        edit=_set("output_dir", "mine"),
                                                        files={"mine": None, "mine/notes.txt": "my notes"},
                                                        names=None),
}


@pytest.fixture
def server(scripted_openai_server: ServerFactory) -> ScriptedServer:
    return scripted_openai_server()


def _repository(root: Path, case: Case, base_url: str, named: str = NAMED) -> Path:
    """The agent repository of ``case``: its run config, a task file, its other files."""
    (root / "tasks.jsonl").write_text('{"id": "t1", "prompt": "Say 1", "target": "1"}\n', encoding="utf-8")
    for name, content in case.files.items():
        if content is None:
            (root / name).mkdir(parents=True, exist_ok=True)
        else:
            (root / name).write_text(content, encoding="utf-8")
    run = root / "run.yaml"
    if case.text is not None:
        run.write_bytes(case.text if isinstance(case.text, bytes) else case.text.encode())
    else:
        config = _good(base_url)
        if case.edit is not None:
            case.edit(config)
        run.write_text(json.dumps(config).replace(NAMED, named), encoding="utf-8")
    return run


def _words(case: Case, named: str) -> list[str]:
    """The command line of ``evomemory run``; pytest's is the same with its prefix."""
    words = [word.replace(NAMED, named) for word in case.args]
    return ["--config", "run.yaml", *words] if case.own_config else words


def _pytest_words(words: list[str]) -> list[str]:
    return [word.replace("--", "--evomemory-", 1) if word.startswith("--") else word for word in words]


def _named_secret(name: str) -> str:
    """The case's own value of the key variable: a secret registered once stays
    registered in the process, so each case proves its own masking."""
    return f"{NAMED}-{name.replace('_', '-')}"


def _engine_says(words: list[str], flags: Flags, here: Path) -> str:
    """What the engine refuses ``words`` with, rendered as ``flags``' door prints it,
    or "" when it accepts them: Session.open, then the preflight."""
    args = cli.build_parser("run").parse_args(["run", *words])
    values = {flags.dest(option): getattr(args, option.dest) for option in _options()}
    door = flags.entry
    try:
        options = read_options(values, flags)
        session = Session.open(SessionSetup(options, flags, here, writes=True), reports=REPORTS)
    except EvoMemoryError as error:
        return shown(render(f"evomemory: {error}", door))
    try:
        session.collector.preflight(builtin_agent=True, builtin_memory=True)
    except EvoMemoryError as error:
        return shown(render(f"evomemory: {error}", door))
    finally:
        session.release()
    return ""


def _options() -> list[Any]:
    from pytest_evomemory.options import OPTIONS

    return [option for option in OPTIONS if "cli" in option.entries]


def _files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if "__pycache__" not in path.parts}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_before_any_model_call_alike_at_both_doors(
    name: str, server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[name]
    named = _named_secret(name)
    monkeypatch.setenv(KEY_VARIABLE, named)
    for variable, value in case.environment.items():
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # where a module:factory is imported from, as in a repository
    _repository(tmp_path, case, server.base_url, named)
    before = _files(tmp_path)
    words = _words(case, named)

    status = cli.main(["run", *words])
    out, err = capsys.readouterr()

    assert status == 4, f"{name}: exit {status}\n{out}\n{err}"
    line = err.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("evomemory: error: "), line
    assert len(line) < 2000, f"{name}: a line of {len(line):,} characters"
    for piece in case.expected:
        assert render(piece, "cli") in line, f"{name}: {piece!r} not in {line}"
    assert SAYS_WHAT_TO_DO.search(line) or "did you mean" in line, f"{name}: says not what to do: {line}"
    if case.names is not None:
        assert str(tmp_path / case.names) in line, f"{name}: the file is not named: {line}"
    for secret in (SHAPED, named):
        assert secret not in out + err, f"{name}: a secret is shown: {line}"
    assert "Traceback" not in out + err and not re.search(r"pytest_evomemory/\S+\.py", err), err
    assert server.requests == [], f"{name}: a model was called before the refusal"
    assert _files(tmp_path) == before, f"{name}: the refused run wrote {_files(tmp_path) - before}"

    # The engine as each door drives it: what evomemory run printed, and the same
    # words in pytest's spelling of the options.
    cli_said = _engine_says(words, CLI_FLAGS, tmp_path)
    pytest_said = _engine_says(words, PYTEST_FLAGS, tmp_path)
    assert cli_said == line.replace("evomemory: error: ", "evomemory: ", 1)
    assert pytest_said.replace("--evomemory-", "--") == cli_said, f"{name}: the doors differ"
    if any("{--" in piece for piece in case.expected):  # an option is at fault: pytest names it as its user types it
        assert "--evomemory-" in pytest_said, pytest_said
    assert server.requests == [] and _files(tmp_path) == before


def test_a_key_the_error_names_is_the_full_dotted_path(server: ScriptedServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``ConfigError.key`` (what a report or a caller reads) is the dotted path the
    message names, for each case that has one: no pydantic branch (``agent.str``)."""
    from pytest_evomemory.configs.load import load_run_config
    from pytest_evomemory.core.errors import ConfigError

    checked = 0
    for name, case in sorted(CASES.items()):
        if case.key is None or case.args:
            continue
        root = tmp_path / name
        root.mkdir()
        monkeypatch.chdir(root)
        _repository(root, case, server.base_url)
        try:
            load_run_config(root / "run.yaml")
        except ConfigError as error:
            assert error.key == case.key, f"{name}: key {error.key!r}, expected {case.key!r}: {error}"
            assert f"'{case.key}'" in str(error) or case.key.split(".")[0] in str(error), (name, str(error))
            checked += 1
        # a case refused only by the session (a factory, a stream file) is checked above
    assert checked >= 35


def test_the_keys_of_a_mapping_are_listed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three typos in one mapping: each named with its suggestion, the keys listed once."""
    from pytest_evomemory.configs.load import load_run_config
    from pytest_evomemory.core.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    for where in ("agent", "memory"):
        config = {"benchmark": "sample", "agent": {"kind": "recall_baseline"}, "memory": {"backend": "inprocess"}}
        config[where].update({"max_step": 3, "topk": 2, "zzz": 1})  # type: ignore[attr-defined]
        (tmp_path / "run.yaml").write_text(json.dumps(config), encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_run_config(tmp_path / "run.yaml")
        message = str(caught.value)
        assert message.count("the keys here are") == 1, message
        assert all(f"key '{key}': unknown key" in message for key in ("max_step", "topk", "zzz")), message


def test_a_bom_before_the_config_is_read_as_the_config(tmp_path: Path) -> None:
    """A UTF-8 byte-order mark (Notepad's) is not bad input: the file reads as without it."""
    from pytest_evomemory.configs.load import load_run_config

    (tmp_path / "run.yaml").write_bytes(b"\xef\xbb\xbf" + _GOOD_TEXT.encode())
    (tmp_path / "plain.yaml").write_text(_GOOD_TEXT, encoding="utf-8")
    with_bom, plain = load_run_config(tmp_path / "run.yaml"), load_run_config(tmp_path / "plain.yaml")
    assert with_bom.benchmark == plain.benchmark and with_bom.agent == plain.agent and with_bom.name == "faults"


# --------------------------------------------------------------------------- end to end, each door as users run it

_DOOR_CASES = ("secret_as_agent_kind", "unknown_key_in_a_list_entry", "output_dir_holds_other_files")


@pytest.mark.parametrize("name", _DOOR_CASES)
def test_the_pytest_door_prints_the_engine_s_line(
    name: str, pytester: pytest.Pytester, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    named = _named_secret(f"pytest-{name}")
    monkeypatch.setenv(KEY_VARIABLE, named)
    _repository(pytester.path, case, server.base_url, named)
    words = _words(case, named)
    result = pytester.runpytest(*_pytest_words(words), "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    line = result.stderr.str().strip()
    assert len(line.splitlines()) == 1 and line.startswith("ERROR: evomemory: "), line
    monkeypatch.chdir(pytester.path)
    assert line.removeprefix("ERROR: ") == _engine_says(words, PYTEST_FLAGS, pytester.path)
    for piece in case.expected:
        assert render(piece, "pytest") in line
    assert not any(secret in result.stdout.str() + line for secret in (SHAPED, named))
    assert "Traceback" not in result.stdout.str() + line and server.requests == []


@pytest.mark.parametrize("name", _DOOR_CASES)
def test_the_evomemory_command_prints_the_engine_s_line(
    name: str, tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console script in its own process (its environment holds the key, as a
    user's shell does)."""
    import subprocess

    case = CASES[name]
    named = _named_secret(f"command-{name}")
    _repository(tmp_path, case, server.base_url, named)
    words = _words(case, named)
    environment = {**os.environ, KEY_VARIABLE: named, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest_evomemory.cli", "run", *words],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("evomemory: error: "), line
    monkeypatch.setenv(KEY_VARIABLE, named)
    monkeypatch.chdir(tmp_path)
    assert line.replace("evomemory: error: ", "evomemory: ", 1) == _engine_says(words, CLI_FLAGS, tmp_path)
    assert not any(secret in done.stdout + done.stderr for secret in (SHAPED, named))
    assert server.requests == []


@pytest.mark.parametrize(
    ("words", "status", "expected"),
    [
        (["run", "--config", "sample_memory", "--lim", "2"], 4, "unrecognized arguments: --lim 2 (did you mean '--limit'?)"),
        (["run", "--chain", "3", "--config", "sample_memory"], 4, "(did you mean '--chains'?)"),
        (["run", "--confg", "sample_memory"], 4, "(did you mean '--config'?)"),
        (["compare", "a", "b", "--min-gain-b", "p-value"], 2, "(did you mean '--min-gain-by'?)"),
        (["power", "--gain", SHAPED], 2, "invalid float value: '(a value that looks like a secret, not shown)'"),
        (["run", "--config", "sample_memory", SHAPED], 4, "unrecognized arguments: (a value that looks like a secret"),
    ],
    ids=["abbreviated", "abbreviated_before_config", "misspelt", "another_command", "secret_refused_by_argparse",
         "secret_as_a_stray_word"],
)
def test_an_abbreviated_misspelt_or_stray_word_is_refused_naming_the_option_meant(
    words: list[str], status: int, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pytest takes no abbreviation (``--evomemory-lim`` is an error), so neither does
    ``evomemory``: ``--lim 2`` meaning --limit would be a flag only one door has. What
    argparse quotes of the command line is masked as every refusal is."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(words)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == status and expected in err and len(err.splitlines()) == 1, err
    assert SHAPED not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("pyproject.toml", '[tool.pytest.ini_options]\npythonpath = ["src"\n', "pyproject.toml: invalid TOML ("),
        ("pytest.ini", "[pytest]\nevomemory_config sample_memory\n", "pytest.ini:2: unexpected line"),
        ("tox.ini", "[pytest\n", "tox.ini:1:"),
    ],
)
def test_a_settings_file_pytest_refuses_is_refused_by_evomemory_run(
    name: str, text: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pytest stops at an ini file it cannot parse, naming it; evomemory run read past
    it, without its pythonpath and evomemory_config, and then said "no run config"."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "--config", "sample_memory"]) == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"evomemory: error: {tmp_path / name}") and expected in err, err
    assert "fix it (pytest refuses it too)" in err and len(err.splitlines()) == 1
    assert [path.name for path in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize(
    "setting",
    ["agent.model.base_url=http://127.0.0.1:9/v1?key=hunter2-plain-words",
     "agent.model.base_url=http://user:hunter2-plain-words@127.0.0.1:9/v1",
     "agent.model.base_url=http://127.0.0.1:9/v1#hunter2-plain-words"],
    ids=["query", "user_part", "fragment"],
)
@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_a_key_in_a_url_setting_is_never_quoted(
    setting: str, twice: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal of such a URL never quotes it, and neither does the "(with --set ...)"
    it adds, nor the refusal of the same setting given twice: the key in it is plain
    words, no secret's shape, known to no variable."""
    (tmp_path / "run.yaml").write_text(json.dumps(_good("http://127.0.0.1:9/v1")), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    words = ["run", "--config", "run.yaml", "--set", setting] + (["--set", setting] if twice else [])
    assert cli.main(words) == 4
    err = capsys.readouterr().err.strip()
    assert "hunter2" not in err and len(err.splitlines()) == 1, err
    assert ("set the same key" if twice else "key 'model.base_url'") in err, err
    assert "agent.model.base_url=***" in err, err


@pytest.mark.parametrize(
    ("first", "again", "expected"),
    [
        ([], ["--shard", "1/2"], "ran the whole session, and this command asks for shard 1/2 by stream"),
        (["--shard", "1/2"], ["--shard", "2/2"], "ran shard 1/2 by stream, and this command asks for shard 2/2 by stream"),
        (["--shard", "1/2"], ["--shard-by", "arm"], "ran shard 1/2 by stream, and this command asks for shard 1/2 by arm"),
    ],
    ids=["whole_then_shard", "another_shard", "another_unit"],
)
def test_a_resume_asking_for_another_share_of_the_session_is_refused(
    first: list[str], again: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A finished run resumed with --shard 1/2 was relabelled shard 1/2 in its run.json,
    keeping the other share's records: a merge would have counted them as this shard's."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "--config", "sample_memory", "--limit", "1", "--output-dir", "out", "-q", *first]) == 0
    document = (tmp_path / "out" / "run.json").read_bytes()
    capsys.readouterr()
    assert cli.main(["run", "--resume", "out", "-q", *again]) == 4
    err = capsys.readouterr().err.strip()
    assert expected in err and "a resume runs the share it recorded: leave --shard and --shard-by out" in err, err
    assert (tmp_path / "out" / "run.json").read_bytes() == document
    assert cli.main(["run", "--resume", "out", "-q", *first]) == 0  # the recorded share, given again: resumed
