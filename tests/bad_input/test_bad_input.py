"""The bad-input corpus: every malformed config or data file is refused before any
model call, with a message naming the file and the problem, and no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"

#: corpus file -> what the error message must say (besides the file's name)
EXPECTED = {
    "missing_benchmark_key.yaml": "key 'benchmark': required key is missing",
    "unknown_top_level_key.yaml": "key 'surprise': unknown key",
    "limit_wrong_type.yaml": "key 'limit'",
    "limit_negative.yaml": "key 'limit'",
    "unknown_memory_strategy.yaml": "key 'memory_strategy'",
    "unknown_agent_kind.yaml": "unknown agent kind 'gpt9000'",
    "unknown_memory_backend.yaml": "unknown memory backend 'redis'",
    "top_k_zero.yaml": "key 'top_k'",
    "top_k_string.yaml": "key 'top_k'",
    "threshold_above_one.yaml": "key 'thresholds.overall'",
    "unknown_stream.yaml": "unknown stream(s) 'sample_trivia'",
    "duplicate_stream.yaml": "a stream is listed twice",
    "unknown_benchmark.yaml": "unknown benchmark 'evomemory_multi_turn'",
    "tiny_without_model.yaml": "key 'model': required for kind 'tiny'",
    "model_temperature_too_high.yaml": "key 'model.temperature'",
    "model_unknown_key.yaml": "key 'model.modle': unknown key (did you mean 'model'?); the keys here are: provider, model,",
    "yaml_alias_bomb.yaml": "YAML aliases are not allowed",
    "invalid_yaml.yaml": "invalid YAML at line",
    "list_instead_of_mapping.yaml": "expected a mapping",
    "not_utf8.yaml": "not UTF-8",
    "missing_referenced_file.yaml": "does not exist",
    "path_traversal_reference.yaml": "must name a .yaml/.yml file",
    "part_is_a_list.yaml": "list_agent.yaml: expected a mapping",
    "unknown_match_mode.yaml": "unknown match mode 'fuzzy'",
    "stream_file_missing.yaml": "absent.jsonl not found",
    "stream_file_not_utf8.yaml": "not_utf8.jsonl, line 1: not UTF-8",
    "stream_file_truncated.yaml": "truncated.jsonl, line 2: invalid JSON",
    "stream_file_wrong_types.yaml": "'prompt' and 'target' must be strings",
    "stream_file_unknown_key.yaml": "unknown key(s) ['answer']",
    "stream_file_duplicate_id.yaml": "duplicate task id 't1'",
    "stream_file_empty.yaml": "empty.jsonl holds no tasks",
    "stream_file_not_an_object.yaml": "array.jsonl, line 1: expected a JSON object",
    "stream_file_path_traversal.yaml": "must be a .jsonl file",
    "stream_name_with_slash.yaml": "key 'files.0.name'",
    "agent_factory_not_importable.yaml": "cannot import module 'no_such_package.agents' (No module named "
    "'no_such_package'); add its directory to pytest's pythonpath setting (a module in your repository's root: "
    "pythonpath = [\".\"] under [tool.pytest.ini_options]",
    "memory_factory_not_callable.yaml": "has no callable '__doc__'",
    "choices_not_strings.yaml": "'choices' must be a list of strings",
    "output_dir_wrong_type.yaml": "key 'output_dir'",
    # silent acceptance that would change what is measured or gated
    "duplicate_top_level_key.yaml": "duplicate key 'benchmark' at line 4 (first at line 2)",
    "duplicate_nested_key.yaml": "duplicate key 'overall' at line 5 (first at line 4)",
    "limit_bool.yaml": "key 'limit': Input should be a valid integer (true/false is not a number",
    "max_steps_bool.yaml": "key 'max_steps': Input should be a valid integer (true/false",
    "threshold_bool.yaml": "key 'thresholds.overall': Input should be a valid number (true/false",
    "limit_numeric_string.yaml": "key 'limit': Input should be a valid integer",
    "streams_empty.yaml": "key 'streams': an empty list would run nothing",
    "files_duplicate_name.yaml": "key 'files': two entries are named 'mine'",
    "threshold_unknown_stream.yaml": "key 'thresholds.streams': unknown stream(s) 'sample_trivia'",
    "threshold_unknown_file_stream.yaml": "key 'thresholds': unknown stream(s) 'mien'",
    "choice_target_outside.yaml": "task 'q1': the target 'C' is neither a letter in A-B",
    "choice_too_many_options.yaml": "27 choices, but at most 26",
    "choice_empty_target.yaml": "choice_empty_target.jsonl, line 1: task 'q1': the target is empty; give the correct option's letter",
    "stream_file_duplicate_key.yaml": "duplicate_key.jsonl, line 1: the key 'target' appears twice in one object",
    "stream_file_empty_prompt.yaml": "empty_prompt.jsonl, line 1: task 't1': the prompt is empty",
    "stream_file_empty_target.yaml": "empty_target.jsonl, line 1: task 't1': the target is empty; give the expected answer",
    "threshold_nan.yaml": "key 'thresholds.overall'",
    "model_timeout_inf.yaml": "key 'model.timeout_s'",
    "choice_mode_bad_letter.yaml": "the target 'Z' is neither a letter in A-J",
    "stream_file_nan.yaml": "nan.jsonl, line 1: NaN is not valid JSON",
    # paths that are not files; names that cannot be directories
    "stream_file_is_directory.yaml": "folder.jsonl is a directory, not a file",
    "part_is_directory.yaml": "key 'agent' names 'data/dir.yaml', but",
    "run_name_nul.yaml": "key 'name': run name 'bad\\x00name' contains a NUL character",
    "run_name_traversal.yaml": "key 'name': run name '../../escape' contains a path separator",
    "output_dir_nul.yaml": "out\\x00dir' contains a NUL character",
    # model settings known wrong before any call
    "api_key_env_empty.yaml": "key 'model.api_key_env': '' is not an environment variable name",
    "model_base_url_ftp.yaml": "key 'model.base_url': 'ftp://x/v1' is not an http",
    "model_request_limit_zero.yaml": "key 'model.max_request_bytes'",
    # names that reach a directory name, a report header and every one-line message
    "run_name_newline.yaml": "key 'name': run name 'bad\\nname' contains a control character",
    "run_name_escape_sequence.yaml": "contains a control character (a line break, tab or escape)",
    "run_name_too_long.yaml": "is 300 bytes long, over the file system's limit of 255",
    "run_name_lone_surrogate.yaml": "or an unpaired surrogate",
    # a blank name, path or URL is never meant; a password never belongs in a URL
    "model_name_empty.yaml": "key 'model.model': is empty; write a value",
    "model_cache_dir_blank.yaml": "key 'model.cache_dir': is empty; write a value",
    "output_dir_empty.yaml": "key 'output_dir': is empty; write a value",
    "stream_file_path_empty.yaml": "key 'files.0.path': is empty; write a value",
    "sqlite_path_empty.yaml": "key 'sqlite.path': is empty; write a value",
    "postgres_password_env_bad.yaml": "key 'postgres.password_env': 'my password' is not an environment variable name",
    "model_base_url_credentials.yaml": "key 'model.base_url': the URL holds a user name or password",
    "model_base_url_space.yaml": "key 'model.base_url': 'http://exa mple.com/v1' is not an http",
    "stream_file_aime_target_not_integer.yaml": "aime_nan.jsonl, line 1: task 't1': the target 'NaN' is not an integer, and an aime answer",
    "model_base_url_query.yaml": "key 'model.base_url': the URL holds a query string or fragment",
    # a value of the wrong shape says which shapes are allowed
    "part_is_a_number.yaml": "key 'benchmark': expected a valid string or a valid dictionary; name a config file",
    "options_is_a_list.yaml": "key 'options': Input should be a valid dictionary; write a mapping",
    "mmlu_categories_string.yaml": "key 'mmlu_pro_categories': expected a valid list or 'all'",
    "files_benchmark_without_files.yaml": "key 'files': benchmark 'files' needs at least one entry; add one",
    # task ids name test items and report rows: short and printable
    "stream_file_id_newline.yaml": "id_newline.jsonl, line 1: task id 't\\n1' holds a control, line-break or text-direction",
    "stream_file_id_too_long.yaml": "is 5,000 characters long (limit 200)",
    "stream_file_id_blank.yaml": "task id '   ' is blank; it names the test item",
    "stream_file_id_bidi.yaml": "id_bidi.jsonl, line 1: task id 't1\\u202egnp.exe' holds a control",
    # YAML tags build objects (or run code): never in a config
    "yaml_python_tag.yaml": "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'; YAML tags",
    "yaml_custom_tag.yaml": "the tag '!include'; YAML tags (!!python/..., !name) are not allowed in a config file; write a plain value",
    "config_is_a_number.yaml": "expected a mapping of keys to values, got a number; write 'key: value' lines",
    "yaml_key_read_as_bool.yaml": "key 'thresholds.streams': the key True is not text (YAML reads yes/no/on/off as true/false",
    "files_under_another_benchmark.yaml": "key 'files' is read only by benchmark files, not by 'sample'; remove it",
    "data_dir_under_files_benchmark.yaml": "key 'data_dir' is read only by benchmark evomemory_single_turn or locomo, not by 'files'",
    "model_max_tokens_huge.yaml": "key 'model.max_tokens': Input should be less than or equal to 10000000; write a value within",
    "model_seed_huge.yaml": "key 'model.seed': Input should be less than 9223372036854775808",
    # YAML 1.1 integer forms that silently mean another number
    "yaml_octal_limit.yaml": "the number '010' at line 1 is not plain decimal",
    "yaml_base60_integer.yaml": "the number '1:30' at line 3 is not plain decimal, and YAML would read it as octal",
    "part_is_empty.yaml": "empty_part.yaml: the file is empty; write the benchmark config in it, or write {} to use every default",
    "stream_name_dotdot.yaml": "key 'files.0.name': String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]*$'",
    "stream_file_task_match_mode.yaml": "stream 'mine' uses unknown match mode 'fuzzy' (task 't1' sets it); known modes: aime",
    "config_utf16.yaml": "config_utf16.yaml: this is UTF-16 text, not UTF-8; save the file as UTF-8",
    "stream_file_utf16.yaml": "utf16.jsonl, line 1: this is UTF-16 text, not UTF-8; save the file as UTF-8",
    "sqlite_path_one_file_for_all_streams.yaml": "key 'sqlite.path': 'one.db' must contain '{stream}'",
    "sqlite_path_unknown_placeholder.yaml": "only {stream} and {run_name} may be used ('user'); remove the others",
    "stream_file_pretty_json.yaml": "pretty.json, line 1: this is a pretty-printed JSON document, not JSON lines; write one object per line (e.g. jq -c",
    "stream_file_array_of_objects.yaml": "array_of_objects.jsonl, line 1: this line is a JSON array of objects; write one object per line",
    "env_variable_not_expanded.yaml": "'${EVOMEMORY_MODEL}' at line 4: config files do not expand environment variables",
    # hints: say what to do
    "yaml_tab_indent.yaml": "indent with spaces, not tabs",
    # issue 23: a run name that is an artefact's name; a non-finite time limit
    "run_name_comparison_file.yaml": "key 'name': run name 'compare.json' is the name of a file the output root holds",
    "memory_open_timeout_nan.yaml": "key 'open_timeout_s': Input should be a finite number",
}


def test_every_corpus_file_has_an_expectation() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.yaml")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 60


#: A refusal says what to do: an instruction after the problem ("...; write ...").
SAYS_WHAT_TO_DO = re.compile(
    r"(; |, so |\(|: )(write|use|give|add|remove|check|fix|save|shorten|name|quote|export|point|decompress|"
    r"convert|extract|keep|drop|indent|flatten|simplify|pass|rename|see|list|put|raise|set|upgrade|change|unset|"
    r"the keys here are|is it installed)",
    re.IGNORECASE,
)


def _assert_refused(pytester: pytest.Pytester, config: Path, expected: str) -> None:
    result = pytester.runpytest(f"--evomemory-config={config}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    error = result.stderr.str()
    assert expected in error
    assert SAYS_WHAT_TO_DO.search(error), f"the refusal does not say what to do: {error}"
    assert len(error.strip().splitlines()) == 1, error  # one line, naming file and key
    assert "INTERNALERROR" not in error + result.stdout.str()
    assert config.name in error or config.parent.name in error or "data" in error
    assert "Traceback" not in error and "Traceback" not in result.stdout.str()
    assert "collected" not in result.stdout.str()  # refused before collection: no task, no model call
    assert not (pytester.path / "evomemory-results").exists()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_is_refused_before_any_task(pytester: pytest.Pytester, name: str) -> None:
    _assert_refused(pytester, CORPUS / name, EXPECTED[name])


def test_huge_config_is_refused_without_parsing(pytester: pytest.Pytester) -> None:
    config = pytester.path / "huge.yaml"
    config.write_text("benchmark: {benchmark: sample}\nagent: {}\nname: " + "x" * 2_000_000 + "\n", encoding="utf-8")
    _assert_refused(pytester, config, "too large for a config file")


def test_config_that_is_a_directory(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "folder.yaml"
    folder.mkdir()
    _assert_refused(pytester, folder, "is a directory")
