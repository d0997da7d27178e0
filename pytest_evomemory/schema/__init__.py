"""The JSON Schema of every document a run writes, shipped with the package.

``artefacts.schema.json`` (JSON Schema 2020-12) holds one definition per artefact
under ``$defs``; :data:`ARTEFACTS` maps each artefact to its definition, and
:func:`schema_for` gives the schema a validator checks one document against::

    import json, jsonschema
    from pytest_evomemory.schema import schema_for

    summary = json.load(open("evomemory-results/sample_memory/summary.json"))
    jsonschema.Draft202012Validator(schema_for("summary.json")).validate(summary)

The schema's ``$id`` and each document's ``schema_version`` carry the version
(``rundir.SCHEMA_VERSION``); docs/artefacts.md describes every field. This module
reads a file and imports nothing else of the package, so any layer (and a
dashboard's code) may use it; validating needs the ``jsonschema`` library, which
the package does not depend on.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

#: The schema file, inside the installed package.
SCHEMA_FILE = Path(__file__).with_name("artefacts.schema.json")

#: Artefact -> its definition in the schema's ``$defs``.
ARTEFACTS: dict[str, str] = {
    "run.json": "run_json",
    "summary.json": "summary_json",
    "scores.jsonl": "score",
    "responses.jsonl": "response",
    "compare.json": "compare_json",
    "arms.json": "arms_json",
    "replicates.json": "replicates_json",
    "json-report": "json_report",
    "json-report task metadata": "task_metadata",
}


@cache
def load_schema() -> dict[str, Any]:
    """The whole schema document (all definitions)."""
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


def schema_for(artefact: str) -> dict[str, Any]:
    """The schema one document of ``artefact`` (a key of :data:`ARTEFACTS`, or a
    definition's name) must satisfy; a JSONL artefact's schema is one line's."""
    definition = ARTEFACTS.get(artefact, artefact)
    schema = load_schema()
    if definition not in schema["$defs"]:
        known = ", ".join(sorted({*ARTEFACTS, *schema["$defs"]}))
        raise KeyError(f"no schema for {artefact!r}; known: {known}")
    return {**schema, "$ref": f"#/$defs/{definition}"}


__all__ = ["ARTEFACTS", "SCHEMA_FILE", "load_schema", "schema_for"]
