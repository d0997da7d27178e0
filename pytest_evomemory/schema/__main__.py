"""``python -m pytest_evomemory.schema``: regenerate artefacts.schema.json from the models."""

from __future__ import annotations

from .generate import write_schema

if __name__ == "__main__":
    print(f"wrote {write_schema()}")
