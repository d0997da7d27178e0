"""``provider: mock``: a dry-run model, deterministic, offline and free.

A user checks a pipeline (arms, shards, gates, a memory adapter, the cost cap)
with it before spending money on a real endpoint, so it is a provider like the
others (after inspect_ai's ``mockllm/model``): it is built by the same factory, sits
under the same response cache and cost guard, takes the endpoint's concurrency
slots (``max_concurrency``, ``max_connections``) and request bound, and its replies
are cleaned like a server's before TinyAgent (or your agent) reads them. Only the
reply itself is scripted, by ``model.mock`` (:class:`~pytest_evomemory.config.MockSettings`):

* ``echo``: the task's own text;
* ``fixed``: ``answer``;
* ``answers``: the answer a file gives for the task id (:mod:`.context` says which
  task is asked), ``answer`` where it gives none;
* ``memory``: the correct answer of the recalled experience most similar to the
  task (:mod:`.mockreply`), ``answer`` when none is similar enough; offered the
  memory tools (``tool_use``) it recalls before answering and retains the
  feedback's correct answer, as a memory-using model would.

Token usage is the configured count, or estimated at four characters a token;
``latency_s`` makes every call take that long, inside its concurrency slot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..config.yamlio import read_yaml_mapping
from ..core.errors import ConfigError, ModelError
from ..core.types import Usage
from .base import ChatCompletion, ModelToolCall, Provided, sampling_identity
from .cleaning import clean_completion
from .context import current_stimulus
from .fingerprint import file_sha256
from .limits import endpoint_limiter, endpoint_semaphore
from .mockreply import SCRIPT_REVISION, Reply, script_reply

#: Characters per token of the estimated usage (as the scripted test server counts).
CHARS_PER_TOKEN = 4


def endpoint_of(config: ModelConfig) -> str:
    """The pretend endpoint: what the concurrency slots and the cache key it by."""
    return f"mock://{config.model}"


def resolve_answers_path(answers: str, base_dir: Path) -> Path:
    """The answers file a config names (``~`` expanded, relative to ``base_dir``)."""
    path = Path(answers).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve()


def read_answers(path: Path) -> dict[str, str]:
    """The answers file: a YAML (or JSON) mapping of task ids to answers.

    Raises :class:`ConfigError` naming the file (and the entry) for a missing file,
    a file that is not a mapping, or an answer that is not a string or number."""
    data = read_yaml_mapping(path, empty="answers by task id (f01: Paris)")
    answers: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(
                f"{path}: the answer of {key!r} is not a string or number; write one answer per task id "
                "(task_id: answer, or stream/task_id: answer)",
                source=str(path),
            )
        answers[str(key)] = str(value)
    return answers


class MockChatModel:
    """A :class:`~pytest_evomemory.models.base.ChatModel` whose replies are scripted."""

    def __init__(
        self, config: ModelConfig, *, base_dir: Path | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.config = config
        self.settings = config.mock
        self.endpoint = endpoint_of(config)
        self._sleep = sleep
        self.answers_path: Path | None = None
        self.answers: dict[str, str] = {}
        if self.settings.mode == "answers" and self.settings.answers is not None:
            self.answers_path = resolve_answers_path(self.settings.answers, base_dir or Path.cwd())
            self.answers = read_answers(self.answers_path)
        self._semaphore = endpoint_semaphore(self.endpoint, config.max_concurrency)
        self._limiter = endpoint_limiter(self.endpoint, config.max_connections)

    def __repr__(self) -> str:
        return f"MockChatModel(model={self.config.model!r}, mode={self.settings.mode!r})"

    @property
    def answers_sha256(self) -> str | None:
        """The answers file's hash: a changed file must not be answered from the cache."""
        return None if self.answers_path is None else file_sha256(self.answers_path)

    def identity(self) -> dict[str, Any]:
        """What answers: the dry-run model, its mode and answers file."""
        return mock_identity(self.config, self.answers_path, self.answers_sha256)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion:
        request = json.dumps({"messages": list(messages), "tools": list(tools)}, ensure_ascii=False, default=str)
        size = len(request.encode("utf-8", errors="surrogatepass"))
        if size > self.config.max_request_bytes:
            raise ModelError(
                f"model {self.config.model!r} (mock): the request is {size:,} bytes, over model.max_request_bytes "
                f"({self.config.max_request_bytes:,}); shorten the prompt or tool results, or raise the limit "
                "(it was not sent)"
            )
        with self._semaphore, self._limiter.slot():
            if self.settings.latency_s:
                self._sleep(self.settings.latency_s)
            reply = script_reply(self.settings, messages, tools, current_stimulus(), self.answers)
        return clean_completion(self._completion(reply, messages, request))

    def _completion(self, reply: Reply, messages: Sequence[Mapping[str, Any]], request: str) -> ChatCompletion:
        calls = tuple(
            # Ids from the conversation's length: the same request gets the same reply
            # (and the same cache key for the next step), in every run.
            ModelToolCall(f"mock_{len(messages)}_{index}", name, json.dumps(arguments, ensure_ascii=False))
            for index, (name, arguments) in enumerate(reply.calls)
        )
        shown = reply.text or "".join(call.name + call.arguments for call in calls)
        prompt = self.settings.prompt_tokens
        completion = self.settings.completion_tokens
        usage = Usage(
            prompt_tokens=prompt if prompt is not None else max(1, len(request) // CHARS_PER_TOKEN),
            completion_tokens=completion if completion is not None else max(1, len(shown) // CHARS_PER_TOKEN),
        )
        return ChatCompletion(
            content=reply.text,
            tool_calls=calls,
            usage=usage,
            finish_reason="tool_calls" if calls else "stop",
            model=self.config.model,
        )


def mock_identity(config: ModelConfig, answers_path: Path | None = None, sha256: str | None = None) -> dict[str, Any]:
    """The dry-run model as every artefact names it."""
    identity: dict[str, Any] = {"provider": "mock", "model": config.model, "mode": config.mock.mode}
    if answers_path is not None:
        identity["answers"] = str(answers_path)
    if sha256 is not None:
        identity["sha256"] = sha256
    return {**identity, **sampling_identity(config)}


def provide(config: ModelConfig, **options: Any) -> Provided:
    """The factory's entry (:data:`~.factory.PROVIDERS`): the model, keyed in the
    cache by its settings and its answers file's hash."""
    model = MockChatModel(config, **options)
    return Provided(model, model.endpoint, model.answers_sha256,
                    {"mock": config.mock.model_dump(), "script": SCRIPT_REVISION})


__all__ = ["MockChatModel", "endpoint_of", "mock_identity", "provide", "read_answers", "resolve_answers_path"]
