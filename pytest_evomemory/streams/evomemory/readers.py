"""Read upstream source files in their native format into plain records.

Reading is also how a file is *validated*: a truncated parquet footer, a CSV without
its header, or a JSON line cut in half all fail here, so the materializer can tell a
partial download from a good one without trusting file names or sizes.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ...core import boundedread
from ...core.validation import unique_keys
from .sources import SourceFormat

Record = dict[str, Any]


class SourceFormatError(ValueError):
    """A source file cannot be read as the format and schema its spec promises."""


def read_records(
    format: SourceFormat, path: Path, fields: tuple[str, ...], optional: tuple[str, ...] = ()
) -> list[Record]:
    """All records of ``path`` in file order; raises :class:`SourceFormatError`.

    ``fields`` must be present; from a parquet file only ``fields`` and those of
    ``optional`` that exist are read (other formats keep every field)."""
    try:
        if format == "parquet":
            records = _read_parquet(path, fields, optional)
        elif format == "csv":
            records = _read_csv(path)
        else:
            records = _read_jsonl(path)
    except SourceFormatError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, csv.Error) as error:
        raise SourceFormatError(
            f"not a readable {format} file ({type(error).__name__}: {error})"
        ) from None
    except Exception as error:  # pyarrow raises its own ArrowException family
        raise SourceFormatError(
            f"not a readable {format} file ({type(error).__name__}: {error})"
        ) from None
    if not records:
        raise SourceFormatError("the file holds no records")
    missing = [name for name in fields if name not in records[0]]
    if missing:
        raise SourceFormatError(
            f"records lack the field(s) {', '.join(map(repr, missing))} of the upstream schema"
        )
    return records


def _read_parquet(path: Path, columns: tuple[str, ...], optional: tuple[str, ...]) -> list[Record]:
    import pyarrow.parquet as pq

    # Only the columns we convert: the full MMLU-Pro file also carries long
    # chain-of-thought texts that would only cost memory.
    # ParquetFile reads directly; pq.read_table would first set up the dataset
    # machinery, which costs about a second on a cold start for nothing here.
    source = pq.ParquetFile(path)
    schema_names = set(source.schema_arrow.names)
    missing = [name for name in columns if name not in schema_names]
    if missing:
        raise SourceFormatError(
            f"parquet schema lacks the column(s) {', '.join(map(repr, missing))} of the upstream schema"
        )
    wanted = list(columns) + [name for name in optional if name in schema_names]
    table = source.read(columns=list(dict.fromkeys(wanted)), use_threads=False)
    records: list[Record] = table.to_pylist()
    return records


def _read_csv(path: Path) -> list[Record]:
    text = boundedread.read_text(
        path, limit=boundedread.DOCUMENT_BYTES, what="a data file", error=SourceFormatError, encoding="utf-8-sig"
    )
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    if not reader.fieldnames:
        raise SourceFormatError("the CSV file has no header row")
    records = []
    width = len(reader.fieldnames)
    for row in reader:
        # DictReader puts surplus cells under None and fills short rows with None:
        # either means the row was cut or the quoting is broken.
        if None in row or any(value is None for value in row.values()):
            raise SourceFormatError(f"CSV row {reader.line_num} does not have the header's {width} columns")
        records.append(dict(row))
    return records


def _read_jsonl(path: Path) -> list[Record]:
    records = []
    with boundedread.open_regular(path, what="a data file", error=SourceFormatError) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                # a key given twice (json keeps the last one silently) as a user's task
                # file refuses it: an edited copy of an unpinned file must not pass a
                # second 'api_call' that replaces the first
                record = boundedread.loads(raw, depth=boundedread.MAX_ARTEFACT_DEPTH, object_pairs_hook=unique_keys)
            except boundedread.BoundExceeded as error:
                raise SourceFormatError(f"line {number}: {error}") from None
            except ValueError as error:  # not UTF-8, not JSON, a key twice
                raise SourceFormatError(f"line {number} is not valid JSON ({error})") from None
            if not isinstance(record, dict):
                raise SourceFormatError(f"line {number} is not a JSON object")
            records.append(record)
    return records
