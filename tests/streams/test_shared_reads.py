"""A session's arms read a stream file once (``streams.jsonl.shared_reads``), and
again once the file changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pytest_evomemory.streams.jsonl import read_jsonl_stream, shared_reads


def _write(path: Path, targets: list[str]) -> None:
    path.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"q{i}", "target": t}) + "\n" for i, t in enumerate(targets)),
        encoding="utf-8",
    )


def test_a_stream_file_is_read_once_while_shared_and_again_once_it_changed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write(path, ["a", "b"])
    with shared_reads():
        first = read_jsonl_stream(path, "s", "exact")
        assert read_jsonl_stream(path, "s", "exact") is first  # a second arm: the same stream
        assert read_jsonl_stream(path, "s", "exact", limit=1) is not first  # other settings: read
        before = path.stat()
        _write(path, ["a", "c"])  # the same size, in place (the same inode) ...
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ... and the old modification time
        again = read_jsonl_stream(path, "s", "exact")  # the change time differs: read again
        assert [sample.target for sample in again.samples] == ["a", "c"]
        assert again.provenance["sha256"] != first.provenance["sha256"]
    outside = read_jsonl_stream(path, "s", "exact")
    assert outside is not again and outside == again  # nothing kept once closed
