"""Every built-in backend ingests a conversation one record per turn (docs/locomo.md):
the date and dialogue id in the text, the dialogue id in the metadata, recallable."""

from __future__ import annotations

import pytest

from pytest_evomemory.memory.base import Ingestible
from pytest_evomemory.memory.ingestion import dia_ids_of, evidence_recall
from pytest_evomemory.streams.locomo import SAMPLE_FILE, read_file

from .conftest import OpenMemory


def test_a_backend_that_ingests_stores_one_recallable_record_per_turn(open_memory: OpenMemory, backend_id: str) -> None:
    if backend_id.endswith("sentence-transformers"):
        pytest.skip("the same ingestion as sqlite; hybrid recall is covered by sqlite+hashing (a model load is 40 s)")
    memory = open_memory()
    if not isinstance(memory, Ingestible):
        pytest.skip(f"{type(memory).__name__} offers no ingest (an adapter's choice)")
    conversation = read_file(SAMPLE_FILE)[0]
    for session in conversation.sessions:
        memory.ingest(session)
    if hasattr(memory, "__len__"):
        assert len(memory) == conversation.turns  # type: ignore[arg-type]
    hits = memory.recall("coxed four Heron canal")
    assert hits, "nothing recalled after ingestion"
    found = [hit for hit in hits if hit.metadata.get("dia_id") == "D1:3"]
    assert found, [hit.content for hit in hits]
    hit = found[0]
    assert hit.content.startswith("10:15 am on 3 March, 2021: [D1:3] Ilse: A coxed four called the Heron.")
    assert (hit.metadata["session"], hit.metadata["speaker"], hit.metadata["conversation"]) == (1, "Ilse", "conv-sample-1")
    assert evidence_recall(["D1:3"], [hit.to_dict() for hit in hits]) == 1.0
    assert dia_ids_of({"content": hit.content, "metadata": {}}) == {"D1:3"}  # the tag alone attributes it too
