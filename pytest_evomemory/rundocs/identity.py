"""What ran: the agent, memory and model a stream's process built (run.json's and
summary.json's ``ran``), the package versions a run records, and which replicate of
a repeated arm it was (run.json's and summary.json's ``replicate``).

Each identity is written with exactly the keys it was given (``AS_GIVEN``): a local
model's identity has no ``model`` key, an API model's no ``sha256``, and the schema
refuses the other provider's keys.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from .base import RunDoc
from .fields import Count, Number, Scalar, Sha256, Text


class AgentIdentity(RunDoc):
    """The agent that ran: the class built and the factory that built it, the config's kind (a conftest factory's module:qualname when one built the agent), its memory strategy and options, and full_context for LoCoMo's full-context arm."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"kind", "memory_strategy"})
    CLOSED = True

    kind: Scalar = Field(default=None, description="The config's kind when the built-in builder ran it, else the factory "
                         "that did (module:qualname).")
    memory_strategy: Scalar = None
    options: dict[str, Any] = Field(default_factory=dict, description="agent.options as configured.")
    full_context: Literal[True] | None = Field(default=None, description="LoCoMo's full-context arm (agent full_context: true); absent otherwise."
    )
    class_: Scalar = Field(default=None, alias="class", description="module:qualname of the agent's class.")
    factory: Scalar = Field(default=None, description="module:qualname of the factory that built it.")
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "kind": {"type": "string", "description": "The config's kind when the built-in builder ran it, else the "
                 "factory that did (module:qualname)."},
        "memory_strategy": {"enum": ["none", "deterministic_recall", "tool_use"]},
        "options": {"type": "object", "description": "agent.options as configured."},
        "full_context": {"const": True, "description": "LoCoMo's full-context arm (agent full_context: true); "
                         "absent otherwise."},
        "class": {"type": "string", "description": "module:qualname of the agent's class."},
        "factory": {"type": "string", "description": "module:qualname of the factory that built it."},
    }}


class MemoryIdentity(RunDoc):
    """The memory system that ran; null without memory (memory_strategy none)."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset({"backend"})
    CLOSED = True

    backend: Scalar = Field(default=None, description="The config's backend, or the conftest factory (module:qualname) that "
                            "built the memory.")
    top_k: Count | None = None
    class_: Scalar = Field(default=None, alias="class")
    factory: Scalar = None
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {
        "backend": {"type": "string", "description": "The config's backend, or the conftest factory "
                    "(module:qualname) that built the memory."},
        "top_k": {"type": "integer", "minimum": 0}, "class": {"type": "string"}, "factory": {"type": "string"},
    }}


class ModelIdentity(RunDoc):
    """The model that answered, as the agent's chat model describes itself; null for a model-free agent. A local model is its GGUF file and the file's SHA-256; an API model its endpoint, the name asked for and the names the server reported. Only the provider's own keys appear. A model of one's own may say more."""

    AS_GIVEN = True
    REQUIRED: ClassVar[frozenset[str]] = frozenset()
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"allOf": [
        {"if": {"properties": {"provider": {"const": "local"}}, "required": ["provider"]},
         "then": {"not": {"anyOf": [{"required": ["model"]}, {"required": ["endpoint"]}, {"required": ["reported"]}]}}},
        {"if": {"properties": {"provider": {"const": "openai"}}, "required": ["provider"]},
         "then": {"required": ["model"],
                  "not": {"anyOf": [{"required": ["file"]}, {"required": ["sha256"]}, {"required": ["n_ctx"]}]}}},
    ]}

    provider: Scalar = None
    file: Text | None = Field(default=None, description="local: the GGUF file's name.")
    path: Text | None = Field(default=None, description="local: the file's path.")
    sha256: Sha256 | None = Field(default=None, description="local: the file's SHA-256.")
    n_ctx: Count | None = None
    model: str | None = Field(default=None, description="openai: the model name asked for.")
    endpoint: str | None = Field(default=None, description="openai: the chat-completions base URL.")
    reported: list[Text] | None = Field(default=None, description="openai: the names the server reported in its replies, in order of first appearance "
        "(once any reply came)."
    )
    temperature: Number | None = None
    max_tokens: int | None = None
    seed: int | None = None
    source: Literal["config"] | None = Field(default=None, description="The agent does not say which model it ran: this is the config's model section."
    )


class StreamRan(RunDoc):
    """What one stream's process built when the stream started."""

    CLOSED = True

    agent: AgentIdentity | None = None
    memory: MemoryIdentity | None = None
    model: ModelIdentity | None = None


class Versions(RunDoc):
    """Package name -> version of the packages that decide results, and python."""

    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"additionalProperties": {"anyOf": [{"type": "string"}, {"type": "null"}]}}

    pytest_evomemory: Text | None = Field(default=None, alias="pytest-evomemory")
    python: Text | None = None


class Replicate(RunDoc):
    """Which replicate of a repeated run this is (benchmark.repeats, benchmark.seeds, --evomemory-repeats): its index from 1, how many replicates the arm runs, and the seed it ran with (benchmark.seed and agent.model.seed)."""

    CLOSED = True
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"properties": {"index": {"type": "integer", "minimum": 1}, "count": {"type": "integer", "minimum": 1},
                                   "seed": {"type": "integer"}}}

    index: Count = 1
    count: Count = 1
    seed: int = 0


__all__ = ["AgentIdentity", "MemoryIdentity", "ModelIdentity", "Replicate", "StreamRan", "Versions"]
