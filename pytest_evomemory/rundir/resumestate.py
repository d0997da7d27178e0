"""What an interrupted run completed (:class:`ResumeState`), read from its run
directory, and whether the data it read is still the data a resume would read
(:func:`check_resume_data`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.errors import named
from ..rundocs import DAMAGED_ADVICE, Response, RunFile, Score
from ..rundocs.base import problem_line
from ..rundocs.records import crashed
from ..rundocs.wire import Event, FeedbackSkippedRecord
from .jsonl import DamagedRecords, iter_jsonl, read_jsonl, typed
from .layout import EVENTS, RESPONSES, SCORES, TRANSCRIPTS, RunDirError
from .reader import read_events, read_run_document

if TYPE_CHECKING:
    from ..streams import Stream

@dataclass
class ResumeState:
    """What an earlier, interrupted run completed."""

    #: stream -> number of leading tasks that are complete
    done: dict[str, int] = field(default_factory=dict)
    #: records to keep, in their original order
    responses: list[Response] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    #: the interrupted run's run.json
    document: RunFile = field(default_factory=RunFile)
    #: what the user is told before the resume runs (a damaged snapshot not trusted)
    notes: list[str] = field(default_factory=list)

    def is_done(self, stream: str, position: int) -> bool:
        return position < self.done.get(stream, 0)

    @property
    def completed_tasks(self) -> int:
        return sum(self.done.values())

    def truncate(self, stream: str, done: int, positions: Mapping[str, int]) -> None:
        """Keep only the first ``done`` completed episodes of ``stream`` (``positions``:
        task id -> position): the episodes after them run again, their records replaced."""
        if done >= self.done.get(stream, 0):
            return
        self.done[stream] = done

        def kept(task_stream: str, task_id: str | None) -> bool:
            return task_stream != stream or positions.get(str(task_id), done) < done

        # a conversation's ingestion turns precede every task: the snapshot the
        # stream continues from holds what they wrote
        self.responses = [r for r in self.responses if r.kind == "ingestion" or kept(r.stream, r.task_id)]
        self.scores = [s for s in self.scores if kept(s.stream, s.task_id)]
        self.events = [e for e in self.events if kept(*event_task(e))]

    def ingested(self, stream: str) -> bool:
        """Whether ``stream``'s conversation ingestion is among the kept records (kept
        only whole): its memory then continues from the snapshot that holds it."""
        return any(r.stream == stream and r.kind == "ingestion" for r in self.responses)

    def forget_ingestion(self, stream: str, ingestion_ids: Sequence[str]) -> None:
        """Drop ``stream``'s ingestion turns: its memory is ingested again (no
        snapshot holds the ingestion any more), and its turns are recorded anew."""
        wanted = set(ingestion_ids)
        self.responses = [
            r for r in self.responses if not (r.stream == stream and r.kind == "ingestion" and r.task_id in wanted)
        ]



def load_resume_state(run_dir: Path, streams: Sequence[Stream]) -> ResumeState:
    """Read an interrupted run's artefacts; a torn last line (SIGKILL) is ignored.

    Per stream, the completed episodes are the longest prefix of tasks that each have
    a score and either a feedback response, a failed feedback turn or a skipped one.
    """
    resume = named("resume")
    document = read_run_document(run_dir, resume)
    # A score edited or damaged by hand (a task id that is a list, or an id that is
    # not its position's) is treated like a torn line: its episode is incomplete and
    # runs again (said before the resume runs); so is an event that names
    # no task (a failure that is a string). A response cannot be left out so: its
    # episode would count as complete without it (a turn fewer), so it is refused, as
    # is a line that is no record or a record given twice (:func:`iter_jsonl`).
    responses: list[Response] = []
    for number, wire in enumerate(read_jsonl(run_dir / RESPONSES), 1):
        try:
            responses.append(Response.model_validate(wire))
        except ValidationError as error:
            if error.errors()[0]["loc"][:1] in (("stream",), ("task_id",)):
                raise DamagedRecords(
                    f"{resume} {run_dir}: {run_dir / RESPONSES}, record {number} names no stream and task "
                    f"(its 'stream' or 'task_id' is not text); {DAMAGED_ADVICE}",
                    option="resume",
                ) from None
            raise DamagedRecords(
                f"{resume} {run_dir}: {problem_line(run_dir / RESPONSES, error, number)}", option="resume"
            ) from None
    # a task whose process died (an xdist worker killed) is not over: it runs again,
    # as after a kill of the whole run, and with it every later task of its stream
    scores = [s for s in typed(Score, read_jsonl(run_dir / SCORES)) if s is not None and not crashed(s.error)]
    events = [e for e in read_events(run_dir / EVENTS) if not _crashed(e)]
    for transcript in sorted((run_dir / TRANSCRIPTS).glob("*.jsonl")):  # rewritten when the resume starts
        for _ in iter_jsonl(transcript):
            pass
    state = ResumeState(document=document)
    for stream in streams:
        position_of = {sample.task_id: sample.position for sample in stream.samples}
        scored: dict[str, Score] = {}
        for record in scores:
            if record.stream != stream.name:
                continue
            at = position_of.get(record.task_id)
            if at is not None and at != record.position:
                # an id edited or swapped: kept, the score would be another task's result
                state.notes.append(
                    f"{run_dir / SCORES}: the score of {stream.name!r} {record.task_id!r} is at position "
                    f"{record.position}, the task's is {at} (the file was edited); that episode runs again"
                )
                continue
            scored[record.task_id] = record
        fed_back = {r.task_id for r in responses if r.stream == stream.name and r.kind == "feedback"}
        ended = {task for name, task in map(event_task, events) if name == stream.name}
        done = 0
        for sample in stream.samples:  # a static-memory stream's episode has no feedback turn
            if sample.task_id not in scored or (stream.feedback and not (sample.task_id in fed_back or sample.task_id in ended)):
                break
            done += 1
        state.done[stream.name] = done
        kept_ids = {sample.task_id for sample in stream.samples[:done]}
        answered = kept_ids | _ingested(stream, responses)
        state.responses += [r for r in responses if r.stream == stream.name and r.task_id in answered]
        state.scores += [scored[task_id] for task_id in sorted(kept_ids, key=position_of.__getitem__)]
        state.events += [
            e for e in events if event_task(e)[0] == stream.name and event_task(e)[1] in kept_ids
        ]
    return state


def _ingested(stream: Stream, responses: Sequence[Response]) -> set[str]:
    """A conversation stream's ingestion turns, kept only when every session's turn is
    there (runtime/ingestion.py saves them whole); a partial ingestion runs again."""
    wanted = set(stream.ingestion_ids)
    seen = {r.task_id for r in responses if r.stream == stream.name and r.kind == "ingestion" and r.task_id in wanted}
    return seen if wanted and seen == wanted else set()


def _crashed(event: Event) -> bool:
    """A failure the death of the process running its task caused."""
    return not isinstance(event, FeedbackSkippedRecord) and event.failure.crashed


def event_task(event: Event) -> tuple[str, str | None]:
    """``(stream, task id)`` of the task an event ended (a failure or a skip)."""
    task = event.skipped if isinstance(event, FeedbackSkippedRecord) else event.failure
    return task.stream, task.task_id



class _DataFile(BaseModel):
    """What a resume reads of a stream's provenance (run.json's ``streams[].provenance``,
    the stream's own now): whether its file is pinned, its SHA-256 and its path."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    pinned: Any = None
    sha256: Any = None
    file: Any = None


def check_resume_data(document: RunFile, streams: Sequence[Stream], run_dir: Path) -> None:
    """Refuse to resume a stream whose unpinned data file changed since the interrupted run.

    A stream read from a user's local file (``benchmark: files``, or ``benchmark:
    locomo`` with ``path:``) has no pin: the file can be edited between the
    interruption and the resume while its path, and so the config fingerprint, stay
    the same. Its SHA-256 is in run.json (``streams[].provenance``); a resume whose
    file now hashes otherwise is refused, since the remaining tasks would be scored
    on other data than the finished ones. Pinned files are checked against their pin
    on every read already."""
    recorded = {entry.name: _DataFile.model_validate(entry.provenance) for entry in document.streams}
    for stream in streams:
        was = recorded.get(stream.name)
        now = _DataFile.model_validate(stream.provenance)
        if was is None or was.pinned is not False or now.pinned is not False:
            continue
        if was.sha256 and was.sha256 != now.sha256:
            raise RunDirError(
                f"{named('resume')} {run_dir}: stream {stream.name!r}: its data file {now.file} changed since the "
                f"interrupted run (sha256 {str(was.sha256)[:12]} then, {str(now.sha256)[:12]} now); "
                "the remaining tasks would be scored on other data, so put the file back as it was, or start a "
                "new run in another output directory",
                option="resume",
            )


__all__ = ["ResumeState", "check_resume_data", "event_task", "load_resume_state"]
