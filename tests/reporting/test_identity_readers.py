"""The run page's metadata and the JUnit properties read what ran as the typed
identities (rundocs.identity), and say exactly what they said when they read dicts.

``identity_readers_expected.json`` holds what the dict readers wrote for each case of
:mod:`.identity_cases` (every provider's record, a model of one's own, the config's
fallback, a model-free agent, LoCoMo's full-context arm, and the shapes older runs
wrote); it was made before the readers were typed and is not regenerated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.models.identity import describe_model, describe_ran, summary_ran
from pytest_evomemory.reporting.htmlpage import _run_meta
from pytest_evomemory.reporting.properties import identity_properties
from pytest_evomemory.reporting.rundata import RunData
from pytest_evomemory.rundocs import AgentIdentity, MemoryIdentity, ModelIdentity, RunFile, StreamRan, Summary

from .identity_cases import CASES, LOCAL, OLD_API, OLD_LOCAL, SHA, run_json, summary

EXPECTED: dict[str, dict[str, Any]] = json.loads((Path(__file__).parent / "identity_readers_expected.json").read_text())


def test_every_case_has_its_expected_output() -> None:
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_run_pages_metadata_and_the_properties_say_what_the_dict_readers_said(name: str) -> None:
    summary_json, run_document = CASES[name]
    run = _run(summary_json, run_document)
    assert _run_meta(run) == EXPECTED[name]["meta"]
    properties = [list(pair) for pair in identity_properties(run.summary)]
    assert properties == EXPECTED[name]["properties"]
    assert [list(pair) for pair in identity_properties(summary_json)] == properties  # summary.json as read from disk


def _run(summary_json: dict[str, Any], run_document: dict[str, Any]) -> RunData:
    """A finished run as the pages read it."""
    return RunData(run_dir=Path("/runs/r"), label="r", summary=Summary.model_validate(summary_json),
                   run=RunFile.model_validate(run_document))


def test_what_ran_is_read_as_the_typed_identities() -> None:
    summary_json, run_document = CASES["local"]
    identity = _run(summary_json, run_document).ran
    assert isinstance(identity.agent, AgentIdentity) and identity.agent.class_ == "pytest_evomemory.agents.tiny:TinyAgent"
    assert isinstance(identity.memory, MemoryIdentity) and identity.memory.top_k == 4
    assert isinstance(identity.model, ModelIdentity) and identity.model.sha256 == SHA
    assert identity.model.written() == LOCAL  # a provider's own keys, no other provider's
    # a run without a record of what ran: the config's model, told apart by the file it named
    old = _run(*CASES["old run without a record of what ran"]).ran
    assert old.model is not None and old.model.file == "/m/SmolLM2.gguf" and old.model.model is None


def test_an_older_records_keys_are_read_from_the_typed_model() -> None:
    identity = summary_ran(summary({"s1": {"agent": None, "memory": None, "model": OLD_LOCAL}}))
    assert identity.model is not None and identity.model.extra("model_path") == OLD_LOCAL["model_path"]
    assert describe_model(identity.model) == "local SmolLM2-old.gguf (temperature 0.0)"
    assert describe_model(OLD_API) == describe_model(ModelIdentity.model_validate(OLD_API)) == (
        "openai gpt-4o-mini at http://127.0.0.1:9/v1")


def test_a_damaged_field_is_left_out_not_shown_or_fatal() -> None:
    """A dict reader printed whatever a hand-edited summary held (a number as a
    file's hash); the typed reader leaves out what is not what the writer writes."""
    damaged = {**LOCAL, "sha256": 12345, "file": ["not", "a", "name"]}
    assert describe_model(damaged) == "local model (file not recorded) (temperature 0.0, max_tokens 1024, seed 0)"
    reported = {"provider": "openai", "model": "m", "reported": ["m-1", 7]}
    assert describe_model(reported) == "openai m (the server reported m-1)"
    properties = dict(identity_properties({"ran": {"s1": {"agent": {"class": "a:A", "factory": "a:f"},
                                                          "memory": None, "model": damaged}}}))
    assert properties["evomemory_agent"] == "a:A (built by a:f)"
    assert properties["evomemory_model"].startswith("local model (file not recorded)")


def test_empty_blocks_read_as_none() -> None:
    assert describe_model({}) == describe_model(None) == describe_model(ModelIdentity()) == "none (model-free agent)"
    identity = summary_ran(Summary.model_validate(summary({"s1": {"agent": {}, "memory": {}, "model": {}}})))
    assert identity == StreamRan()
    assert describe_ran({"s1": StreamRan(agent=AgentIdentity(), memory=None, model=None)}) == [
        "agent none; memory none; model none (model-free agent) [s1]"]
    assert _run(summary(None), run_json(agent={})).ran.agent is None
