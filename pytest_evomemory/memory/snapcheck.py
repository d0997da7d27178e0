"""Which of a stream's snapshots can be trusted: verification and the fallback to an earlier one.

Nothing is loaded from a slot before it verifies: its label (:mod:`.snaplabel`)
is this stream's, written under this run's config, and every state file and the
record log prefix it stands on hash to what the label says. A slot that does not
is passed over with the reason (:meth:`SnapshotChecks.distrusted`), and a resume
falls back to the newest one that does (:meth:`SnapshotChecks.newest_intact`).
:class:`~.snapshot.StreamSnapshots` writes and restores the slots these checks read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import named
from .base import SnapshotDamaged
from .snapfiles import log_name, prefix_digests, read_small, sha256_file, state_files
from .snaplabel import LABEL, Label, parse_label

#: Snapshots kept per stream, one slot each, used in turn. More than two, because
#: under xdist the results journal (written by the controller from the workers' reports)
#: can be a few episodes behind the snapshots a worker already saved when a whole run is
#: killed; resume needs the snapshot that matches the journal. One more slot
#: (``slot-<SNAPSHOT_SLOTS>``) stands in for the one holding the last durable snapshot.
SNAPSHOT_SLOTS = 8


@dataclass(frozen=True)
class SnapshotChecks:
    """The read side of one stream's snapshot slots under ``directory`` (see
    :class:`~.snapshot.StreamSnapshots` for the layout): which slots hold which
    episodes, which verify, and why one does not.

    ``config`` is the run config's fingerprint: only a slot whose label names it
    (and this stream) is this run's (:meth:`_own`).
    """

    directory: Path
    stream: str
    config: str

    def _own(self, label: Label) -> bool:
        """Whether a slot's label says this stream of this run config wrote it: the
        one test every reader and the saver apply (a slot of another stream or of
        another run's config is never restored, nor built on)."""
        return label.stream == self.stream and label.config == self.config

    @property
    def log_directory(self) -> Path:
        return self.directory / "log"

    def _slot_directories(self) -> list[tuple[int, Path]]:
        found = []
        try:
            entries = os.listdir(self.directory)
        except OSError:
            return []
        for name in entries:
            number = name.removeprefix("slot-")
            if name.startswith("slot-") and number.isdigit() and int(number) <= SNAPSHOT_SLOTS:
                found.append((int(number), self.directory / name))
        return sorted(found)

    def _labels(self) -> list[tuple[Label | None, Path]]:
        """Every slot's parsed label (None when missing or invalid) and its directory."""
        labels: list[tuple[Label | None, Path]] = []
        for _, slot in self._slot_directories():
            try:
                data = read_small(slot / LABEL)
            except OSError:
                labels.append((None, slot))
                continue
            labels.append((parse_label(data)[0], slot))
        return labels

    def completed_prefixes(self) -> list[int]:
        """Episode counts that a labelled snapshot of this stream exists for (labels
        only; :meth:`newest_intact` verifies the files too)."""
        return sorted(label.episodes for label, _ in self._labels() if label is not None and self._own(label))

    def newest_intact(self, at_most: int) -> int:
        """The largest episode count <= ``at_most`` whose snapshot verifies (label,
        state files and the log prefix it stands on), or 0 if none does."""
        candidates = sorted(
            ((label, slot) for label, slot in self._labels()
             if label is not None and self._own(label) and 0 < label.episodes <= at_most),
            key=lambda item: -item[0].episodes,
        )
        digests = self._log_digests(label for label, _ in candidates)
        for label, slot in candidates:
            if not self._problem(label, slot, digests):
                return label.episodes
        return 0

    def verify(self, completed: int) -> Path:
        """The slot holding the verified snapshot after ``completed`` episodes, or
        :class:`SnapshotDamaged` saying which slot and what is wrong."""
        slot, problem = self._find(completed)
        if problem:
            raise SnapshotDamaged(self._damage_message(slot, completed, problem), path=os.fspath(slot), problem=problem)
        return slot

    def intact(self, completed: int) -> bool:
        """Whether the snapshot after ``completed`` episodes exists and verifies."""
        return not self._find(completed)[1]

    def distrusted(self, completed: int) -> str:
        """Why the snapshot after ``completed`` episodes cannot be restored ("<slot>:
        <problem>"), or "" when it verifies."""
        slot, problem = self._find(completed)
        return f"{slot.name}: {problem}" if problem else ""

    def refuse_foreign(self) -> None:
        """Refuse (:class:`SnapshotDamaged`, one line) a resume whose stream would
        restore from this directory while it holds a slot of this stream written
        under another run config: copied in from another run (another config, another
        replicate's seed), it verifies but is not the memory the recorded episodes
        built, and which of the slots are this run's nobody can tell any more."""
        for label, slot in self._labels():
            if label is not None and label.stream == self.stream and not self._own(label):
                problem = self._foreign_problem(label)
                raise SnapshotDamaged(
                    f"{named('resume')}: stream {self.stream!r}: the memory snapshots in {self.directory} were written by "
                    f"another run's config, not by this run ({slot.name}/{LABEL} names config {label.config[:12]}, "
                    f"this run's is {self.config[:12]}); nothing was restored, since "
                    "the rest of the stream would continue from a memory its recorded episodes never built; put "
                    f"back this run's own {self.directory.parent.name}/{self.directory.name}/ directory, or run "
                    f"again without {named('resume')}",
                    path=os.fspath(slot), problem=problem,
                )

    def _foreign_problem(self, label: Label) -> str:
        return f"it was written by another run's config (config {label.config[:12]}, this run's {self.config[:12]})"

    def _find(self, completed: int) -> tuple[Path, str]:
        """The slot labelled ``completed`` that verifies and "", or the slot that
        should hold it and what is wrong with it."""
        found: list[tuple[Label, Path]] = []
        others: dict[Path, str] = {}
        for _, slot in self._slot_directories():
            path = slot / LABEL
            try:
                data = read_small(path)
            except FileNotFoundError:
                others[slot] = f"its label {LABEL} is missing"
                continue
            except OSError as error:
                others[slot] = f"its label {LABEL} cannot be read ({error.strerror or error})"
                continue
            label, problem = parse_label(data)
            if label is None:
                others[slot] = problem
            elif label.stream != self.stream:
                others[slot] = f"it belongs to stream {label.stream!r}, not {self.stream!r}"
            elif not self._own(label):
                others[slot] = self._foreign_problem(label)
            elif label.episodes == completed:
                found.append((label, slot))
        problems = []
        for label, slot in found:
            problem = self._problem(label, slot, self._log_digests([label]))
            if not problem:
                return slot, ""
            problems.append((slot, problem))
        if not problems:
            # No label says `completed`: the slot that should hold it tells why.
            expected = [self.directory / f"slot-{completed % SNAPSHOT_SLOTS}", self.directory / f"slot-{SNAPSHOT_SLOTS}"]
            for slot in expected:
                if slot in others:
                    problems.append((slot, others[slot]))
            if not problems:
                problems.append((expected[0], "it does not exist" if not expected[0].exists() else
                                 "it holds another episode's snapshot"))
        return problems[0]

    def _damage_message(self, slot: Path, completed: int, problem: str) -> str:
        intact = self.newest_intact(completed - 1) if completed > 1 else 0
        available = ", ".join(map(str, self.completed_prefixes())) or "none"
        fallback = (
            f"the newest intact snapshot is after episode {intact} (the episodes after it would have to run again)"
            if intact else "no earlier snapshot of this stream is intact"
        )
        return (
            f"stream {self.stream!r}: {completed} episode(s) were completed, but {self.directory} holds no "
            f"memory snapshot taken after episode {completed} that is intact (snapshots for: {available}): "
            f"{slot.name}: {problem}; nothing was loaded from it, since the remaining tasks would see another "
            f"memory than the one their scores came from; {fallback}; run the stream again without "
            f"{named('resume')}"
        )

    def _log_digests(self, labels: Iterable[Label]) -> dict[tuple[int, int], str | None]:
        """sha256 of every log prefix the labels stand on, one pass per log."""
        wanted: dict[int, set[int]] = {}
        for label in labels:
            for generation, (size, _) in label.logs.items():
                wanted.setdefault(generation, set()).add(size)
        digests: dict[tuple[int, int], str | None] = {}
        for generation, sizes in wanted.items():
            path = os.path.join(os.fspath(self.log_directory), log_name(generation))
            try:
                found = prefix_digests(path, sizes)
            except OSError:
                found = dict.fromkeys(sizes)
            digests.update({(generation, size): digest for size, digest in found.items()})
        return digests

    def _problem(self, label: Label, slot: Path, log_digests: Mapping[tuple[int, int], str | None]) -> str:
        """What is wrong with a labelled slot, or "" when every byte it names verifies."""
        state = slot / "state"
        try:
            present = state_files(state)
        except OSError as error:
            return f"its state directory cannot be read ({error.strerror or error})"
        for name in sorted(set(label.files) - set(present)):
            return f"state/{name} is missing"
        for name in sorted(set(present) - set(label.files)):
            return f"state/{name} is not part of the snapshot its label describes"
        for name, path in sorted(present.items()):
            try:
                digest = sha256_file(path)
            except OSError as error:
                return f"state/{name} cannot be read ({error.strerror or error})"
            if digest != label.files[name]:
                return f"state/{name} does not match its checksum (changed or cut short after it was written)"
        for generation, (size, expected) in sorted(label.logs.items()):
            name = f"log/{log_name(generation)}"
            path = os.path.join(os.fspath(self.log_directory), log_name(generation))
            if not os.path.exists(path):
                return f"{name} is missing"
            prefix = log_digests.get((generation, size))
            if prefix is None:
                return f"{name} is shorter than the {size} bytes the snapshot stands on (cut short)"
            if prefix != expected:
                return f"{name} does not match its checksum (changed or cut short after it was written)"
        return ""


__all__ = ["SNAPSHOT_SLOTS", "SnapshotChecks"]
