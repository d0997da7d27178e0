"""Every command and config snippet in the README and docs runs as written.

A fenced block is preceded by a marker comment saying what it is:

* ``<!-- doc-snippet: run -->``: a shell block this test runs (bash, ``-eu``) in a
  fresh directory, with this checkout's package and the test environment's
  ``pytest``/``evomemory`` first on the path; every marked block of a page runs in
  one directory, in page order, so a page can build on its earlier blocks;
* ``<!-- doc-snippet: file PATH -->``: written to ``PATH`` there before the next run;
* ``<!-- doc-snippet: network -->``, ``slow``, ``manual``: not run here (a model
  endpoint, minutes of build, or a change to the machine), but named.

On the pages listed in ``STRICT`` every shell block must carry a marker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.config import MemoryConfig

from ..conftest import FOREIGN_PLUGINS_OFF, REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
#: Every page but scale.md, whose CI and Slurm recipes carry their own marker (``<!-- recipe: ... -->``,
#: run by tests/plugin/test_shards_plugin.py)
STRICT = {page for page in PAGES if page.name != "scale.md"}
KINDS = {"run", "file", "network", "slow", "manual"}
# A fence may be indented (a block inside a list item); it closes at the same indentation.
_BLOCK = re.compile(
    r"(?:<!-- doc-snippet: (?P<kind>\w+)(?P<arg>[^>]*?)-->\n)?^(?P<indent>[ ]*)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```",
    re.S | re.M,
)
_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    kind: str | None
    arg: str
    lang: str
    body: str


def snippets(page: Path) -> list[Snippet]:
    text = page.read_text(encoding="utf-8")
    return [
        Snippet(page, text.count("\n", 0, m.start()) + 1, m.group("kind"), (m.group("arg") or "").strip(),
                m.group("lang"), textwrap.dedent(m.group("body")))
        for m in _BLOCK.finditer(text)
    ]


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@pytest.mark.parametrize("page", sorted(STRICT), ids=_name)
def test_every_shell_block_says_whether_it_runs(page: Path) -> None:
    blocks = snippets(page)
    unmarked = [f"{_name(page)}:{s.line}" for s in blocks if s.lang in ("bash", "sh", "console") and s.kind is None]
    assert not unmarked, f"shell blocks without a doc-snippet marker: {unmarked}"
    assert all(s.kind in KINDS for s in blocks if s.kind), [s.kind for s in blocks]


RUNNABLE = [page for page in PAGES if any(s.kind == "run" for s in snippets(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_runnable_snippets_run_as_written(page: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "PYTEST_ADDOPTS": f"-p no:randomly -p no:cacheprovider {FOREIGN_PLUGINS_OFF}",
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    for snippet in snippets(page):
        where = f"{_name(page)}:{snippet.line}"
        if snippet.kind == "file":
            target = tmp_path / snippet.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(snippet.body, encoding="utf-8")
        elif snippet.kind == "run":
            done = subprocess.run(
                ["bash", "-euc", snippet.body], cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=300, check=False,
            )
            assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_point_at_files_in_the_repository(page: Path) -> None:
    missing = [
        link for link in _LINK.findall(page.read_text(encoding="utf-8"))
        if not (page.parent / link.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{_name(page)} links to files that do not exist: {missing}"


# --------------------------------------------------------------------------- names the pages use
#
# A newcomer has only the README and docs/: every option, subcommand, built-in config,
# config key and path they name must exist. Each check reads the code's own list
# (the plugin's addoption calls, the CLI's argparse parser, the shipped configs, the
# pydantic config models), so a renamed option fails here, not in a user's shell.

_TEXTS = {page: page.read_text(encoding="utf-8") for page in PAGES}
_PLUGIN_SOURCE = (REPO / "pytest_evomemory" / "plugin" / "__init__.py").read_text(encoding="utf-8")


def _mentions(pattern: str) -> list[tuple[str, str]]:
    """(page:line, match) for every match of ``pattern`` on every page."""
    found = []
    for page, text in _TEXTS.items():
        for match in re.finditer(pattern, text, re.M):
            found.append((f"{_name(page)}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1)))
    return found


def test_every_pytest_option_the_pages_name_exists() -> None:
    from pytest_evomemory.options import OPTIONS, PYTEST_FLAGS

    options = {PYTEST_FLAGS(option.name) for option in OPTIONS}
    options |= set(re.findall(r'addoption\(\s*"(--evomemory[\w-]*)"', _PLUGIN_SOURCE))  # pytest-only switches
    ini = set(re.findall(r'addini\(\s*"(\w+)"', _PLUGIN_SOURCE))
    assert "--evomemory-config" in options and "evomemory_config" in ini
    unknown = [f"{where}: {name}" for where, name in _mentions(r"(--evomemory(?:-[a-z]+)*)") if name not in options]
    unknown += [f"{where}: {name}" for where, name in _mentions(r"\b(evomemory_[a-z_]+)\s*=") if name not in ini]
    assert not unknown, f"options the pages name that the plugin does not have: {unknown}"


def _cli_commands() -> dict[str, set[str]]:
    """Each ``evomemory`` subcommand and its option strings, from the real parser."""
    import argparse

    from pytest_evomemory.cli import build_parser

    parser = build_parser()
    sub = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    commands: dict[str, set[str]] = {}
    for name, command in sub.choices.items():
        options = set(command._option_string_actions)
        for action in command._actions:  # `evomemory data fetch ...`: nested actions
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    options |= set(child._option_string_actions)
        commands[name] = options
    return commands


def test_every_evomemory_command_the_pages_name_exists() -> None:
    commands = _cli_commands()
    unknown = []
    # `evomemory compare DIR ...` in prose, code and shell; not a progress line
    # ("evomemory sample_facts: 7/12") or a heading ("evomemory: my_run").
    for where, line in _mentions(r"(?:^|[`$(]\s*)evomemory ([a-z][\w-]*(?![\w:])[^`|#\n]*)"):
        command, _, rest = line.partition(" ")
        if command not in commands:
            unknown.append(f"{where}: evomemory {command}")
            continue
        unknown += [
            f"{where}: evomemory {command} {option}"
            for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", rest)
            if option not in commands[command] and not option.startswith("--evomemory")
        ]
    assert not unknown, f"commands or options the pages name that `evomemory` does not have: {unknown}"


def test_every_builtin_config_the_pages_name_exists() -> None:
    from pytest_evomemory.configs import builtin_names

    names = set(builtin_names())
    named = _mentions(r"(?:--evomemory-config[= ]|--config[= ]|EVOMEMORY_DEMO_CONFIG=)(?:builtin:)?([\w/]+)(?![\w./])")
    # an upper-case word is a placeholder (PATH, NAME, RUN_CONFIG)
    unknown = [f"{where}: {name}" for where, name in named if name not in names and not name.isupper()]
    assert not unknown, f"built-in configs the pages name that do not ship: {unknown}"
    listing = _TEXTS[REPO / "docs" / "configuration.md"]
    unlisted = [name for name in sorted(names) if f"`{name}`" not in listing]
    assert not unlisted, f"docs/configuration.md does not list the built-in configs {unlisted}"


#: Files the pages tell the user to write themselves (not shipped, not in this repository):
#: those a ``file`` snippet writes, and the ones prose only names.
USER_FILES = {"my_run.yaml", "notebook.yaml"} | {
    Path(snippet.arg).name for page in PAGES for snippet in snippets(page) if snippet.kind == "file"
}


def test_every_path_the_pages_name_exists() -> None:
    shipped = REPO / "pytest_evomemory" / "configs"
    missing = []
    for where, path in _mentions(r"(?<![\w/.-])((?:\.\./|configs/)(?:runs|agents|benchmarks|memory)/[\w/-]+\.yaml)"):
        relative = path.removeprefix("../").removeprefix("configs/")
        if Path(path).name not in USER_FILES and not (shipped / relative).is_file():
            missing.append(f"{where}: {path}")
    for where, path in _mentions(
        r"(?<![\w/.-])((?:tests|benchmarks|scripts|\.ci|pytest_evomemory)/[\w/.-]*[\w])(?![\w/*-])"
    ):
        if Path(path).name not in USER_FILES and "<" not in path and not (REPO / path).exists():
            missing.append(f"{where}: {path}")
    assert not missing, f"paths the pages name that do not exist: {missing}"


def _memory_sections() -> dict[str, type[Any]]:
    """Each registered backend's own section (``sqlite: {...}``) and its settings model."""
    from pytest_evomemory.memory.factory import MEMORY_BACKENDS

    sections = {}
    for name in MEMORY_BACKENDS.names():
        options = MEMORY_BACKENDS.get(name).options
        if options is not None:
            sections[options.SECTION] = options
    return sections


def _model_keys_problems(model: type[Any], data: Any, prefix: str) -> list[str]:
    """Keys in ``data`` that ``model`` (a pydantic config model) does not have, recursively."""
    import typing

    from pydantic import BaseModel

    if not isinstance(data, dict):
        return []
    problems = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None and model is MemoryConfig and key in _memory_sections():
            problems += _model_keys_problems(_memory_sections()[key], value, f"{prefix}{key}.")
            continue
        if field is None:
            problems.append(f"{prefix}{key}")
            continue
        nested = [arg for arg in (field.annotation, *typing.get_args(field.annotation))
                  if isinstance(arg, type) and issubclass(arg, BaseModel)]
        if nested:
            problems += _model_keys_problems(nested[0], value, f"{prefix}{key}.")
    return problems


def _config_model_for(keys: set[str]) -> tuple[type[Any], str] | None:
    from pytest_evomemory.config import AgentConfig, BenchmarkConfig, MemoryConfig
    from pytest_evomemory.configs.load import _RunFile

    if ({"agent", "memory"} & keys and "benchmark" in keys) or "name" in keys:
        return _RunFile, "run"
    if {"kind", "memory_strategy", "model", "protocol"} & keys:
        return AgentConfig, "agent"
    if {"backend", "top_k", "embedder"} & keys:
        return MemoryConfig, "memory"
    if {"benchmark", "streams", "limit", "files"} & keys:
        return BenchmarkConfig, "benchmark"
    return None


def test_every_config_key_the_pages_name_exists() -> None:
    import yaml

    from pytest_evomemory.config import AgentConfig, BenchmarkConfig, MemoryConfig
    from pytest_evomemory.configs.load import _RunFile

    parts = {"agent": AgentConfig, "memory": MemoryConfig, "benchmark": BenchmarkConfig}
    problems = []
    for page in PAGES:
        for snippet in snippets(page):
            if snippet.lang != "yaml":
                continue
            data = yaml.safe_load(snippet.body)
            found = _config_model_for(set(data)) if isinstance(data, dict) else None
            if found is None:
                problems.append(f"{_name(page)}:{snippet.line}: a yaml block that is no config")
                continue
            model, _ = found
            where = f"{_name(page)}:{snippet.line}"
            problems += [f"{where}: {key}" for key in _model_keys_problems(model, data, "")]
            if model is _RunFile:
                for part, part_model in parts.items():
                    problems += [f"{where}: {key}" for key in _model_keys_problems(part_model, data.get(part), f"{part}.")]
    # --evomemory-set KEY=VALUE and `evomemory run --set KEY=VALUE`: a dotted path from the run file
    for where, key in _mentions(r"(?:--evomemory-set[= ]|--set[= ])([a-z_][\w.]*)="):
        part, _, rest = key.partition(".")
        if part in parts and rest:
            data: Any = None
            for name in reversed(rest.split(".")):
                data = {name: data}
            problems += [f"{where}: {part}.{bad}" for bad in _model_keys_problems(parts[part], data, "")]
        elif part not in _RunFile.model_fields:
            problems.append(f"{where}: {key}")
    assert not problems, f"config keys the pages name that the config models do not have: {problems}"


def test_a_part_swapped_on_the_command_line_is_named_from_the_working_directory() -> None:
    """A path given on the command line is relative to the working directory
    (docs/configuration.md, "Relative paths"), the repository root where the pages run
    pytest: the README swapped the agent with ``--evomemory-set
    agent=../agents/tiny_openai_exprag.yaml``, a path from the run config's directory,
    which the run refused as a file beside the repository."""
    shipped = REPO / "pytest_evomemory" / "configs"
    wrong = []
    for where, setting in _mentions(r"(?:--evomemory-set[= ]|--set[= ])((?:agent|memory|benchmark)=[^\s`'\"]+)"):
        value = setting.partition("=")[2]
        if "/" not in value and not value.endswith((".yaml", ".yml")):
            continue  # a built-in part's name (memory=mem0)
        if not value.startswith("configs/") or not (
            (shipped / value.removeprefix("configs/")).is_file() or Path(value).name in USER_FILES
        ):
            wrong.append(f"{where}: {setting}")
    assert not wrong, f"parts given on the command line that are not paths from the repository root: {wrong}"
