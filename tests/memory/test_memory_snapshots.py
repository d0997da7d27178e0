"""Resume: a memory's snapshot/restore gives back exactly the memory it had.

Run over every backend of the conformance suite that declares the capability
(all built-ins and the consolidating adapter); the keyword notebook, which does
not, proves the refusal.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_evomemory.core.errors import MemoryBackendError
from pytest_evomemory.memory import MemorySystem
from pytest_evomemory.memory.recordlog import RecordLog
from pytest_evomemory.memory.snapshot import (
    SNAPSHOT_SLOTS,
    ResumeRefused,
    SnapshotCapable,
    SnapshotDamaged,
    StreamSnapshots,
)
from pytest_evomemory.options import render
from tests.memory.example_adapter import KeywordNotebook

from .conftest import LIBRARY_EXTRAS, OpenMemory
from .test_memory_conformance import sentence

#: the run config fingerprint the snapshots are written under (a run's ``config_fingerprint``)
CONFIG = "a" * 64
QUERIES = ["river mountain", "quantum ledger signal", "harvest orbit", "velvet cipher lantern", "falcon"]


def capable(memory: MemorySystem) -> SnapshotCapable:
    if not isinstance(memory, SnapshotCapable):
        pytest.skip(f"{type(memory).__name__} does not implement snapshot/restore")
    return memory


def state(memory: MemorySystem) -> list[list[tuple[str, str, float, dict[str, object]]]]:
    """What the next recalls return: ids, contents, scores and metadata."""
    return [
        [(h.record_id, h.content, round(h.score, 9), dict(h.metadata)) for h in memory.recall(q, top_k=50)]
        for q in QUERIES
    ]


@pytest.mark.embedder_meaning
def test_restore_reproduces_records_ids_scores_and_later_ids(
    open_memory: OpenMemory, backend_id: str, tmp_path: Path
) -> None:
    rng = random.Random(3)
    original = capable(open_memory("s1"))
    snapshots = tmp_path / "snap"
    snapshots.mkdir()
    for episode in range(4):  # a snapshot after every episode, as the runtime takes them
        for index in range(3):
            original.retain(sentence(rng, 12), {"episode": episode, "index": index, "text": "ünï 東京 \\ \"q\""})
        original.snapshot(snapshots)
    expected = state(original)
    original.retain("falcon river: written after the last snapshot, so a crash loses it")
    original.close()

    restored = capable(open_memory("s1"))
    restored.restore(snapshots)
    assert len(expected[0]) > 0
    assert state(restored) == expected
    # the next record gets the id the uninterrupted memory would have given it
    twin = capable(open_memory("s2"))
    twin.restore(snapshots)
    # Mem0 and LangMem give each new record a random UUID: a later id cannot be
    # foretold for them, only the records a snapshot holds (compared above)
    if backend_id.partition("+")[0] not in LIBRARY_EXTRAS:
        assert restored.retain("the next falcon record") == twin.retain("the next falcon record")


def test_a_reset_between_snapshots_is_captured(open_memory: OpenMemory, tmp_path: Path) -> None:
    memory = capable(open_memory("s1"))
    for index in range(3):
        memory.retain(f"falcon sighting {index}")
    memory.snapshot(tmp_path)
    memory.reset()
    kept = memory.retain("falcon nest after the reset")
    memory.snapshot(tmp_path)
    fresh = capable(open_memory("s2"))
    fresh.restore(tmp_path)
    assert [hit.record_id for hit in fresh.recall("falcon", top_k=10)] == [kept]


def test_an_empty_memory_snapshots_and_restores_empty(open_memory: OpenMemory, tmp_path: Path) -> None:
    capable(open_memory("s1")).snapshot(tmp_path)
    fresh = capable(open_memory("s2"))
    fresh.restore(tmp_path)
    assert fresh.recall("anything falcon") == []


def test_a_save_killed_halfway_leaves_the_last_complete_snapshot(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, "inprocess")
    records = [{"id": i, "content": f"r{i}", "metadata": {}} for i in range(1, 4)]
    log.save(2, lambda last: [r for r in records[:2] if r["id"] > last], {"next_id": 3})
    with open(tmp_path / "records-1.jsonl", "ab") as handle:  # a torn append, no manifest update
        handle.write(b'{"id":3,"cont')
    assert log.load() == (records[:2], {"next_id": 3})
    log.save(3, lambda last: [r for r in records if r["id"] > last], {"next_id": 4})
    assert log.load() == (records, {"next_id": 4})


def test_a_snapshot_of_another_backend_is_refused(tmp_path: Path) -> None:
    RecordLog(tmp_path, "sqlite").save(0, lambda last: [], {})
    with pytest.raises(MemoryBackendError, match="not written by a inprocess memory"):
        RecordLog(tmp_path, "inprocess").load()


# --------------------------------------------------------------------------- StreamSnapshots


def test_stream_snapshots_keep_the_completed_prefix_whenever_the_process_dies(tmp_path: Path) -> None:
    from pytest_evomemory.memory.inprocess import InProcessMemory

    snapshots = StreamSnapshots(tmp_path / "memory" / "s1", "s1", CONFIG)
    memory = InProcessMemory()
    for episode in range(1, 4):
        memory.retain(f"episode {episode} lesson about falcons")
        snapshots.save(memory, episode)
    assert snapshots.completed_prefixes() == [1, 2, 3]

    # killed inside the memory's snapshot of episode 4, which reuses the slot of
    # episode 4 - SNAPSHOT_SLOTS: the slot lost its label
    memory.retain("episode 4 lesson about falcons")
    slot = tmp_path / "memory" / "s1" / f"slot-{4 % SNAPSHOT_SLOTS}"
    slot.mkdir(parents=True, exist_ok=True)
    (slot / "episodes.json").write_text("{}")
    assert snapshots.completed_prefixes() == [1, 2, 3]

    for completed, expected in ((3, 3), (0, 0)):
        fresh = InProcessMemory()
        snapshots.restore(fresh, completed)
        assert len(fresh) == expected
    with pytest.raises(
        SnapshotDamaged,
        match=r"no memory snapshot taken after episode 4 that is intact \(snapshots for: 1, 2, 3\): slot-4: it holds no",
    ):
        snapshots.restore(InProcessMemory(), 4)
    label = json.loads((tmp_path / "memory" / "s1" / "slot-3" / "episodes.json").read_text())
    assert {key: label[key] for key in ("stream", "episodes", "memory")} == {
        "stream": "s1", "episodes": 3, "memory": "InProcessMemory"
    }
    snapshots.clear()  # a fresh run into the same output directory
    assert snapshots.completed_prefixes() == []
    with pytest.raises(ResumeRefused):
        snapshots.restore(InProcessMemory(), 3)


def test_a_memory_without_the_capability_refuses_resume_and_says_what_it_needs(tmp_path: Path) -> None:
    snapshots = StreamSnapshots(tmp_path, "gpqa", CONFIG)
    notebook = KeywordNotebook()
    snapshots.save(notebook, 1)  # nothing to save, nothing written
    assert not any(tmp_path.iterdir())
    snapshots.restore(notebook, 0)  # a stream that had not started resumes empty
    with pytest.raises(ResumeRefused) as refused:
        snapshots.restore(notebook, 2)
    message = render(str(refused.value), "pytest")
    assert "stream 'gpqa': 2 episode(s) were completed" in message
    assert "KeywordNotebook cannot be resumed" in message
    assert "snapshot(directory) and restore(directory)" in message
    assert "without --evomemory-resume" in message


def test_stream_directories_are_safe_and_distinct(tmp_path: Path) -> None:
    plain = StreamSnapshots.for_stream(tmp_path, "gpqa_diamond", CONFIG)
    assert plain.directory == tmp_path / "memory" / "gpqa_diamond"
    odd = {StreamSnapshots.for_stream(tmp_path, name, CONFIG).directory for name in ("a/b", "a b", "a_b", "..")}
    assert len(odd) == 4
    assert all(path.parent == tmp_path / "memory" and path.name not in {".", ".."} for path in odd)


def test_a_re_run_episode_never_builds_on_the_killed_runs_snapshot(tmp_path: Path) -> None:
    """Killed after snapshotting episode 2 but before its result was recorded: the
    resumed run restores episode 1 and re-runs episode 2, whose records get the
    same ids with other contents — the slot must be rewritten, not appended to."""
    from pytest_evomemory.memory.inprocess import InProcessMemory

    snapshots = StreamSnapshots(tmp_path, "s1", CONFIG)
    killed = InProcessMemory()
    killed.retain("episode one: falcons nest on cliffs")
    snapshots.save(killed, 1)
    killed.retain("killed run, episode two: falcons eat mice")
    snapshots.save(killed, 2)  # the result journal never heard of episode 2

    resumed = InProcessMemory()
    snapshots.restore(resumed, 1)
    resumed.retain("resumed run, episode two: falcons dive fast")
    snapshots.save(resumed, 2)
    check = InProcessMemory()
    snapshots.restore(check, 2)
    assert sorted(hit.content for hit in check.recall("falcons", top_k=10)) == [
        "episode one: falcons nest on cliffs",
        "resumed run, episode two: falcons dive fast",
    ]


def test_a_restored_memory_recalls_exactly_as_the_warm_one_past_the_gathering_budget(
    open_memory: OpenMemory, backend_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a size where recall gathers with only the rarest words, fills from the
    newest records and counts frequencies incrementally, a memory restored from a
    snapshot (no counts, no caches) recalls exactly what the uninterrupted one does."""
    from pytest_evomemory.memory import _ranking

    if "sentence-transformers" in backend_id:
        pytest.skip("a model embedding hundreds of records takes minutes; hybrid ranking is covered by +hashing")
    if backend_id.partition("+")[0] in LIBRARY_EXTRAS:
        pytest.skip("the gathering budget is the built-in backends' recall; a library ranks with its own search")

    from .test_memory_recall_exhaustive import seeded_queries, seeded_store

    monkeypatch.setattr(_ranking, "GATHER_POSTINGS", 30)
    contents, words = seeded_store(seed=3, records=180)
    warm = capable(open_memory("s1"))
    queries = seeded_queries(contents, words, seed=8)
    snapshots = tmp_path / "snap"
    snapshots.mkdir()
    for index, content in enumerate(contents):
        warm.retain(content, {"n": index})
        if index % 45 == 44:
            for query in queries[:5]:  # recalls on the way warm up whatever a memory caches
                warm.recall(query)
            warm.snapshot(snapshots)
    restored = capable(open_memory("s2"))
    restored.restore(snapshots)
    for query in queries:
        for limit in (1, 4, 12):
            expected = [(h.record_id, h.content, round(h.score, 9)) for h in warm.recall(query, top_k=limit)]
            assert [(h.record_id, h.content, round(h.score, 9)) for h in restored.recall(query, top_k=limit)] == expected
    # and both go on alike
    assert warm.retain("lesson answer zzfresh") == restored.retain("lesson answer zzfresh")
    assert [h.record_id for h in warm.recall("zzfresh lesson")] == [h.record_id for h in restored.recall("zzfresh lesson")]
