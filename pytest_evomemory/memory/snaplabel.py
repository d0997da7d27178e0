"""A snapshot slot's label (``episodes.json``): its one byte format, written and read here.

The label is what makes a slot a snapshot: written only after the memory's own
snapshot returned, it names the stream, the run config, the completed episodes,
the memory system, a SHA-256 of every state file and of the record log prefix the
state stands on, and, last, a checksum of itself. Its body is serialized one way
only (:data:`CANONICAL`), so the checksum can be checked on reading.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import boundedread

LABEL = "episodes.json"
#: 3: the label names the run config that wrote it (``config``). A label of
#: another format is not read (it is passed over, as a damaged one is).
LABEL_FORMAT = 3
INVALID_LABEL = b"{}"


@dataclass(frozen=True)
class Label:
    stream: str
    #: the config fingerprint of the run that wrote it
    config: str
    episodes: int
    memory: str
    #: state file (relative, "/"-separated) -> sha256
    files: dict[str, str]
    #: log generation -> (bytes, sha256)
    logs: dict[int, tuple[int, str]]


#: The label's body, serialized one way only (its checksum is over these bytes).
CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def label_bytes(stream: str, config: str, episodes: int, memory: str, files: Mapping[str, str],
                 logs: Mapping[int, tuple[int, str]]) -> bytes:
    """The label: its canonical body, then ``"sha256"`` of that body, written last."""
    body = CANONICAL.encode({
        "format": LABEL_FORMAT, "stream": stream, "config": config, "episodes": episodes, "memory": memory,
        "files": files,
        "logs": {str(generation): [size, digest] for generation, (size, digest) in logs.items()},
    }).encode("ascii")
    return body[:-1] + b',"sha256":"' + hashlib.sha256(body).hexdigest().encode("ascii") + b'"}'


def label_digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(CANONICAL.encode(body).encode("ascii")).hexdigest()


HEX64 = re.compile(r"^[0-9a-f]{64}$")


def parse_label(data: bytes) -> tuple[Label | None, str]:
    """A slot's label, or None and what is wrong with it."""
    if not data.strip():
        return None, f"its label {LABEL} is empty (its save never finished)"
    try:
        value = boundedread.loads(data, depth=boundedread.MAX_ARTEFACT_DEPTH)
    except ValueError:
        return None, f"its label {LABEL} is cut short or not JSON (a save cut off, e.g. by a power cut)"
    if not isinstance(value, dict):
        return None, f"its label {LABEL} is not a JSON object"
    if not value:
        return None, f"it holds no finished snapshot (its label {LABEL} was invalidated: a save was interrupted)"
    if value.get("format") != LABEL_FORMAT:
        return None, (
            f"its label {LABEL} is in another format ({value.get('format', 1)!r}, this version writes "
            f"{LABEL_FORMAT}): it was written by another version of pytest-evomemory"
        )
    body = {key: item for key, item in value.items() if key != "sha256"}
    if value.get("sha256") != label_digest(body):
        return None, f"its label {LABEL} does not match its checksum (it was changed after it was written)"
    try:
        files = {str(name): str(digest) for name, digest in value["files"].items()}
        logs = {int(generation): (int(pair[0]), str(pair[1])) for generation, pair in value["logs"].items()}
        label = Label(
            str(value["stream"]), str(value["config"]), int(value["episodes"]), str(value["memory"]), files, logs
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None, f"its label {LABEL} lacks a field this version needs"
    return label, ""
