"""What a researcher new to the package trips over when following README.md and
docs/*.md literally (the held-out new-user trial): the README's option list, the
JSON report's documented `gains` keys, and every door's help for the gain gate
agree with what the product does. Pure text checks, milliseconds."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from pytest_evomemory.cli import build_parser
from pytest_evomemory.options import GAIN_FIGURE, OPTIONS, PYTEST_FLAGS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
ARTEFACTS = (REPO / "docs" / "artefacts.md").read_text(encoding="utf-8")
SCHEMA = json.loads((REPO / "pytest_evomemory" / "schema" / "artefacts.schema.json").read_text(encoding="utf-8"))


def test_the_readme_option_list_names_every_plugin_option() -> None:
    listed = re.search(r"^Options: (.*?)see\s", README, re.S | re.M)
    assert listed, "README.md has no 'Options:' paragraph"
    flags = [PYTEST_FLAGS(option.name) for option in OPTIONS if "pytest" in option.entries]
    missing = [flag for flag in flags if not re.search(rf"`{flag}[ `]", listed.group(1))]
    assert not missing, f"README.md's 'Options:' paragraph leaves out {missing}"


def test_the_json_report_example_shows_every_key_of_a_gain() -> None:
    example = re.search(r'"gains": \[\{(.*?)\}\]', ARTEFACTS, re.S)
    assert example, "docs/artefacts.md shows no gains entry"
    shown = set(re.findall(r'"(\w+)":', example.group(1)))
    definitions = SCHEMA.get("$defs") or SCHEMA["definitions"]
    assert shown == set(definitions["gain"]["properties"]), "the documented gain keys differ from the schema's"


def test_every_door_says_a_locomo_gain_is_judged_on_mean_f1() -> None:
    """The gain gate reads the figure a stream is judged on (LoCoMo: mean F1): the pytest
    option's help and evomemory run|compare|merge --min-gain say so alike."""
    assert "mean F1" in GAIN_FIGURE
    gain = next(option for option in OPTIONS if option.name == "min-gain")
    assert GAIN_FIGURE in gain.help
    parser = build_parser()
    commands = next(action for action in parser._actions if action.dest == "command").choices
    for name in ("run", "compare", "merge"):
        flag = next(action for action in commands[name]._actions if "--min-gain" in action.option_strings)
        assert GAIN_FIGURE in " ".join(str(flag.help).split()), name


def test_no_page_calls_a_built_in_memory_library_not_built_in() -> None:
    """docs/memory.md makes Mem0 and LangMem built-in backends; the pages listing the
    paper's methods that are *not* built in must not send a user to write an adapter
    for them."""
    from pytest_evomemory.memory.factory import MEMORY_BACKENDS

    libraries = {"mem0": "Mem0", "langmem": "LangMem"}
    assert set(libraries) <= set(MEMORY_BACKENDS.names())
    for page, marker in (("reference-agents.md", "they are not built in"), ("paper.md", "plug them in as memory")):
        text = (REPO / "docs" / page).read_text(encoding="utf-8")
        listed = re.search(rf"([^.]*){re.escape(marker)}", text)
        assert listed, f"docs/{page} lost its list of methods that are not built in"
        named = [name for name in libraries.values() if re.search(rf"\b{name}\b", listed.group(1))]
        assert not named, f"docs/{page} lists the built-in backends {named} among the methods not built in"


def test_the_quoted_cost_cap_refusal_of_a_memory_library_is_the_engines() -> None:
    """docs/memory.md quotes the refusal of --evomemory-max-cost over an unpriced library
    model; the engine's message begins the same way."""
    import inspect

    from pytest_evomemory.runtime.preflight import check_metered_memory

    memory_doc = (REPO / "docs" / "memory.md").read_text(encoding="utf-8")
    quoted = "`key 'mem0.llm.pricing': --evomemory-max-cost meters the calls memory backend 'mem0' makes to its own chat model ...`"
    assert quoted in memory_doc
    source = inspect.getsource(check_metered_memory)
    assert "key '{price_key}': {plan.flags('max-cost')} meters the calls memory backend " in source
    assert "{config.memory.backend!r} makes to its own chat model" in source


def test_the_retry_setting_promises_no_count_the_artefacts_do_not_keep() -> None:
    """A call that succeeds after a 429 leaves no trace of its retries in any artefact
    (only a failing call's ModelError names its attempts): docs/agents.md says so."""
    agents = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    row = next(line for line in agents.splitlines() if line.startswith("| `max_retries` |"))
    assert "every attempt is counted and reported" not in row
    assert "no artefact counts the retries" in row
    definitions = SCHEMA.get("$defs") or SCHEMA["definitions"]
    for kind in ("response", "stream_metrics"):
        fields = set(definitions[kind]["properties"])
        assert fields and not any("attempt" in name or "retr" in name for name in fields), kind


def test_each_doors_help_spells_the_options_it_names_as_that_door_takes_them() -> None:
    """`pytest --help` said "what min-gain requires" and "with shard:", and `evomemory
    run --help` capped the cost "across xdist workers": a help names another option
    only as its door spells it (``--evomemory-min-gain`` / ``--min-gain``), and the
    help of an option one door refuses says so."""
    from pytest_evomemory.options import render

    hyphenated = [option.name for option in OPTIONS if "-" in option.name]
    for door, prefix in (("pytest", "--evomemory-"), ("cli", "--")):
        other = "--" if door == "pytest" else "--evomemory-"
        for option in OPTIONS:
            text = render(option.help, door)
            assert "{--" not in text, (door, option.name)
            bare = [name for name in hyphenated if re.search(rf"(?<![\w-]){name}(?![\w-])", text)]
            assert not bare, f"{door} help of {option.name} names {bare} without {prefix}"
            foreign = [name for name in hyphenated if re.search(rf"(?<![\w-]){re.escape(other)}{name}(?![\w-])", text)]
            assert not foreign, f"{door} help of {option.name} spells {foreign} as the other door does"
    assert "pytest refuses it" in render(next(o for o in OPTIONS if o.name == "chains").help, "pytest")
    assert "xdist" not in render(next(o for o in OPTIONS if o.name == "max-cost").help, "cli")


def test_the_local_model_page_quotes_the_readmes_measured_main_job() -> None:
    """docs/local-model.md's table of the embedded model's scores said 13/24 for the
    memory arm while the README's measured run (and a rerun from the wheel) gets 11/24:
    both pages quote one run, arm by arm and stream by stream."""
    correct: dict[str, dict[str, int]] = {}
    arm = ""
    for line in README.splitlines():
        heading = re.fullmatch(r"=+ evomemory: (\w+) =+", line)
        if heading:
            arm = heading.group(1)
        row = re.match(r"(sample_facts|sample_choice|overall) +\d+ +(\d+) ", line)
        if arm and row and " vs " not in line:
            correct.setdefault(arm, {})[row.group(1)] = int(row.group(2))
    page = (REPO / "docs" / "local-model.md").read_text(encoding="utf-8")
    arms = {"control": "sample_tinyagent_local_no_memory", "memory": "sample_tinyagent_local",
            "recent": "sample_exprecent_local", "model-free recall baseline": "sample_memory"}
    for label, name in arms.items():
        row = re.search(rf"^\| {re.escape(label)}\b[^|]*\| (\d+)/12 \| (\d+)/12 \| (\d+)/24 \|", page, re.M)
        assert row, f"docs/local-model.md has no row for the {label} arm"
        quoted = dict(zip(("sample_facts", "sample_choice", "overall"), map(int, row.groups()), strict=True))
        assert quoted == correct[name], (label, quoted, correct[name])


def _parsers(parser: argparse.ArgumentParser, name: str = "evomemory") -> list[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every subcommand's parser under it, by their command line."""
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                found += _parsers(sub, f"{name} {child}")
    return found


def test_every_commands_help_renders_as_written() -> None:
    """`evomemory power --help` printed "80%% power": argparse %-formats help strings
    but not a description, so a doubled % showed as typed. Every command's help reads
    with single % signs and no unfilled option placeholder."""
    for name, parser in _parsers(build_parser()):
        text = parser.format_help()
        assert "%%" not in text and "{--" not in text, f"`{name} --help`:\n{text}"
