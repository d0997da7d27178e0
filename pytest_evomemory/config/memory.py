"""The memory config: the backend under test, ``top_k``, and each backend's own section."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import ConfigDict, Field

from .base import StrictModel, Text


class MemoryConfig(StrictModel):
    """The memory system under test: backend and its settings (it owns ``top_k``).

    A backend's own settings sit under a key of its own (``sqlite: {path: ...}``),
    validated by the options model the backend declares beside its code (its
    ``BACKEND`` spec, registered in :data:`pytest_evomemory.memory.factory.MEMORY_BACKENDS`,
    e.g. :mod:`pytest_evomemory.memory.sqlite`); the loader checks those keys, so this
    model admits them as extra keys and :meth:`section` hands each backend its own.
    """

    model_config = ConfigDict(extra="allow")

    backend: str = "inprocess"
    top_k: Annotated[int, Field(ge=1, le=1000)] = 4
    embedder: Literal["hashing", "sentence-transformers"] | None = None
    embedder_model: Text | None = None
    embedding_dim: Annotated[int, Field(ge=8, le=8192)] = 256
    #: Seconds a stream's memory may take to open before the stream fails, naming
    #: the factory (a server that accepts and never answers must not hang a run).
    open_timeout_s: Annotated[float, Field(gt=0, le=86_400)] = 120.0
    #: Built-in backends: offer ``forget`` and ``update`` tools beside retain/recall to
    #: a ``tool_use`` agent (ReMem's refine-memory operations; docs/reference-agents.md).
    editing_tools: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    def section(self, model: type[_Section]) -> _Section:
        """The backend settings under ``model.SECTION`` (its defaults when absent)."""
        extra = self.model_extra or {}
        return model.model_validate(extra.get(model.SECTION, {}))

    def sections(self) -> dict[str, Any]:
        """The backend sections given (already validated by the loader)."""
        return dict(self.model_extra or {})


class BackendOptions(StrictModel):
    """Base of a backend's own settings model; ``SECTION`` is its key under ``memory:``."""

    SECTION: ClassVar[str] = ""


_Section = TypeVar("_Section", bound=BackendOptions)
