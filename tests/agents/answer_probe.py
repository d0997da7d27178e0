"""A probe agent: in every task turn it inspects everything it can reach and writes it down.

Self-contained on purpose (the plugin tests copy this file into a pytester project and
name it as the agent, ``kind: answer_probe:create``). From the stimulus and the turn it
follows attributes and properties (``dir``), ``vars``/``__dict__``, ``__slots__``,
``dataclasses.fields``, mapping keys and values, sequence items, ``to_dict()``,
``repr()``, the ``pickle`` bytes and ``__reduce_ex__`` state, bound methods' ``__self__`` and functions' closure
cells and defaults, and the garbage collector's referents. It does not follow classes,
modules or a function's ``__globals__``: those lead to the whole interpreter (every
loaded module), which an in-process agent can always reach and which no object
design can hide; the protocol asks that nothing reachable from what the agent is
*given* holds the answer.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import pickle
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The walk refuses to go on past this many objects (and says so), instead of
#: silently stopping short of a leak.
MAX_OBJECTS = 200_000

_SCALARS = (str, bytes, bytearray, int, float, complex, bool, type(None))
_STOP = (type, types.ModuleType, types.CodeType, types.FrameType, types.TracebackType)

#: Object addresses in default reprs (``<Foo object at 0x7ff422486dd0>``) say nothing
#: about a task, yet a three-digit AIME answer turns up in one by chance now and then.
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


@dataclass
class Findings:
    """Every name (attribute, field, key) and every text the walk met."""

    names: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    objects: int = 0
    truncated: bool = False

    def blob(self) -> str:
        return _ADDRESS.sub("0x?", "\x00".join(self.texts))


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else repr(value)


def _own_kind(obj: Any) -> bool:
    """Objects whose attributes and properties are worth evaluating one by one
    (ours and the probe's); foreign C objects (numpy arrays, locks) get the rest."""
    module = type(obj).__module__ or ""
    return not module.startswith(("builtins", "numpy", "_", "sqlite3", "threading"))


def inspect_everything(*roots: Any) -> Findings:
    found = Findings()
    seen: dict[int, Any] = {}  # keeps every visited object alive, so ids stay unique
    stack: list[Any] = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        found.objects += 1
        if found.objects > MAX_OBJECTS:
            found.truncated = True
            break
        if isinstance(obj, _SCALARS):
            found.texts.append(_text(obj))
            continue
        if isinstance(obj, _STOP):
            continue
        if isinstance(obj, types.MethodType):
            stack += [obj.__self__, obj.__func__]
            continue
        if isinstance(obj, types.FunctionType):
            stack += [cell.cell_contents for cell in obj.__closure__ or () if _filled(cell)]
            stack += [obj.__defaults__, obj.__kwdefaults__]
            continue
        if isinstance(obj, types.BuiltinFunctionType | types.BuiltinMethodType):
            if not isinstance(obj.__self__, types.ModuleType):
                stack.append(obj.__self__)
            continue
        stack += _children(obj, found)
    return found


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _children(obj: Any, found: Findings) -> list[Any]:
    children: list[Any] = []
    for view in (repr, str):
        try:
            found.texts.append(view(obj))
        except Exception:
            pass
    own = _own_kind(obj)
    if own:  # builtin containers are walked item by item instead
        try:
            children.append(pickle.dumps(obj))
        except Exception:
            pass
        try:  # what pickling would save, even where the class itself cannot be pickled
            children.append(obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL))
        except Exception:
            pass
    if isinstance(obj, Mapping):
        for key, value in list(obj.items()):
            found.names.add(str(key))
            children += [key, value]
    elif isinstance(obj, list | tuple | set | frozenset):
        children += list(obj)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        try:
            children.append(to_dict())
        except Exception:
            pass
    try:
        children.append(vars(obj))
    except TypeError:
        pass
    if dataclasses.is_dataclass(obj):
        for item in dataclasses.fields(obj):
            found.names.add(item.name)
            children.append(getattr(obj, item.name, None))
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in [slots] if isinstance(slots, str) else slots:
            found.names.add(name)
            children.append(getattr(obj, name, None))
    if own:
        for name in dir(obj):
            if name.startswith("__"):
                continue
            found.names.add(name)
            try:
                children.append(getattr(obj, name))  # properties are evaluated
            except Exception:
                pass
    children += gc.get_referents(obj)
    return children


def _json_safe(names: Iterable[str]) -> list[str]:
    return sorted(names)


class ProbeAgent:
    """Looks at everything in each task turn, answers "?", acknowledges feedback."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def respond(self, stimulus: Any, turn: Any) -> None:
        if stimulus.kind == "task":
            alone = inspect_everything(stimulus)
            everything = inspect_everything(stimulus, turn)
            record = {
                "kind": "task",
                "stream": stimulus.stream,
                "task_id": stimulus.task_id,
                "stimulus_type": type(stimulus).__name__,
                "stimulus_names": _json_safe(alone.names),
                "stimulus_text": alone.blob(),
                "reachable_text": everything.blob(),
                "objects": everything.objects,
                "truncated": alone.truncated or everything.truncated,
            }
            answer = "?"
        else:
            record = {
                "kind": "feedback",
                "stream": stimulus.stream,
                "task_id": stimulus.task_id,
                "content": stimulus.content,
                "target": stimulus.target,
                "source_answer": dict(stimulus.source_answer),
            }
            answer = "Feedback recorded"
        with self.out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        turn.call_tool("final_answer", {"answer": answer})

    def reset(self) -> None:
        pass


def create(config: Any, memory: Any) -> ProbeAgent:
    return ProbeAgent(Path(config.options["out"]))
