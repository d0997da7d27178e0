"""An on-disk response cache: re-running the same config replays the same answers.

Benchmark runs at temperature 0 are meant to be reproducible, and model calls are
the slow, paid part; so a response is stored under a hash of everything that
determines it (provider, model, endpoint, messages, tools, sampling settings) and
never of the credentials. Entries are written to a temporary file in the same
directory and moved into place with ``os.replace``, so concurrent xdist workers
either see a whole entry or none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..core import boundedread
from ..core.types import Usage
from ..util.atomicfile import write_atomically
from ..util.redaction import dumps_redacted
from .base import ChatCompletion, ChatModel, ModelToolCall
from .cleaning import MAX_TOOL_CALLS_PER_REPLY, clean_completion

CACHE_DIR_ENV = "EVOMEMORY_CACHE_DIR"
#: Bump when the entry format or the key material changes.
CACHE_FORMAT = 1


def default_cache_dir(config: ModelConfig | None = None) -> Path:
    """``$EVOMEMORY_CACHE_DIR``, else ``model.cache_dir``, else the user cache.

    The environment wins so that CI can redirect every config's cache to a path
    it persists between jobs without editing configs.
    """
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    if config is not None and config.cache_dir:
        return Path(config.cache_dir).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "pytest-evomemory" / "responses"


def cache_identity(config: ModelConfig, endpoint: str | None, file_sha256: str | None = None) -> dict[str, Any]:
    """The config part of a cache key: what changes a response, and no secrets.

    A local model is keyed by its file's hash as well as its path, so that another
    file at the same path (a re-download, another quantisation) is not answered
    with the old file's replies."""
    identity = {
        "provider": config.provider,
        "model": config.model,
        "base_url": endpoint,
        "model_path": config.model_path,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
    }
    if file_sha256 is not None:
        identity["sha256"] = file_sha256
    return identity


class CachedChatModel:
    """Wraps a ChatModel; identical requests are answered from disk."""

    def __init__(self, inner: ChatModel, identity: Mapping[str, Any], directory: Path) -> None:
        self.inner = inner
        #: The config part of every key (:func:`cache_identity`).
        self.key_material = dict(identity)
        self.directory = directory
        self.hits = 0
        self.misses = 0

    def key(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> str:
        material = {
            "format": CACHE_FORMAT,
            **self.key_material,
            "messages": [dict(message) for message in messages],
            "tools": [dict(tool) for tool in tools],
        }
        encoded = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        # surrogatepass: a prompt holding a lone surrogate still gets a key (never a crash)
        return hashlib.sha256(encoded.encode("utf-8", errors="surrogatepass")).hexdigest()

    def identity(self) -> dict[str, Any]:
        """The wrapped model's (a replayed answer is the answer that model gave)."""
        inner = getattr(self.inner, "identity", None)
        return dict(inner()) if callable(inner) else {}

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion:
        key = self.key(messages, tools)
        path = self.path_for(key)
        cached = _read_entry(path)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        completion = self.inner.complete(messages, tools)
        _write_entry(path, completion)
        return completion


def _read_entry(path: Path) -> ChatCompletion | None:
    """A damaged or foreign entry is a miss, not an error: the call is simply redone."""
    try:
        data = boundedread.read_json(path, limit=boundedread.CACHE_BYTES, what="a response cache entry")
        if data.get("format") != CACHE_FORMAT:
            return None
        content, finish_reason = data.get("content"), data.get("finish_reason")
        if not isinstance(content, str | None) or not isinstance(finish_reason, str | None):
            return None  # edited or damaged: replaying it would hand the agent a non-text reply
        usage = data.get("usage") or {}
        calls = data.get("tool_calls", [])
        if not isinstance(calls, list) or len(calls) > MAX_TOOL_CALLS_PER_REPLY:
            return None  # no live reply has this shape: not ours to replay
        model = data.get("model")
        replayed = ChatCompletion(
            content=content,
            tool_calls=tuple(
                ModelToolCall(str(call["id"]), str(call["name"]), str(call["arguments"])) for call in calls
            ),
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            finish_reason=finish_reason,
            cached=True,
            model=model if isinstance(model, str) else None,
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError, boundedread.UnreadableFile):
        return None
    return clean_completion(replayed)  # what a live reply gets: storable text, no secret, whole counts


def _write_entry(path: Path, completion: ChatCompletion) -> None:
    entry = {
        "format": CACHE_FORMAT,
        "content": completion.content,
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in completion.tool_calls
        ],
        # Replayed as recorded, so a cached re-run reports the same token counts.
        "usage": completion.usage.to_dict(),
        "finish_reason": completion.finish_reason,
        "model": completion.model,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, dumps_redacted(entry, ensure_ascii=False))  # as every artefact: strict JSON
    except (OSError, ValueError):
        # A read-only or full cache directory, or text UTF-8 cannot hold, must not fail the benchmark.
        return
