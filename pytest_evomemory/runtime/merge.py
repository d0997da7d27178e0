"""Merging the shards of a session into the run of the whole session.

``evomemory merge SHARD_DIR... --output-dir DIR`` reads the run directories the
shards of one plan wrote (:mod:`.shards`: each holds some cells, every arm's run
of a stream, or one arm's) and writes what one machine would have written: one run directory
(or, for a session of several arms, one per arm, their ``arms.json`` and the
comparison), its records in stream order, and its summary, thresholds, report
and comparison recomputed from the merged per-task records by the code every
run uses (:class:`~.records.ResultCollector`,
:func:`~..analysis.summary.check_thresholds`; the pages by the renderers the
command hands it, :class:`~.reports.Reports`). With a deterministic agent the
merged scores and summary equal the unsharded run's, record for record (times
aside).

Refused, each problem one line naming the shards (:func:`check_shards`): a
directory that holds no shard's run, shards of different plans (configs,
options or shard counts), a shard given twice (overlapping cells), a shard
missing (its cells named). A shard that did not finish is merged as far as it
ran and named (:attr:`ShardRun.incomplete`): the merged run is incomplete too,
and ``--resume`` of the merged directory runs the rest on one machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.summary import (
    StreamMetrics,
    ThresholdResult,
    check_thresholds,
    outcome,
    records_disagree,
    summarize,
)
from ..config import arm_label
from ..core.errors import EvoMemoryError, ReportError, named
from ..memory.snapshot import StreamSnapshots
from ..models.identity import describe_model
from ..rundir import (
    ARMS_MANIFEST,
    DAMAGED_ADVICE,
    EVENTS,
    RESPONSES,
    RUN_DOCUMENT,
    SCORES,
    SUMMARY,
    TRANSCRIPTS,
    RunDirError,
    RunLock,
    RunReader,
    RunWriter,
    check_output_dir,
    event_task,
    iter_jsonl,
    misnamed_scores,
    move_previous_run_aside,
    newer_schema,
    other_run,
    read_arms_manifest,
    read_complete,
    utc_now,
    write_arms_manifest,
)
from ..rundocs import (
    SCHEMA_VERSION,
    Completion,
    DamagedDocument,
    MergedRecord,
    Response,
    RunFile,
    Score,
    ShardThresholds,
    StreamRan,
    Summary,
    TranscriptEntry,
    read,
)
from ..rundocs.base import Doc
from ..rundocs.wire import Event
from .records import ResultCollector
from .replicates import replicate_groups
from .reports import Reports
from .shards import SHARD_FIELD, ShardPlan

#: How the merge names itself in messages.
MERGE = "evomemory merge"

#: The keys :meth:`ResultCollector.summary` writes; every other key of a shard's
#: summary (the run's name, fingerprint, versions, the driver's wall time) is the
#: run's own, carried into the merged summary.
_COLLECTED = frozenset({
    "started", "finished", "streams", "overall", "thresholds", "categories", "thresholds_met", "passed",
    "failed_episodes", "skipped_feedback", "completion", "ran", "schema_version", "write_failure", "methods",
})


class MergeRefused(EvoMemoryError):
    """The shards cannot be merged; ``problems`` says why, one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class ShardRun:
    """One shard's output directory, as the merge reads it."""

    directory: Path
    index: int
    plan: ShardPlan
    #: arm name -> the arm's run directory in this shard (one arm: the directory itself)
    arm_dirs: dict[str, Path]
    documents: dict[str, RunFile]
    summaries: dict[str, Summary | None]
    #: from the arms' manifest (a session of several arms): each arm's run config
    config_paths: dict[str, str] = field(default_factory=dict)
    #: from the arms' manifest: the session's ``set`` overrides
    overrides: tuple[str, ...] = ()
    #: from the arms' manifest: the command line's replicates per arm, if it gave them
    repeats: int | None = None

    @property
    def label(self) -> str:
        return f"shard {self.index}/{self.plan.count} ({self.directory})"

    def arm_incomplete(self, arm: str) -> str | None:
        """Why this shard's run of ``arm`` is not complete (no summary, or one whose
        completion says so), else None."""
        summary = self.summaries.get(arm)
        if summary is None:
            return f"no {SUMMARY} (still running, or killed before it ended)"
        completion = summary.completion
        if completion.complete:
            return None
        return (f"{completion.tasks_run} of {completion.tasks_planned} planned tasks ran "
                f"({completion.reason or 'incomplete'})")

    @property
    def incomplete(self) -> str | None:
        """Why this shard's run is not complete (any arm's), else None."""
        reasons = [
            (f"arm {arm!r}: " if len(self.summaries) > 1 else "") + reason
            for arm in self.summaries if (reason := self.arm_incomplete(arm))
        ]
        return "; ".join(reasons) or None


def read_shard(directory: Path) -> ShardRun:
    """The shard run in ``directory``; :class:`MergeRefused` when it holds none."""
    if not directory.is_dir():
        raise MergeRefused([f"{directory} is not a directory: give the output directories of the shards"])
    arm_dirs: dict[str, Path] = {}
    config_paths: dict[str, str] = {}
    overrides: tuple[str, ...] = ()
    repeats: int | None = None
    if (directory / ARMS_MANIFEST).exists():
        manifest = read_arms_manifest(directory, MERGE)
        assert manifest is not None  # the file exists: read, or refused
        overrides, repeats = manifest.overrides, manifest.repeats
        for entry in manifest.entries:
            if Path(entry.run_dir).is_absolute():
                raise MergeRefused([
                    f"{directory}: arm {entry.name!r} was written outside it ({entry.run_dir}); run the shards with "
                    f"{named('output-dir')} so that every arm lives inside the shard's directory"
                ])
            arm_dirs[entry.name] = directory / entry.run_dir
            config_paths[entry.name] = entry.config
    elif (directory / RUN_DOCUMENT).exists():
        arm_dirs[""] = directory
    else:
        raise MergeRefused([
            f"{directory} holds no run ({RUN_DOCUMENT} or {ARMS_MANIFEST}): a shard that ran nothing, or not a "
            "shard's output directory"
        ])
    documents: dict[str, RunFile] = {}
    summaries: dict[str, Summary | None] = {}
    found: tuple[int, ShardPlan] | None = None
    for arm, run_dir in arm_dirs.items():
        reader = RunReader(run_dir)
        raw = reader.recorded_run()
        if raw is None:
            damaged = reader.run_path.exists() or reader.run_path.is_symlink()
            raise MergeRefused([
                f"{reader.run_path} is damaged (not a JSON object): the file was edited or cut; run that "
                "shard again" if damaged else f"{run_dir}: no {RUN_DOCUMENT}; the shard did not start this arm"
            ])
        newer = newer_schema(reader.run_path, raw)
        if newer is not None:
            raise MergeRefused([newer])
        if SHARD_FIELD not in raw:
            raise MergeRefused([
                f"{run_dir}: its {RUN_DOCUMENT} records no shard: a run of the whole session, not a shard "
                f"(give only directories written with {named('shard')}=I/N)"
            ])
        try:
            recorded = ShardPlan.from_record(raw[SHARD_FIELD])
        except ValueError as error:
            raise MergeRefused([f"{run_dir}: {RUN_DOCUMENT}: {error}"]) from None
        document = _read(RunFile, reader.run_path, raw)
        assert document is not None
        if found is not None and (found[0] != recorded[0] or not found[1].same_plan(recorded[1])):
            raise MergeRefused([f"{directory}: its arms record different shards (the directory was edited)"])
        found = recorded
        # an arm by its label, as the plan names it (a replicate's run name is its arm's)
        name = arm or str(document.run.name or arm)
        documents[name] = document
        summaries[name] = _read_summary(reader, document)
        if arm == "":
            arm_dirs = {name: run_dir}
    assert found is not None
    if len(found[1].arms) > 1 and not (directory / ARMS_MANIFEST).exists():
        # one arm's (or replicate's) run directory inside a shard, given for the shard
        ((name, document),) = documents.items()
        inside = arm_label(name, document.replicate.index if document.replicate is not None else None)
        holder = next((parent for parent in directory.parents[:3] if (parent / ARMS_MANIFEST).exists()), None)
        raise MergeRefused([
            f"{directory} is the run directory of {inside!r}, one of the {len(found[1].arms)} arms of a shard; give "
            f"the shard's output directory, the one holding {ARMS_MANIFEST}"
            + (f": {holder}" if holder is not None else "")
        ])
    if set(documents) != set(found[1].arms):
        raise MergeRefused([
            f"{directory}: its arms ({', '.join(sorted(documents))}) are not its plan's ({', '.join(found[1].arms)}); "
            "the directory was edited"
        ])
    return ShardRun(directory, found[0], found[1], arm_dirs, documents, summaries, config_paths, overrides, repeats)


def check_shards(shards: Sequence[ShardRun]) -> list[str]:
    """Every reason the shards do not make one session, one line each: different
    plans, a shard given twice, a shard (with cells) missing."""
    problems: list[str] = []
    first = shards[0]
    for shard in shards[1:]:
        difference = first.plan.difference(shard.plan)
        if difference:
            problems.append(
                f"{first.label} and {shard.label} are shards of different plans: {difference}; merge only the "
                "shards of one session (the same configs and options, the same N)"
            )
    if problems:
        return problems
    problems += disagreements(shards)
    seen: dict[int, ShardRun] = {}
    for shard in shards:
        if shard.index in seen:
            held = ", ".join(shard.plan.cells_of(shard.index)) or "no cell"
            problems.append(
                f"{seen[shard.index].directory} and {shard.directory} both hold shard {shard.index}/{shard.plan.count} "
                f"(cells {held}): their cells overlap; give one of them"
            )
        seen.setdefault(shard.index, shard)
    for index in range(1, first.plan.count + 1):
        cells = first.plan.cells_of(index)
        if index not in seen and cells:
            problems.append(
                f"shard {index}/{first.plan.count} is missing (cells {', '.join(cells)}): give its output directory too"
            )
    return problems


#: The packages whose version changes a result (scoring, data loading): shards that ran
#: different ones measured different things. The test runner's own are not among them.
RESULT_PACKAGES = ("pytest-evomemory", "math-verify", "datasets", "huggingface-hub")


def disagreements(shards: Sequence[ShardRun]) -> list[str]:
    """Every way the shards of one plan ran differently where a result depends on it,
    one line each naming it and the two shards: a package version
    (:data:`RESULT_PACKAGES`), a stream's data file (its SHA-256), or an arm's model
    (the identity each shard recorded: the server-reported names, the local file's
    hash). One plan guarantees the same configs; this is what the configs cannot say."""
    problems: list[str] = []
    versions: dict[str, tuple[str, ShardRun]] = {}
    data: dict[str, tuple[str, ShardRun]] = {}
    models: dict[str, tuple[str, ShardRun]] = {}
    advice = "run every shard with the same installation and data, then merge"
    for shard in shards:
        for arm, document in shard.documents.items():
            recorded = document.versions.written()
            for package in RESULT_PACKAGES:
                _agree(versions, package, str(recorded.get(package)), shard, problems,
                       f"{package} {{first}} and {{other}}")
            for stream in document.streams:
                sha256 = stream.provenance.get("sha256")
                if isinstance(sha256, str):
                    _agree(data, str(stream.name), sha256, shard, problems,
                           "stream {key!r}'s data file (sha256) {first} and {other}")
            summary = shard.summaries.get(arm)
            ran = (summary.ran if summary is not None and summary.ran else None) or document.ran or {}
            for parts in ran.values():
                if parts.model is not None:
                    _agree(models, arm, describe_model(parts.model), shard, problems,
                           "arm {key!r}'s model {first} and {other}" if len(shard.documents) > 1 else
                           "the model {first} and {other}")
    return [f"{problem}; {advice}" for problem in dict.fromkeys(problems)]


def _agree(
    seen: dict[str, tuple[str, ShardRun]], key: str, value: str, shard: ShardRun, problems: list[str], what: str
) -> None:
    """Record ``value`` for ``key``; a second, different one is a problem naming both shards."""
    first = seen.setdefault(key, (value, shard))
    if first[0] != value:
        problems.append(
            "the shards disagree on " + what.format(key=key, first=f"{first[0]!r} ({first[1].label})",
                                                   other=f"{value!r} ({shard.label})")
        )


@dataclass
class MergedArm:
    """One arm's merged run."""

    name: str
    run_dir: Path
    summary: Summary
    metrics: dict[str, StreamMetrics]
    thresholds: list[ThresholdResult]
    report_error: str | None = None

    @property
    def failed(self) -> bool:
        """As a run's: incomplete, or not passed with a threshold set or a failed episode
        (:attr:`..runtime.arm.Arm.failed`), or its report not written."""
        summary = self.summary
        return bool(self.report_error) or not summary.completion.complete or (
            not summary.passed and bool(self.thresholds or summary.failed_episodes)
        )


@dataclass
class Merged:
    """What a merge wrote."""

    arms: list[MergedArm]
    #: the shards that did not finish, one line each
    incomplete: list[str]
    comparison: dict[str, Any] | None = None
    comparison_files: tuple[Path, Path] | None = None
    #: a repeated session's comparison across replicates (replicates.json) and its files
    replicates: dict[str, Any] | None = None
    replicate_files: list[Path] = field(default_factory=list)


def merge_shards(
    directories: Sequence[Path], output: Path, reports: Reports, command: Sequence[str] = (),
    check: Callable[[ShardPlan], None] | None = None,
) -> Merged:
    """Read, check and merge the shards in ``directories`` into ``output``, the pages
    written by ``reports``; ``check`` sees the plan before anything is written (the
    command's own options against it)."""
    shards: list[ShardRun] = []
    problems: list[str] = []
    for directory in directories:
        try:
            shards.append(read_shard(directory))
        except MergeRefused as refused:
            problems += refused.problems
    if problems or not shards:
        raise MergeRefused(problems or ["no shard directory given"])
    problems = check_shards(shards)
    if problems:
        raise MergeRefused(problems)
    shards.sort(key=lambda shard: shard.index)
    plan = shards[0].plan
    if check is not None:
        check(plan)
    # every record read and checked before anything is written: a damaged shard is refused, not half merged
    records = {name: {shard.index: read_shard_records(shard, name) for shard in shards} for name in plan.arms}
    output = check_output_dir(output)
    taken = {path.resolve() for shard in shards for path in (shard.directory, *shard.arm_dirs.values())}
    several = len(plan.arms) > 1
    # each arm where the session put it (a replicate in ``<arm>/r<i>``)
    arm_dirs = {
        name: (output / shards[0].arm_dirs[name].relative_to(shards[0].directory) if several else output)
        for name in plan.arms
    }
    for run_dir in arm_dirs.values():
        if run_dir in taken:
            raise MergeRefused([f"--output-dir {output} is a shard's own directory; merge into another directory"])
    session = shards[0].documents[plan.arms[0]].session or ""
    incomplete = [f"{shard.label} is incomplete: {reason}" for shard in shards if (reason := shard.incomplete)]
    locks = [RunLock(run_dir) for run_dir in arm_dirs.values()]
    try:
        for lock in locks:
            lock.acquire(command)
        merged = [
            _merge_arm(name, shards, plan, arm_dirs[name], session, records[name], reports) for name in plan.arms
        ]
        if several:
            write_arms_manifest(
                output, [(name, arm_dirs[name], shards[0].config_paths.get(name, "")) for name in plan.arms],
                shards[0].overrides, session, shards[0].repeats,
            )
    finally:
        for lock in locks:
            lock.release()
    result = Merged(merged, incomplete)
    first = shards[0].documents
    if any(first[name].replicate is not None for name in plan.arms):  # a repeated session
        groups = replicate_groups((str(first[name].run.name or name), arm_dirs[name]) for name in plan.arms)
        replicates = reports.replicate_comparison(groups, output)
        result.replicates = dict(replicates.document)
        result.replicate_files = list(replicates.paths)
    elif several:
        files = reports.comparison([arm.run_dir for arm in merged], output / "compare.html", list(plan.arms))
        result.comparison = dict(files.document)
        result.comparison_files = (files.html, files.json)
    return result


def _merge_arm(
    name: str, shards: Sequence[ShardRun], plan: ShardPlan, run_dir: Path, session: str,
    records: Mapping[int, ShardRecords], reports: Reports,
) -> MergedArm:
    """One arm's run directory, from every shard's run of the arm (``records``: each
    shard's, read and checked by :func:`read_shard_records`)."""
    owner = plan.owners(name)
    documents = {shard.index: shard.documents[name] for shard in shards}
    summaries = {shard.index: shard.summaries[name] for shard in shards}
    entries = {
        entry.name: entry for index, document in documents.items()
        for entry in document.streams if owner.get(entry.name) == index
    }
    order = [stream for stream in plan.streams if stream in entries]
    positions = {stream: position for position, stream in enumerate(order)}

    def rank(stream: object) -> int:
        return positions.get(stream, len(positions)) if isinstance(stream, str) else len(positions)

    responses: list[Response] = []
    scores: list[Score] = []
    events: list[Event] = []
    for shard in shards:
        responses += records[shard.index].responses
        scores += records[shard.index].scores
        events += records[shard.index].events
    # stream order; within a stream, the order the shard recorded (scores: by position)
    responses.sort(key=lambda record: rank(record.stream))
    scores.sort(key=lambda record: (rank(record.stream), record.position))
    events.sort(key=lambda event: rank(event_task(event)[0]))
    ran: dict[str, StreamRan] = {}
    for index, summary in summaries.items():
        recorded = (summary.ran if summary is not None else None) or documents[index].ran or {}
        ran.update({stream: parts for stream, parts in recorded.items() if owner.get(stream) == index})
    ran = {stream: ran[stream] for stream in sorted(ran, key=rank)}

    collector = ResultCollector(order)
    collector.preload(responses, scores, events, ran)
    metrics = collector.metrics()
    shard_record = documents[shards[0].index].shard
    gates = shard_record.thresholds if shard_record is not None else ShardThresholds()
    overall = gates.overall
    per_stream = {gate.stream: float(gate.minimum) for gate in gates.streams}
    thresholds = check_thresholds(metrics, float(overall) if overall is not None else None, per_stream)
    planned = sum(entries[stream].tasks for stream in order)
    stopped = [f"{shard.label} is incomplete: {reason}" for shard in shards if (reason := shard.arm_incomplete(name))]
    complete = len(scores) >= planned and not stopped
    reason = None if complete else ("; ".join(stopped) or f"only {len(scores)} of {planned} planned tasks ran")
    completion = Completion(complete=complete, tasks_planned=planned, tasks_run=len(scores), reason=reason)
    present = [summary for summary in summaries.values() if summary is not None]
    extra: dict[str, Any] = {
        key: value for key, value in (present[0].written() if present else {}).items() if key not in _COLLECTED
    }
    walls = [summary.wall_seconds for summary in present if summary.wall_seconds is not None]
    if walls and len(walls) == len(present):
        extra["wall_seconds"] = max(walls)  # the shards ran side by side: the slowest is the wall
    starts = [document.started for document in documents.values() if document.started]
    started = min(starts) if starts else utc_now()
    finishes = [summary.finished for summary in present if summary.finished]
    summary = collector.summary(thresholds, started, max(finishes) if finishes else utc_now(), completion, extra)

    move_previous_run_aside(run_dir)
    writer = RunWriter(run_dir)
    first = documents[shards[0].index]
    assert first.shard is not None  # every shard's run.json records its shard (read_shard)
    document = first.model_copy(update={
        "shard": None, "resumed": None,
        "streams": [entries[stream] for stream in order],
        "started": started,
        "session": session or None,
        "merged": MergedRecord.model_validate({
            **{key: value for key, value in first.shard.written().items() if key not in ("index", "thresholds")},
            "shards": [str(shard.directory) for shard in shards],
        }),
        "ran": ran or first.ran,
    })
    writer.write_run(document)
    writer.write_records(RESPONSES, responses)
    writer.write_records(SCORES, scores)
    writer.write_records(EVENTS, events)
    for shard in shards:
        source = shard.arm_dirs[name]
        for stream in plan.streams_of(shard.index, name):
            transcript = RunReader(source).transcript_path(stream)
            if transcript.is_file():
                writer.write_records(f"{TRANSCRIPTS}/{stream}.jsonl", iter_jsonl(transcript))
            snapshots = StreamSnapshots.directory_for(source, stream)
            if snapshots.is_dir():
                writer.copy_tree(snapshots, str(snapshots.relative_to(source)))
    if writer.failure is not None:
        summary = summary.model_copy(update={"passed": False, "write_failure": writer.failure})
    writer.write_summary(summary.model_copy(update={"schema_version": SCHEMA_VERSION}))
    if writer.failure is not None:
        raise MergeRefused([writer.failure])
    report_error = None
    try:
        reports.run_report(run_dir)
    except (ReportError, OSError, ValueError) as error:
        report_error = str(error)
    return MergedArm(name, run_dir, summary, metrics, thresholds, report_error)


#: What the summary reads of every response (:meth:`..analysis.summary.StreamMetrics.add_response`).
_RESPONSE_KEYS = ("stream", "task_id", "kind", "agent_turns", "tool_calls", "memory_retains", "memory_recalls", "usage")


@dataclass
class ShardRecords:
    """One shard's records of one arm, those of the streams the plan gives the shard."""

    responses: list[Response]
    scores: list[Score]
    events: list[Event]


def read_shard_records(shard: ShardRun, name: str) -> ShardRecords:
    """``shard``'s records of arm ``name``, each checked as the reports check it, and,
    for a shard that finished, added up against its own summary.json: a record file
    emptied, cut, edited, or holding a line twice or another run's lines is refused
    (:class:`MergeRefused`, naming the file), never merged into wrong figures."""
    source = shard.arm_dirs[name]
    reader = RunReader(source)
    owner = shard.plan.owners(name)
    try:
        responses = read_complete(source / RESPONSES, Response, _RESPONSE_KEYS)
        scores = read_complete(source / SCORES, Score, ("stream", "task_id", "position"))
        events = reader.events(strict=True)
        transcripts = {  # copied as they are: checked before
            stream: Counter(
                (entry.task_id, entry.kind)
                for entry in read_complete(reader.transcript_path(stream), TranscriptEntry, ("task_id", "kind"))
            )
            for stream in shard.plan.streams_of(shard.index, name)
        }
    except RunDirError as error:
        raise MergeRefused([f"{shard.label}: {error}"]) from None
    summary = shard.summaries.get(name)
    if summary is not None:
        disagree = records_disagree(summary, summarize(list(summary.streams), [outcome(s) for s in scores], responses))
        stimuli = Counter(response.stream for response in responses)
        short = next((stream for stream, held in transcripts.items() if held.total() != stimuli[stream]), None)
        if disagree is None and short is not None:
            disagree = (f"{TRANSCRIPTS}/{short}.jsonl holds {transcripts[short].total()} turns, {RESPONSES} "
                        f"{stimuli[short]} of stream {short!r}")
        if disagree is None:
            disagree = _misnamed(shard.documents[name], scores, responses, transcripts)
        if disagree is not None:
            raise MergeRefused([
                f"{shard.label}: the records in {source} do not add up to its {SUMMARY} ({disagree}); "
                f"{DAMAGED_ADVICE}"
            ])

    return ShardRecords(
        [record for record in responses if owner.get(record.stream) == shard.index],
        [record for record in scores if owner.get(record.stream) == shard.index],
        [event for event in events if owner.get(event_task(event)[0]) == shard.index],
    )


def _read_summary(reader: RunReader, document: RunFile) -> Summary | None:
    """A shard arm's summary.json (None: the shard has not finished it); one that is
    damaged, of a newer schema or of another run is refused, not read as "still
    running" (a summary is written whole: it is never torn by a killed run)."""
    raw = reader.recorded_summary()
    path = reader.summary_path
    if raw is None:
        if path.exists() or path.is_symlink():
            raise MergeRefused([f"{path} is damaged (not a JSON object): the file was edited or cut; run that shard again"])
        return None
    newer = newer_schema(path, raw)
    if newer is not None:
        raise MergeRefused([newer])
    summary = _read(Summary, path, raw)
    problem = other_run(summary.config_fingerprint, document, reader.run_dir) if summary is not None else None
    if problem is not None:
        raise MergeRefused([problem])
    return summary


def _misnamed(
    run: RunFile, scores: Sequence[Score], responses: Sequence[Response],
    transcripts: Mapping[str, Counter[tuple[str, str]]],
) -> str | None:
    """Why records that count right still name the wrong tasks: scores that are not
    the run's tasks (:func:`..rundir.misnamed_scores`), a task or feedback turn of a
    task with no score, or a transcript whose turns are not the responses' (another
    stream's or another run's file copied in); else None."""
    held: dict[str, dict[int, str]] = {}
    for record in scores:
        held.setdefault(record.stream, {})[record.position] = record.task_id
    problem = misnamed_scores(run, held)
    if problem is not None:
        return f"{SCORES}: {problem}"
    task_ids = {stream: set(positions.values()) for stream, positions in held.items()}
    turns: dict[str, Counter[tuple[str, str]]] = {}
    for response in responses:
        if response.kind != "ingestion" and response.task_id not in task_ids.get(response.stream, ()):
            return f"{RESPONSES} holds a {response.kind} turn of {response.stream!r} {response.task_id!r}, a task with no score"
        turns.setdefault(response.stream, Counter())[(response.task_id, response.kind)] += 1
    for stream, entries in transcripts.items():
        if entries != turns.get(stream, Counter()):
            return f"the turns in {TRANSCRIPTS}/{stream}.jsonl are not those {RESPONSES} records for stream {stream!r}"
    return None


def _read(model: type[Doc], path: Path, value: object) -> Doc | None:
    """A shard's JSON document as its model (None when there is none); a damaged one
    is refused, naming the file and key."""
    if value is None:
        return None
    try:
        return read(model, path, value)
    except DamagedDocument as error:
        raise MergeRefused([str(error)]) from None


__all__ = ["MERGE", "MergeRefused", "Merged", "MergedArm", "ShardRun", "check_shards", "merge_shards", "read_shard"]
