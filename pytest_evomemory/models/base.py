"""The chat-model seam between TinyAgent and whatever serves the model.

``ChatModel.complete`` takes OpenAI-style chat messages and tool schemas and returns
one assistant message. Providers (:data:`~.factory.PROVIDERS`): :mod:`.openai_compat`
(any OpenAI-compatible HTTP endpoint, over :mod:`.http11`, or ``httpx2`` behind a
proxy), :mod:`.local` (a GGUF model in-process through llama-cpp-python) and
:mod:`.mock` (the dry-run model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.types import Usage

if TYPE_CHECKING:
    from ..config import ModelConfig


@dataclass(frozen=True)
class ModelToolCall:
    """A tool call as the model emitted it; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatCompletion:
    """One assistant message, with the usage the server reported for the call."""

    content: str | None
    tool_calls: tuple[ModelToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    cached: bool = False
    #: The model name the server reported in its reply (chat completions' ``model``):
    #: what answered, which may be more exact than what was asked for. ``None``
    #: when nothing was reported (a local model is identified by its file).
    model: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation.

        ``content`` is left out of a tool-call message without text and is never
        ``null``: the OpenAI API allows both shapes, but some compatible servers
        (llama-cpp-python's among them) reject a null content.
        """
        message: dict[str, Any] = {"role": "assistant"}
        if self.content is not None or not self.tool_calls:
            message["content"] = self.content or ""
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                for call in self.tool_calls
            ]
        return message


@runtime_checkable
class ChatModel(Protocol):
    """A chat-completions model. Raises ``ModelError`` once retries are exhausted.

    The built-in models also offer ``identity() -> dict``: what answers (the GGUF
    file and its hash, or the endpoint and model name), which every artefact of a
    run records (:mod:`pytest_evomemory.models.identity`).
    """

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion: ...


@dataclass(frozen=True)
class Provided:
    """What a provider builds for a model config: the model, and what the response
    cache keys it by besides the config (:func:`~.cache.cache_identity`): the
    endpoint, the hash of the file that decides its replies (a GGUF model, the
    dry-run model's answers), and any further settings that change a reply."""

    model: ChatModel
    endpoint: str | None = None
    file_sha256: str | None = None
    cache_key: Mapping[str, Any] = field(default_factory=dict)


def sampling_identity(config: ModelConfig) -> dict[str, Any]:
    """The sampling settings that decide what a model answers (unset ones left out)."""
    settings = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": config.seed}
    return {key: value for key, value in settings.items() if value is not None}
