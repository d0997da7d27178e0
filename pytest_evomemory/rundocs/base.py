"""What every run document shares: how it is written, read back and refused.

A document is a pydantic model (:class:`RunDoc`), as inspect_ai's ``EvalLog`` and
``EvalSample`` are: the writer writes :meth:`RunDoc.written` (``model_dump``) of it, the readers read it
back with ``model_validate`` and use its attributes. Two rules keep today's files:

* a field listed in :attr:`RunDoc.OMIT_NONE` is left out while it is None (a
  score's ``traceback``), every other field is written, null included;
* keys a reader does not know are kept (``extra="allow"``): a newer writer's
  additions pass through, and a file read and written again loses nothing.

A field that is missing when read takes its default (a summary written before the
field existed), so an older run stays readable; the JSON Schema still lists every
field the writer always writes as required (:func:`_schema_extra`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)
from pydantic_core import ErrorDetails

from ..util.text import inert, shorten
from .fields import CHECK, checked

#: The version of every JSON document a run writes (run.json, summary.json,
#: compare.json, the JSON report's block): a reader refuses a newer one.
SCHEMA_VERSION = 2

#: A document's ``schema_version``: a whole number when read (a reader refuses a
#: newer one itself, naming the versions), the current one in the schema.
SchemaVersion = Annotated[
    int,
    checked("a whole number of at least 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    WithJsonSchema({"const": SCHEMA_VERSION,
                    "description": "The artefacts' schema version (rundir.SCHEMA_VERSION). A reader refuses a newer one."}),
]

#: What the reader of a damaged run file is told to do.
DAMAGED_ADVICE = (
    "the file was edited or damaged: run the benchmark again, or restore the file "
    "(an earlier run's copy may be under history/)"
)


def _schema_extra(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Every field the writer always writes is required in the schema (a reader
    defaults a missing one; the writer never leaves one out)."""
    omitted: frozenset[str] = getattr(model, "OMIT_NONE", frozenset()) | getattr(model, "OMIT_UNSET", frozenset())
    optional: frozenset[str] = getattr(model, "NOT_REQUIRED", frozenset())
    if getattr(model, "AS_GIVEN", False):
        optional = optional | frozenset(model.model_fields) - getattr(model, "REQUIRED", frozenset())
    required = [
        field.alias or name for name, field in model.model_fields.items() if name not in omitted | optional
    ]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    description = getattr(model, "SCHEMA_DESCRIPTION", None)
    if description:
        schema["description"] = description
    elif model.__doc__:
        schema["description"] = " ".join(model.__doc__.split())
    if getattr(model, "CLOSED", False):
        schema["additionalProperties"] = False
    for keyword, value in (getattr(model, "SCHEMA_EXTRA", None) or {}).items():
        if keyword == "properties":  # one property's schema said more precisely
            schema.setdefault("properties", {}).update(value)
        else:
            schema[keyword] = value


class RunDoc(BaseModel):
    """A JSON document (or JSONL record) of a run directory.

    Each model's validator is built on its first use (``defer_build``): a process
    uses a few of the some eighty documents, and building them all at import took
    about a tenth of a second of every process's start-up (each xdist worker's
    too). pydantic builds a deferred model under a lock, so chains in threads may
    meet one first together."""

    model_config = ConfigDict(
        extra="allow", populate_by_name=True, json_schema_extra=_schema_extra, defer_build=True
    )

    #: fields written only when they hold a value
    OMIT_NONE: ClassVar[frozenset[str]] = frozenset()
    #: fields written only when they were given (even as None): the JSON report's
    #: ``replicates``, present (null or not) in a repeated session only
    OMIT_UNSET: ClassVar[frozenset[str]] = frozenset()
    #: fields the writer may leave out for other reasons (a schema says so)
    NOT_REQUIRED: ClassVar[frozenset[str]] = frozenset()
    #: the schema forbids keys it does not list (the writer writes no others)
    CLOSED: ClassVar[bool] = False
    #: the schema's description, when the docstring is the code's, not a reader's
    SCHEMA_DESCRIPTION: ClassVar[str | None] = None
    #: write only the fields given (an identity whose keys are the provider's own),
    #: not the others' defaults
    AS_GIVEN: ClassVar[bool] = False
    #: further schema keywords (a rule across fields, pattern properties)
    SCHEMA_EXTRA: ClassVar[dict[str, Any] | None] = None

    @model_serializer(mode="wrap")
    def _leave_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        model = type(self)
        # most documents (a usage, a tool call) leave nothing out, and every record the
        # run writes passes here once per nested document: that is decided once per class
        if _writes_all(model) or not isinstance(data, dict):
            return data
        if self.AS_GIVEN:
            names, keys = _field_keys(model)
            for name in names - self.model_fields_set:  # the fields not given (a set difference, in C)
                data.pop(keys[name], None)
        if self.OMIT_UNSET:
            keys = _field_keys(model)[1]
            for name in self.OMIT_UNSET - self.model_fields_set:
                data.pop(keys[name], None)
        for key in _omitted_keys(model):
            if key in data and data[key] is None:
                del data[key]
        return data

    def written(self) -> dict[str, Any]:
        """The document as the writer writes it (aliases, omitted Nones left out)."""
        data: dict[str, Any] = self.model_dump(by_alias=True)
        return data

    def extra(self, key: str, default: Any = None) -> Any:
        """A key this model does not declare (a figure's ``<name>_matches``, a newer
        writer's field), or ``default``."""
        return (self.__pydantic_extra__ or {}).get(key, default)


@cache
def _writes_all(model: type[RunDoc]) -> bool:
    """Whether ``model`` writes every field as serialized (no ``AS_GIVEN``,
    ``OMIT_UNSET`` or ``OMIT_NONE``), worked out at its first serialization."""
    return not (model.AS_GIVEN or model.OMIT_UNSET or _omitted_keys(model))


@cache
def _field_keys(model: type[RunDoc]) -> tuple[frozenset[str], dict[str, str]]:
    """The set of ``model``'s field names, and the key each is written under (its
    alias, else its name): an ``AS_GIVEN`` part leaves out the fields not given,
    found by a set difference (a comparison of 32 arms writes some 1,500 parts)."""
    keys = {name: field.alias or name for name, field in model.model_fields.items()}
    return frozenset(keys), keys


@cache
def _omitted_keys(model: type[RunDoc]) -> tuple[str, ...]:
    """The keys ``model`` leaves out when None (its ``OMIT_NONE`` under their aliases),
    worked out once per class: every record the run writes is serialized through
    :meth:`RunDoc._leave_out`, nested documents included."""
    fields = model.model_fields
    keys = []
    for name in model.OMIT_NONE:
        declared = fields.get(name)
        keys.append((declared.alias or name) if declared is not None else name)
    return tuple(keys)


Doc = TypeVar("Doc", bound=RunDoc)


def _location(error: ErrorDetails) -> tuple[str, object]:
    """The dotted key of one validation error and the value found there."""
    parts = [str(part) for part in error["loc"]]
    value: object = error.get("input")
    context = error.get("ctx") or {}
    if "key" in context:  # a rule across fields (correct at most tasks) names its field
        parts.append(str(context["key"]))
        value = context.get("value")
    key = ".".join(part if not part.isdigit() else f"[{part}]" for part in parts).replace(".[", "[")
    return key, value


def _expected(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == CHECK or kind.startswith(f"{CHECK}_"):
        return error["msg"]
    return {
        "model_type": "an object", "model_attributes_type": "an object", "dict_type": "an object",
        "list_type": "a list", "string_type": "text", "bool_type": "true or false", "literal_error": error["msg"],
        "missing": "a value", "union_tag_invalid": error["msg"],
    }.get(kind, error["msg"])


def problem_line(path: Path, error: ValidationError, record: int | None = None) -> str:
    """The one-line error for the first field of a document that is not what it must
    be: the file, the record (1-based, of a JSONL file), the key, what was expected,
    what was found and what to do."""
    first = error.errors()[0]
    key, value = _location(first)
    where = f"{path}" + (f", record {record}" if record is not None else "")
    got = inert(shorten(repr(value), 60), one_line=True)
    return f"{where}: key {key!r}: expected {_expected(first)}, got {got}; {DAMAGED_ADVICE}"


class DamagedDocument(ValueError):
    """A run document (or record) that is not what the writer writes."""


def as_model(model: type[Doc], value: Doc | Mapping[str, Any]) -> Doc:
    """``value`` as ``model``: itself when it is one, else a mapping (a caller's own
    document, as the file holds it) validated."""
    return value if isinstance(value, model) else model.model_validate(value)


def read(model: type[Doc], path: Path, value: Mapping[str, Any] | object, record: int | None = None) -> Doc:
    """``value`` (read from ``path``) as ``model``, or :class:`DamagedDocument`
    with :func:`problem_line`'s one line."""
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise DamagedDocument(problem_line(path, error, record)) from None


def tolerant(model: type[Doc], value: Mapping[str, Any]) -> Doc:
    """``value`` as ``model``, leaving out each field that is not what it must be (it
    takes its default): for counting what a caller's own record holds, where a
    damaged figure counts none of it instead of ending the count."""
    data: Any = value
    for _ in range(64):  # each round leaves one damaged field out
        try:
            return model.model_validate(data)
        except ValidationError as error:
            data = _without(data, error.errors()[0]["loc"])
    return model()


def _without(data: Any, where: tuple[int | str, ...]) -> Any:
    if not where or not isinstance(data, dict | list):
        return {} if isinstance(data, dict) else data
    head, rest = where[0], where[1:]
    if isinstance(data, dict):
        if not rest or head not in data:
            return {key: item for key, item in data.items() if key != head}
        return {**data, head: _without(data[head], rest)}
    if isinstance(head, int) and 0 <= head < len(data):
        if not rest:
            return [item for index, item in enumerate(data) if index != head]
        return [*data[:head], _without(data[head], rest), *data[head + 1:]]
    return data


def build_validators(*modules: ModuleType) -> None:
    """Build, now, the validators of every document model ``modules`` declare, where
    they would otherwise be built at their first use (``defer_build``): a session
    builds those its end needs while its chains wait on the network
    (:func:`..runtime.run.prepare_finish`), not after its last reply."""
    for module in modules:
        for value in vars(module).values():
            if (
                isinstance(value, type) and issubclass(value, RunDoc) and value.__module__ == module.__name__
                and not value.__pydantic_complete__
            ):
                value.model_rebuild()


__all__ = [
    "DAMAGED_ADVICE", "SCHEMA_VERSION", "DamagedDocument", "RunDoc", "SchemaVersion", "as_model",
    "build_validators", "problem_line", "read", "tolerant",
]
