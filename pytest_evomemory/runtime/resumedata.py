"""A resume continues only on the bytes the interrupted run read.

A stream read from a user's local file (``benchmark: files``, or ``benchmark: locomo``
with ``path:``) has no pin: the file can be edited between the interruption and the
resume while its path, and so the config fingerprint, stay the same. Its SHA-256 is
in run.json (``streams[].provenance``); a resume whose file now hashes otherwise is
refused, since the remaining tasks would be scored on other data than the finished
ones. Pinned files are checked against their pin on every read already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import named
from ..rundir import RunDirError
from ..rundocs import RunFile
from ..streams import Stream


def check_resume_data(document: RunFile, streams: Sequence[Stream], run_dir: Path) -> None:
    """Refuse to resume a stream whose unpinned data file changed since the interrupted run."""
    recorded = {entry.name: entry.provenance for entry in document.streams}
    for stream in streams:
        was = recorded.get(stream.name)
        now = stream.provenance
        if not isinstance(was, Mapping) or was.get("pinned") is not False or now.get("pinned") is not False:
            continue
        if was.get("sha256") and was.get("sha256") != now.get("sha256"):
            raise RunDirError(
                f"{named('resume')} {run_dir}: stream {stream.name!r}: its data file {now.get('file')} changed since the "
                f"interrupted run (sha256 {str(was.get('sha256'))[:12]} then, {str(now.get('sha256'))[:12]} now); "
                "the remaining tasks would be scored on other data, so put the file back as it was, or start a "
                "new run in another output directory",
                option="resume",
            )


__all__ = ["check_resume_data"]
