"""Replacing a file so that a reader sees the old content or the new, never half.

Every artefact a reader may open while it is written goes through here: run.json and
summary.json (a dashboard polls them), report.html (a browser), the model response
cache and hash cache (other xdist workers read them), dataset manifests and memory
snapshot state. The new content goes to a temporary file beside the target (the same
file system, so the rename is atomic), named for this process and thread so that
concurrent writers never share one, created with the usual permissions (the umask's,
as any other artefact), and renamed over the target; on any failure it is removed.
No fsync: what must survive a power cut (memory snapshots) syncs itself where it
decides (:mod:`..memory.snapshot`), and a killed process loses nothing the kernel holds.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterable
from pathlib import Path

_NUMBERS = itertools.count()


def write_atomically(path: Path, content: str | bytes | Iterable[str], *, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``content`` (text, bytes, or text in pieces written as
    they come, so a large page is never held whole). Raises what the system raises
    (``OSError``) and, for text ``encoding`` cannot hold, ``UnicodeEncodeError``."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-{next(_NUMBERS)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if isinstance(content, bytes):
            with os.fdopen(descriptor, "wb") as raw:
                raw.write(content)
        else:
            with os.fdopen(descriptor, "w", encoding=encoding, newline="") as text:
                for piece in [content] if isinstance(content, str) else content:
                    text.write(piece)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


__all__ = ["write_atomically"]
