"""Whether a file is still the one read: its stamp, taken before the read and
compared when the read is to be used again.

A process that keeps what it read of a file for later (a session's arms sharing one
read of a stream file, a finished arm kept for the session's comparison) takes it
again only while the file's stamp is unchanged, and reads the file again otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

#: A file's inode, size, modification and change times (nanoseconds).
Stamp = tuple[int, int, int, int]


def file_stamp(path: Path | str) -> Stamp | None:
    """``path``'s stamp, or ``None`` when it cannot be read (missing, unreadable).

    The inode tells a file replaced (renamed over) from one rewritten; the change
    time catches an edit in place that kept the size and set the modification time
    back (``touch -d``, a restore keeping times), which the other three miss."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


__all__ = ["Stamp", "file_stamp"]
