"""The run directory: its format, and the only code that reads, writes or places it.

Layout (schema version in every JSON document, see docs/artefacts.md)::

    run.json                    resolved configs, versions, times, command line
    responses.jsonl             every agent response, task and feedback
    transcripts/<stream>.jsonl  every message and tool call, per stimulus
    scores.jsonl                one scored item per original task
    events.jsonl                failed and skipped feedback turns
    summary.json                metrics, thresholds, completion
    report.html, compare.html   rendered from the files above
    history/<started>/          an earlier run's files, moved aside by a new run
    side-run/                   a run of tasks picked by hand (node ids, -k): a run
                                directory of its own, so the full run stays the result
    .lock                       held by the process that writes the directory

Guarantees (each is tested):

* a new run never destroys an earlier run's results: they move to ``history/``;
* one writer at a time: a second run is refused with a message naming the first;
* the run name cannot leave the output root (no separators, ``..``, NUL);
* no text can split, merge or break a record: records are written as ASCII JSON
  (every other character, lone surrogates and U+2028 included, as a ``\\u`` escape)
  and JSONL is split on ``\\n`` only;
* a write that fails (read-only directory, full disk) stops further writing with
  one clear error instead of ending the session; what was written stays.

Modules (each one job; the rest of the package imports from this package only):

* :mod:`.layout`: the names of the files and folders, and :class:`RunDirError`;
* :mod:`.paths`: checks of a run name, an output directory, a place to write, an
  output that would land in a run, a path an artefact records;
* :mod:`.placement`: where a run goes (:class:`Placement`), the one decision;
* :mod:`.jsonl`: the codec (one record, one ASCII JSON line; a document written
  atomically; records read back with a torn last line skipped);
* :mod:`.reader`: the run read back typed (:class:`RunReader`, run.json, summary.json), a
  finished run read checked (:class:`FinishedRun`: its records add up to its summary);
* :mod:`.lock`: one writer per directory, the shared error count;
* :mod:`.writer`: :class:`RunWriter`, which appends records and writes documents;
* :mod:`.history`: an earlier run moved aside;
* :mod:`.arms`: the arms manifest (arms.json);
* :mod:`.resume`: what an interrupted session was (:class:`ResumeSource`);
* :mod:`.resumestate`: what its runs completed (:class:`ResumeState`).
"""

from __future__ import annotations

from ..rundocs import DAMAGED_ADVICE, SCHEMA_VERSION
from .arms import read_arms_manifest, write_arms_manifest
from .history import move_previous_run_aside
from .jsonl import DamagedRecords, dumps, iter_documents, iter_jsonl, read_json
from .layout import (
    ARMS_DIRECTORY_FILES,
    ARMS_MANIFEST,
    EVENTS,
    HISTORY,
    LOCK,
    REPLICATES_DATA,
    REPORT,
    RESERVED_NAMES,
    RESPONSES,
    RUN_DOCUMENT,
    RUN_FILES,
    SCORES,
    SIDE_RUN,
    SUMMARY,
    TRANSCRIPTS,
    RunDirError,
    holds_a_run,
)
from .lock import RunLock, SharedErrorCount, remove_claims
from .paths import check_output_dir, output_path_problem, place_problem
from .placement import Placement
from .reader import (
    FinishedRun,
    RunReader,
    misnamed_scores,
    newer_schema,
    open_finished_run,
    other_run,
    read_complete,
    read_finished_run,
)
from .resume import ResumeSource, read_resume_source, started_by, with_recorded
from .resumestate import ResumeState, check_resume_data, event_task, load_resume_state
from .writer import RunWriter, package_versions, utc_now

__all__ = [
    "ARMS_DIRECTORY_FILES", "ARMS_MANIFEST", "DAMAGED_ADVICE", "EVENTS", "HISTORY", "LOCK", "REPLICATES_DATA",
    "REPORT", "RESERVED_NAMES", "RESPONSES", "RUN_DOCUMENT", "RUN_FILES", "SCHEMA_VERSION", "SCORES", "SIDE_RUN",
    "SUMMARY", "TRANSCRIPTS", "DamagedRecords", "FinishedRun", "Placement", "ResumeSource", "ResumeState", "RunDirError", "RunLock",
    "RunReader", "RunWriter", "SharedErrorCount", "check_output_dir", "check_resume_data", "dumps", "event_task",
    "holds_a_run", "iter_documents", "iter_jsonl", "load_resume_state", "misnamed_scores", "move_previous_run_aside", "newer_schema",
    "open_finished_run", "other_run", "output_path_problem", "package_versions", "place_problem", "read_arms_manifest", "read_complete",
    "read_finished_run", "read_json", "read_resume_source", "remove_claims", "started_by", "utc_now",
    "with_recorded", "write_arms_manifest",
]
