"""What a memory-library developer and a team gating CI trip over when following
README.md and docs/*.md (the second held-out new-user trial): the refusals the pages
quote are the engine's. Pure text and model checks, milliseconds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_evomemory import load_run_config
from pytest_evomemory.configs import builtin_path
from pytest_evomemory.runtime.capabilities import memory_needs, missing

REPO = Path(__file__).resolve().parents[1]
MEMORY = (REPO / "docs" / "memory.md").read_text(encoding="utf-8")


class Notebook:
    """A memory with the five methods and nothing optional."""


def test_the_quoted_refusals_of_a_memory_lacking_a_capability_read_as_sentences() -> None:
    """Each capability a run asks of a memory is refused in one line naming the
    method(s) and why (it read "has no snapshot(directory) and restore(directory)
    method, which a resume restores each stream's memory ..."); memory.md quotes the
    resume refusal as the engine words it."""
    config = load_run_config(builtin_path("sample_mock"))
    config = dataclasses.replace(
        config,
        agent=config.agent.model_copy(update={"kind": "exprecent"}),
        memory=config.memory.model_copy(update={"editing_tools": True}),
    )
    needs = memory_needs(config, [], resuming=True, builtin_agent=True)
    where = "/repo/configs/memory/notebook.yaml"
    lines = {need.method: missing(Notebook, [need], where) for need in needs}
    assert set(lines) == {
        "recent(limit) method", "forget(record_id) method", "snapshot(directory) and restore(directory) methods"}
    for method, line in lines.items():
        assert line is not None and line.startswith(f"{where}: memory Notebook has no {method}, which "), line
    assert lines["recent(limit) method"].split(", which ")[1].startswith("agent kind 'exprecent' calls for ")
    assert f"    {lines['snapshot(directory) and restore(directory) methods']}\n" in MEMORY
