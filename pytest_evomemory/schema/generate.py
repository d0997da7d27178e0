"""Generate ``artefacts.schema.json`` from the run documents' models.

The schema is not written by hand: every document a run writes is a model in
:mod:`pytest_evomemory.rundocs`, and this module turns the models into one JSON
Schema (2020-12) document, one definition per document and per part they share
(``stream_metrics``, ``model_identity``, ...), the JSON report's block and a task
test's metadata included. No definition is written by hand.

Regenerate after changing a model::

    python -m pytest_evomemory.schema

tests/test_schema.py fails while the shipped file and the models differ.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ..config.agent import PROVIDER_KEYS, ModelConfig, foreign_keys
from ..options import GAIN_REQUIRES
from ..rundocs import (
    SCHEMA_VERSION,
    ArmsFile,
    Response,
    RunFile,
    Score,
    Summary,
    SummaryFile,
    TranscriptEntry,
)
from ..rundocs.compare import Comparison, Replicates
from ..rundocs.report import JsonReport
from ..rundocs.taskmeta import TaskMetadata

#: Each document's definition name (what :data:`pytest_evomemory.schema.ARTEFACTS` names).
DOCUMENTS: dict[str, type[BaseModel]] = {
    "run_json": RunFile,
    "summary_json": SummaryFile,
    "summary": Summary,
    "score": Score,
    "response": Response,
    "transcript_entry": TranscriptEntry,
    "arms_json": ArmsFile,
    "compare_json": Comparison,
    "replicates_json": Replicates,
    "json_report": JsonReport,
    "task_metadata": TaskMetadata,
}

#: Definitions named apart from their class (the names the schema has always used).
_NAMES = {
    "StreamSummary": "stream_metrics",
    "GroupSummary": "group_metrics",
    "ToolCallDoc": "tool_call",
    "ArmEntryDoc": "arm_entry",
    "ShardRecord": "shard",
    "MergedRecord": "merged",
    "Scope": "comparison_scope",
    "ArmScope": "replicate_arm_scope",
    "DifferenceScope": "replicate_difference_scope",
    "GainDoc": "gain",
}

#: Definitions that are a model or null wherever they are used.
_NULLABLE = ("memory_identity", "model_identity")

def _config_model() -> dict[str, Any]:
    """run.json's model section as the agent config declares it: one of its providers
    (``ModelConfig.provider``), holding none of the keys only other providers read, and
    naming its model where the provider reads ``model`` (``PROVIDER_KEYS``)."""
    providers = list(get_args(ModelConfig.model_fields["provider"].annotation))
    rules: list[dict[str, Any]] = []
    for provider in providers:
        then: dict[str, Any] = {"not": {"anyOf": [{"required": [key]} for key in sorted(foreign_keys(provider))]}}
        if "model" in PROVIDER_KEYS.get(provider, ()):
            then["required"] = ["model"]
        rules.append({"if": {"properties": {"provider": {"const": provider}}}, "then": then})
    section = {"type": "object", "properties": {"provider": {"enum": providers}}, "required": ["provider"], "allOf": rules}
    return {"anyOf": [section, {"type": "null"}]}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _tidy(value: Any, *, schema: bool = True) -> Any:
    """The schema without pydantic's titles and defaults (a reader's defaults, not
    the writer's contract); the names under ``properties`` are kept as they are."""
    if isinstance(value, list):
        return [_tidy(item) for item in value]
    if not isinstance(value, dict):
        return value
    if not schema:  # a map of names to schemas
        return {name: _tidy(item) for name, item in value.items()}
    return {
        key: _tidy(item, schema=key not in ("properties", "patternProperties", "$defs"))
        for key, item in value.items()
        if key not in ("title", "default")
    }


def build_schema() -> dict[str, Any]:
    """The whole schema document, generated from the models."""
    keys, generated = models_json_schema(
        [(model, "validation") for model in DOCUMENTS.values()], ref_template="#/$defs/{model}"
    )
    definitions: dict[str, Any] = generated.get("$defs", {})
    renamed = {name: _NAMES.get(name, _snake(name)) for name in definitions}
    for document, model in DOCUMENTS.items():
        reference = keys[(model, "validation")]["$ref"].rsplit("/", 1)[1]
        renamed[reference] = document
    text = json.dumps(definitions)
    for old, new in renamed.items():
        text = text.replace(f'"#/$defs/{old}"', f'"#/$defs/{new}"')
    models = {renamed[name]: schema for name, schema in json.loads(text).items()}
    for name in _NULLABLE:
        models[name] = {"anyOf": [models[name], {"type": "null"}]}
    # a gate's requirement is one of the option's choices, declared with the option
    models["gain"]["properties"]["requires"]["enum"] = list(GAIN_REQUIRES)
    # a model section's providers and their keys are the agent config's
    models["configured_agent"]["properties"]["model"] = _config_model()
    models["configured_run"]["properties"]["agent"]["properties"]["model"] = _config_model()
    every = _tidy(models, schema=False)
    documents = ", ".join(sorted(DOCUMENTS))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:pytest-evomemory:artefacts:{SCHEMA_VERSION}",
        "title": f"pytest-evomemory artefacts, schema_version {SCHEMA_VERSION}",
        "description": (
            "Every JSON document a run writes, one definition each under $defs, generated from the models in "
            f"pytest_evomemory.rundocs ({documents}; json_report is the evomemory block of pytest-json-report's "
            "report, task_metadata a task test's metadata.evomemory). docs/artefacts.md describes each field. Validate a document against one definition "
            'with {"$ref": "#/$defs/<name>"} beside this document\'s $defs (pytest_evomemory.schema.schema_for does '
            "that)."
        ),
        "$defs": dict(sorted(every.items())),
    }


def schema_text() -> str:
    """The schema file's text, as it is shipped."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=True) + "\n"


def write_schema(path: Path | None = None) -> Path:
    """Write the generated schema to ``path`` (the shipped file by default)."""
    from . import SCHEMA_FILE

    target = path or SCHEMA_FILE
    target.write_text(schema_text(), encoding="ascii")
    return target


__all__ = ["DOCUMENTS", "build_schema", "schema_text", "write_schema"]
