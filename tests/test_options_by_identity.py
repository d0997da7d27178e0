"""The engine names an option by identity; each door spells it once, where it
catches the error: ``--evomemory-output-dir`` through pytest, ``--output-dir``
through ``evomemory run``. No engine module spells a flag in a message."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from pytest_evomemory.config.settings import parse_setting
from pytest_evomemory.core.errors import ConfigError, OptionName, named
from pytest_evomemory.options import CLI_FLAGS, OPTIONS, PYTEST_FLAGS, flag, render
from pytest_evomemory.rundir import check_output_dir
from pytest_evomemory.runtime.gates import parse_min_accuracy

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_evomemory"
#: Each door's spelling of an option, for the expected texts below (``--@name``).
DOORS = {"pytest": "--evomemory-", "cli": "--"}


def test_the_identities_are_the_declared_options() -> None:
    assert sorted(get_args(OptionName)) == sorted(option.name for option in OPTIONS)


def test_each_door_spells_an_option_in_one_place() -> None:
    assert flag("output-dir", "pytest") == PYTEST_FLAGS("output-dir") == "--evomemory-output-dir"
    assert flag("output-dir", "cli") == CLI_FLAGS("output-dir") == "--output-dir"
    text = f"give another {named('output-dir')}, or pass {named('config')}; run 'pytest --evomemory-resume=DIR'"
    # only the options the engine named are spelled: text it quotes (another command) is left as it is
    assert render(text, "cli") == "give another --output-dir, or pass --config; run 'pytest --evomemory-resume=DIR'"
    assert render(text, "pytest") == (
        "give another --evomemory-output-dir, or pass --evomemory-config; run 'pytest --evomemory-resume=DIR'"
    )
    assert render("{--nonsense} and {--}", "cli") == "{--nonsense} and {--}"  # no option: not a placeholder


def test_an_error_carries_the_option_at_fault() -> None:
    with pytest.raises(ConfigError) as setting:
        parse_setting("nonsense.key=1")
    assert setting.value.option == "set"
    assert render(str(setting.value), "cli").startswith("--set 'nonsense.key=1': unknown key 'nonsense.key'")
    with pytest.raises(ConfigError) as gate:
        parse_min_accuracy(["2"], ["s"])
    assert gate.value.option == "min-accuracy"
    assert render(str(gate.value), "pytest") == (
        "--evomemory-min-accuracy '2': the fraction must be between 0 and 1; write e.g. 0.8 for 80%"
    )


def test_a_run_directory_error_names_the_output_option(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    with pytest.raises(ConfigError) as taken:
        check_output_dir(tmp_path / "taken")
    assert taken.value.option == "output-dir"
    assert str(taken.value).endswith("remove it or give another {--output-dir}")


#: One refusal of each kind, as ``(options, what the door prints)``: an option's value
#: (options.py), a setting (settings.py), a gate (runtime/gates.py), the output
#: directory (rundir), a resume naming two options (rundir/resume.py), and
#: the session's own check of two options together (runtime/session.py).
KINDS = {
    "value": (["--@limit=0"], ["--@limit must be at least 1 (a whole number of tasks per stream), got '0'; "
                               "write e.g. --@limit=5"]),
    "setting": (["--@set=nonsense.key=1"], ["--@set 'nonsense.key=1': unknown key 'nonsense.key'"]),
    "gate": (["--@min-accuracy=2"], ["--@min-accuracy '2': the fraction must be between 0 and 1"]),
    "output-dir": (["--@output-dir=taken"], ["is a file, not a directory; remove it or give another --@output-dir"]),
    "resume": (["--@resume=empty"], ["--@resume ", "empty: no readable run.json there; pass the output directory of "
                                     "the interrupted run (and, if its run config moved, pass --@config as well)"]),
    "session": (["--@shard-by=arm"], ["--@shard-by chooses what a shard's cell is; give --@shard=I/N too, "
                                      "or leave --@shard-by out"]),
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("kind", KINDS)
def test_each_door_prints_its_own_spelling(
    door: str, kind: str, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before anything runs (exit 4, one line), in this process."""
    (pytester.path / "taken").write_text("a file where the results would go", encoding="utf-8")
    (pytester.path / "empty").mkdir()
    options, says = KINDS[kind]
    words = [word.replace("--@", DOORS[door]) for word in ["--@config=sample_memory", *options]]
    if door == "pytest":
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q", *words)
        status, error = int(result.ret), result.stderr.str().strip()
    else:
        from pytest_evomemory.cli import main as evomemory

        status = evomemory(["run", "-q", *words])
        error = capsys.readouterr().err.strip()
    assert status == 4, error
    assert len(error.splitlines()) == 1, error
    for piece in says:
        assert piece.replace("--@", DOORS[door]) in error, error
    assert "{--" not in error, error  # no option left unspelled
    if door == "cli":
        assert "--evomemory-" not in error, error  # never in the plugin's words
    assert not (pytester.path / "evomemory-results").exists()


# ----------------------------------------------------------------------------- no spelling in the engine

#: The doors, which spell the options: the pytest plugin, the option declarations and
#: the ``evomemory`` commands (``cli.py``/``cli/`` and its ``*cmd.py`` modules).
DOOR_PARTS = ("plugin", "cli")


def _is_door(path: Path) -> bool:
    relative = path.relative_to(PACKAGE)
    return (
        relative.parts[0] in DOOR_PARTS or path.name in ("options.py", "cli.py") or path.stem.endswith("cmd")
    )


def _documentation(tree: ast.AST) -> set[int]:
    """Docstrings, help texts and descriptions of artefact fields: they document the
    flags for users (in pytest's spelling, the plugin being the product's first door)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        if isinstance(node, ast.keyword) and node.arg in ("help", "description"):
            found.update(id(inner) for inner in ast.walk(node.value))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "description":
                    found.update(id(inner) for inner in ast.walk(value))
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id.endswith("DESCRIPTIONS") for target in node.targets
        ):
            found.update(id(inner) for inner in ast.walk(node.value))
    return found


def _spelled(tree: ast.AST) -> list[int]:
    """The lines of the strings in ``tree`` that spell a flag, documentation aside."""
    documentation = _documentation(tree)
    return [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "--evomemory-" in node.value
        and id(node) not in documentation
    ]


def test_no_engine_module_spells_a_flag_in_a_message() -> None:
    spelled = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py")) if not _is_door(path)
        for line in _spelled(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert spelled == [], "name the option with errors.named(...) instead: " + ", ".join(spelled)


def test_the_check_sees_a_spelled_flag() -> None:
    """The check above fails on what it forbids, and passes what it allows."""
    source = (
        '"""Docs may say --evomemory-limit."""\n'
        'def f() -> None:\n    raise ValueError(f"{x}: give another --evomemory-output-dir")\n'
        'Field(description="--evomemory-shard")\n'
    )
    assert _spelled(ast.parse(source)) == [3]
