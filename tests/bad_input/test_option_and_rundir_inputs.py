"""Bad input through the command line and an interrupted run's directory, found by
fuzzing the plugin as a user runs it: each is refused once, up front (exit 4, one
line naming the option, key or file and saying what to do, no model call), or, for
a damaged record of an interrupted run, resumed as if that record were torn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import ScriptedServer

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, everything_written, tiny_run_config
from .test_bad_input import SAYS_WHAT_TO_DO

_PLAIN = ("-p", "no:randomly", "-p", "no:cacheprovider")


@pytest.fixture
def server(scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> ScriptedServer:
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    return scripted_openai_server()


@pytest.fixture
def run(pytester: pytest.Pytester, server: ScriptedServer) -> Path:
    """A tiny-agent run config of two tasks whose model is the scripted server."""
    return tiny_run_config(pytester.path, server.base_url)


def _refused(pytester: pytest.Pytester, server: ScriptedServer, *args: str, expected: tuple[str, ...]) -> str:
    result = pytester.runpytest(*args, *_PLAIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    error = result.stderr.str().strip()
    assert len(error.splitlines()) == 1, error
    for piece in expected:
        assert piece in error, error
    assert SAYS_WHAT_TO_DO.search(error), f"the refusal does not say what to do: {error}"
    assert_no_internal_error(result)
    assert "collected" not in result.stdout.str()
    assert server.requests == []
    return error


# --------------------------------------------------------------------------- --evomemory-set values


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("benchmark.seed=" + "9" * 5000, "an integer of 5,000 digits"),
        ("agent.options=" + "[" * 5000 + "]" * 5000, "nested more than 100 levels deep"),
        ("agent.options={a: &x [1, 2], b: *x}", "YAML aliases are not allowed"),
        ("agent.system_prompt=2024-13-45", "a value cannot be read"),
    ],
    ids=["huge_integer", "deep_nesting", "alias", "impossible_date"],
)
def test_a_setting_is_read_by_the_same_strict_yaml_as_a_config_file(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, setting: str, expected: str
) -> None:
    error = _refused(pytester, server, f"--evomemory-config={run}", f"--evomemory-set={setting}",
                     expected=("--evomemory-set", expected))
    assert len(error) < 1000  # a 10,000-character value is cut, not quoted whole


# --------------------------------------------------------------------------- option values


@pytest.mark.parametrize(
    "option",
    ["--evomemory-output-dir=", "--evomemory-stream=", "--evomemory-set=", "--evomemory-min-accuracy= ",
     "--evomemory-compare=", "--evomemory-resume="],
)
def test_an_empty_option_value_is_refused_not_ignored(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, option: str
) -> None:
    """``--evomemory-output-dir=$OUT`` with OUT unset must not write elsewhere."""
    name = option.split("=")[0]
    _refused(pytester, server, f"--evomemory-config={run}", option, expected=(f"{name} is given an empty value", "give one"))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["=0.9"], "no stream name before '='; write STREAM=FRACTION"),
        (["0.9", "0.1"], "a threshold for the overall accuracy is given twice"),
        (["mine=0.9", "mine=0.1"], "a threshold for mine is given twice"),
    ],
    ids=["empty_stream", "overall_twice", "stream_twice"],
)
def test_a_min_accuracy_gate_that_would_silently_change_is_refused(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, values: list[str], expected: str
) -> None:
    options = [f"--evomemory-min-accuracy={value}" for value in values]
    _refused(pytester, server, f"--evomemory-config={run}", *options, expected=("--evomemory-min-accuracy", expected))


def test_an_output_dir_with_a_control_character(pytester: pytest.Pytester, server: ScriptedServer, run: Path) -> None:
    _refused(pytester, server, f"--evomemory-config={run}", "--evomemory-output-dir=out\x1b[2Jdir",
             expected=("contains a control character", "give a plain directory path"))


def test_a_progress_interval_that_is_no_duration(pytester: pytest.Pytester, server: ScriptedServer, run: Path) -> None:
    """Every value refused: tests/runtime/test_driver_decisions.py; here, that pytest refuses it."""
    pytester.makeini("[pytest]\nevomemory_progress_interval = -5\n")
    _refused(pytester, server, f"--evomemory-config={run}",
             expected=("evomemory_progress_interval must be a number of seconds (0 or more)", "write e.g."))


def test_a_password_in_the_base_url_is_refused_and_never_quoted(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    run = tiny_run_config(pytester.path, "https://user:hunter2-secret@api.example.com/v1")
    error = _refused(pytester, server, f"--evomemory-config={run}",
                     expected=("key 'model.base_url': the URL holds a user name or password", "api_key_env"))
    assert "hunter2" not in error


def test_a_factory_module_that_exits_on_import(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(quitting_memory="import sys\nsys.exit('no memory today')\n")
    monkeypatch.syspath_prepend(str(pytester.path))
    run.write_text(run.read_text().replace("memory: {backend: inprocess}", "memory: {backend: 'quitting_memory:build'}"))
    _refused(pytester, server, f"--evomemory-config={run}",
             expected=("memory factory 'quitting_memory:build'", "raised SystemExit: no memory today", "fix the module"))


# --------------------------------------------------------------------------- an interrupted run's directory


def _interrupted_run(pytester: pytest.Pytester, run: Path) -> Path:
    result = pytester.runpytest(f"--evomemory-config={run}", *_PLAIN)
    assert result.ret == 0, result.stdout.str()
    return pytester.path / "results"


def _rewrite(path: Path, change: dict[str, object], where: int) -> None:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    records[where].update(change)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


@pytest.mark.parametrize(
    "change", [{"task_id": ["t1"]}, {"task_id": None}, {"stream": {"a": 1}}], ids=["id_list", "id_null", "stream_object"]
)
def test_a_damaged_score_record_reruns_its_task(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, change: dict[str, object]
) -> None:
    results = _interrupted_run(pytester, run)
    _rewrite(results / "scores.jsonl", change, where=1)
    before = len(server.requests)
    result = pytester.runpytest("--evomemory-resume=results", *_PLAIN)
    assert_no_internal_error(result)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*1 passed, 1 deselected*"])
    assert len(server.requests) > before  # the damaged task ran again; the intact one did not
    scores = [json.loads(line) for line in (results / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [score["task_id"] for score in scores] == ["t0", "t1"]


def test_a_damaged_failure_event_is_ignored(pytester: pytest.Pytester, server: ScriptedServer, run: Path) -> None:
    results = _interrupted_run(pytester, run)
    with (results / "events.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"failure": "not an object"}) + "\n" + json.dumps({"skipped": [1]}) + "\n")
    result = pytester.runpytest("--evomemory-resume=results", *_PLAIN)
    assert_no_internal_error(result)
    # both tasks were complete: nothing ran, and the exit is the finished run's verdict, not pytest's 5
    result.stdout.fnmatch_lines(["*2 deselected*"])
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("scores_is_a_directory", "scores.jsonl is a directory, not a file"),
        ("newer_schema", "has schema version 99, which this pytest-evomemory (schema 2) cannot continue; upgrade"),
        ("schema_not_a_number", "has schema version 'one'"),
        ("overrides_not_a_list", "key 'run.overrides' is not a list of KEY=VALUE strings"),
    ],
)
def test_a_damaged_run_directory_is_refused_before_any_model_call(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, damage: str, expected: str
) -> None:
    results = _interrupted_run(pytester, run)
    (results / "scores.jsonl").write_text("", encoding="utf-8")  # nothing done: a resume would run both tasks
    server.requests.clear()
    document = json.loads((results / "run.json").read_text(encoding="utf-8"))
    if damage == "scores_is_a_directory":
        (results / "scores.jsonl").unlink()
        (results / "scores.jsonl").mkdir()
    elif damage == "newer_schema":
        document["schema_version"] = 99
    elif damage == "schema_not_a_number":
        document["schema_version"] = "one"
    else:
        document["run"]["overrides"] = "benchmark.limit=1"
    if damage != "scores_is_a_directory":
        (results / "run.json").write_text(json.dumps(document), encoding="utf-8")
    _refused(pytester, server, "--evomemory-resume=results", expected=(expected,))


# --------------------------------------------------------------------------- upstream data


def test_a_data_dir_that_is_a_file_is_one_line_for_every_stream(
    pytester: pytest.Pytester, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVOMEMORY_DATA_DIR", raising=False)
    (pytester.path / "not-a-dir").write_text("x", encoding="utf-8")
    run = pytester.path / "run.yaml"
    run.write_text("benchmark: {benchmark: evomemory_single_turn, data_dir: not-a-dir}\nagent: {}\n", encoding="utf-8")
    error = _refused(pytester, server, f"--evomemory-config={run}", expected=(
        "run.yaml (inline 'benchmark'): all 4 evomemory_single_turn streams are required",
        "streams 'aime_2024', 'gpqa_diamond', 'mmlu_pro', 'toolbench': cannot create the data directory",
        "set EVOMEMORY_DATA_DIR or 'data_dir'",
    ))
    assert error.count("cannot create") == 1


# --------------------------------------------------------------------------- the response cache


@pytest.mark.parametrize(
    "damage",
    ["{truncated", "[]", '{"format": 99}', "DEEP", "CONTENT_NOT_TEXT", "TOOL_CALLS_NOT_A_LIST", ""],
)
def test_a_damaged_response_cache_entry_is_a_miss(
    pytester: pytest.Pytester, server: ScriptedServer, isolated_cache: Path, damage: str
) -> None:
    run = tiny_run_config(pytester.path, server.base_url, model={"cache": True})
    first = pytester.runpytest(f"--evomemory-config={run}", *_PLAIN)
    assert first.ret == 0, first.stdout.str()
    entries = sorted(isolated_cache.rglob("*.json"))
    assert entries
    for entry in entries:
        document = json.loads(entry.read_text(encoding="utf-8"))
        if damage == "DEEP":
            text = '{"format": ' + json.dumps(document["format"]) + ', "content": ' + "[" * 100_000 + "]" * 100_000 + "}"
        elif damage == "CONTENT_NOT_TEXT":
            text = json.dumps({**document, "content": {"answer": 4}})
        elif damage == "TOOL_CALLS_NOT_A_LIST":
            text = json.dumps({**document, "tool_calls": 7})
        else:
            text = damage
        entry.write_text(text, encoding="utf-8")
    before = len(server.requests)
    second = pytester.runpytest(f"--evomemory-config={run}", "--evomemory-output-dir=again", *_PLAIN)
    assert_no_internal_error(second)
    assert second.ret == 0, second.stdout.str()
    assert len(server.requests) - before == before  # every call was made again, none replayed from damage


@pytest.mark.parametrize("option", ["--evomemory-limit", "--evomemory-max-errors"])
@pytest.mark.parametrize("value", ["abc", "-1", "0", "2.5", "9" * 5000, "٣"])
def test_a_count_option_that_is_no_count_is_one_line(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, option: str, value: str
) -> None:
    bound = "at most 100,000,000" if value.isascii() and value.isdigit() and int(value[:12]) > 1 else "at least 1"
    error = _refused(pytester, server, f"--evomemory-config={run}", f"{option}={value}",
                     expected=(f"{option} must be {bound} (a whole number of", f"write e.g. {option}=5"))
    assert len(error) < 300


def test_a_count_option_still_counts(pytester: pytest.Pytester, server: ScriptedServer, run: Path) -> None:
    result = pytester.runpytest(f"--evomemory-config={run}", "--evomemory-limit= 1", "--evomemory-max-errors=3", *_PLAIN)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*1 passed*"])


def test_a_config_with_thousands_of_unknown_keys_is_one_short_line(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path
) -> None:
    """Every problem used to be listed: 30,000 unknown keys made a 2 MB line (and
    took minutes to format)."""
    with run.open("a", encoding="utf-8") as handle:
        handle.write("".join(f"k{i}: {i}\n" for i in range(30_000)))
    error = _refused(pytester, server, f"--evomemory-config={run}",
                     expected=("key 'k0': unknown key", "and 29,990 more problem(s): fix these first"))
    assert len(error) < 2000


# --------------------------------------------------------------------------- a secret where its variable's name belongs


_PASTED_KEYS = ["sk-proj-AbCdEf0123456789AbCdEf0123456789", "sk_live_AbCdEf0123456789AbCdEf0123456789",
                "AbCdEf0123456789AbCdEf0123456789xyzQ"]


@pytest.mark.parametrize("key", _PASTED_KEYS)
@pytest.mark.parametrize("where", ["config", "setting"])
def test_a_key_pasted_as_the_variable_name_is_refused_and_never_printed(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, key: str, where: str
) -> None:
    if where == "config":
        run.write_text(run.read_text().replace(f'api_key_env: "{KEY_VARIABLE}"', f'api_key_env: "{key}"'), encoding="utf-8")
        assert key in run.read_text()
        args = [f"--evomemory-config={run}"]
    else:
        args = [f"--evomemory-config={run}", f"--evomemory-set=agent.model.api_key_env={key}"]
    _refused(pytester, server, *args, expected=(
        "key 'model.api_key_env': holds what looks like the secret itself", "export the secret in a variable"))
    result = pytester.runpytest(*args, *_PLAIN)
    written = everything_written(pytester, result)
    leaks = [name for name, text in written.items() if key in text and not name.endswith("run.yaml")]
    assert leaks == []


def test_a_postgres_password_pasted_as_the_variable_name(pytester: pytest.Pytester, server: ScriptedServer, run: Path) -> None:
    error = _refused(pytester, server, f"--evomemory-config={run}", "--evomemory-set=memory.backend=postgres",
                     "--evomemory-set=memory.postgres.password_env=Hunter2Hunter2Hunter2Hunter2Hunter2x9",
                     expected=("key 'postgres.password_env': holds what looks like the secret itself", "PGPASSWORD"))
    assert "Hunter2" not in error


# --------------------------------------------------------------------------- user factories


@pytest.mark.parametrize(
    ("key", "source", "expected"),
    [
        ("agent", "def build(config):\n    return None\n", "cannot take (agent_config, memory)"),
        ("agent", "def build(*, config, memory):\n    return None\n", "accept 2 positional argument(s): agent_config, memory"),
        ("memory", "def build(config, context, extra):\n    return None\n", "accept 2 positional argument(s): memory_config, context"),
        ("memory", "class build:\n    def __init__(self):\n        pass\n", "cannot take (memory_config, context)"),
    ],
    ids=["agent_one_argument", "agent_keyword_only", "memory_three_arguments", "memory_class_without_arguments"],
)
def test_a_factory_with_the_wrong_signature_is_refused_before_any_task(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, monkeypatch: pytest.MonkeyPatch,
    key: str, source: str, expected: str,
) -> None:
    pytester.makepyfile(user_factory=source)
    monkeypatch.syspath_prepend(str(pytester.path))
    text = run.read_text(encoding="utf-8")
    if key == "agent":
        text = text.replace("  kind: tiny\n", "  kind: 'user_factory:build'\n")
    else:
        text = text.replace("memory: {backend: inprocess}", "memory: {backend: 'user_factory:build'}")
    run.write_text(text, encoding="utf-8")
    _refused(pytester, server, f"--evomemory-config={run}",
             expected=(f"key '{'kind' if key == 'agent' else 'backend'}'", "factory 'user_factory:build': its signature", expected))


@pytest.mark.parametrize("where", ["option", "config"])
def test_an_output_dir_name_too_long_for_the_file_system(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, where: str
) -> None:
    name = "x" * 300
    if where == "option":
        args = [f"--evomemory-config={run}", f"--evomemory-output-dir=out/{name}"]
    else:
        run.write_text(run.read_text().replace("output_dir: results", f"output_dir: out/{name}"), encoding="utf-8")
        args = [f"--evomemory-config={run}"]
    error = _refused(pytester, server, *args,
                     expected=("a name in it is 300 bytes long, over the file system's limit of 255", "give a shorter directory"))
    assert len(error) < 400


@pytest.mark.parametrize("option", ["--evomemory-compare", "--evomemory-resume"])
def test_a_path_option_too_long_for_the_file_system(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path, option: str
) -> None:
    _refused(pytester, server, f"--evomemory-config={run}", f"{option}={'y' * 300}",
             expected=("File name too long", "check the paths given in the options") if option.endswith("compare")
             else ("over the file system's limit of 255",))


# --------------------------------------------------------------------------- options nobody reads


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (("agent.options={temperature: 0.2}",), ("key 'options'", "agent.options ['temperature']", "'tiny'")),
        (
            ("agent.memory_strategy=tool_use", "memory.options={decay: 0.5}"),
            ("key 'options'", "memory.options ['decay']", "'inprocess' reads none"),
        ),
    ],
    ids=["agent", "memory"],
)
def test_options_the_built_in_agent_or_memory_would_ignore_are_refused(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path,
    settings: tuple[str, ...], expected: tuple[str, ...], workers: tuple[str, ...],
) -> None:
    """A temperature under agent.options of ``kind: tiny`` was silently ignored: the
    user believed it shaped what was measured."""
    _refused(pytester, server, f"--evomemory-config={run}", *workers,
             *(f"--evomemory-set={setting}" for setting in settings), expected=expected)


def test_options_are_left_to_a_conftest_factory_that_reads_them(
    pytester: pytest.Pytester, server: ScriptedServer, run: Path
) -> None:
    """A user's own factory fixture may read any option of a built-in kind."""
    pytester.makeconftest("""
        import pytest
        from pytest_evomemory.agents import build_agent

        SEEN = []

        @pytest.fixture(scope="session")
        def evomemory_agent_factory():
            def create(config, memory):
                SEEN.append(config.options)
                return build_agent(config, memory)  # the built-in agent, wrapped by the user's factory
            return create

        def pytest_sessionfinish(session):
            assert SEEN and SEEN[0] == {"temperature": 0.2}, SEEN
    """)
    result = pytester.runpytest(f"--evomemory-config={run}", "--evomemory-set=agent.options={temperature: 0.2}", *_PLAIN)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*2 passed*"])
    assert_no_internal_error(result)


def test_run_benchmark_refuses_options_its_built_in_agent_would_ignore(tmp_path: Path) -> None:
    from pytest_evomemory import run_benchmark
    from pytest_evomemory.configs.load import load_run_config
    from pytest_evomemory.core.errors import ConfigError

    config_file = tmp_path / "run.yaml"
    config_file.write_text("name: core\nbenchmark: {benchmark: sample, limit: 1}\nagent: {options: {top_p: 0.9}}\n")
    with pytest.raises(ConfigError, match=r"key 'options': agent.options \['top_p'\].*'recall_baseline'"):
        run_benchmark(load_run_config(config_file), tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before the run directory was made
