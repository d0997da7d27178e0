"""The per-task part of report.html: every task's outcome and drill-down, paged.

For each task: the prompt the agent saw, the memories recalled into it, the
answer, the extraction and why, tokens, latency, cached or not and any protocol
violation for both turns, and both turns' transcripts. Read from scores.jsonl,
responses.jsonl and transcripts/<stream>.jsonl as they stream by (a 20,000-task
run's records do not fit comfortably in memory); a missing piece shows as a dash.

A long run has tens of thousands of tasks, too many for a page to hold as HTML:
52 MB for 20,000 tasks, slow to open and slower to scroll. So each stream's tasks
are packed as compact JSON, in pages of :data:`PAGE_SIZE` tasks, each page
deflate-compressed and base64-encoded into a ``<script type="text/plain">`` data
block (which the browser neither runs nor parses as markup). One small inline
script (:data:`SCRIPT`, allowed by its hash in the page's Content-Security-Policy,
nothing else may run) unpacks a page when it is shown and builds its rows and
drill-downs with ``textContent`` only, so markup in an artefact stays text. The
page's size grows linearly with the records, at a fraction of their size, and it
opens as fast at 20,000 tasks as at 20. What a task shows is decided here, in
Python (:func:`task_record`); the script only lays it out.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..core import boundedread
from ..rundocs import Response, Score, ToolCallDoc, TranscriptEntry
from ..rundocs.records import as_response, as_score
from ._markup import _NONE, _e, _mapping, _number, _position

#: Tasks per page of the drill-down, and per compressed data block.
PAGE_SIZE = 100
#: A run of up to this many tasks has its scores read once for its page (held from
#: the first read, a few MB at most); a longer one reads scores.jsonl again rather
#: than hold it (a 20,000-task run's scores are tens of MB as models).
HELD_SCORES = 2_000
_RECALL_TOOLS = ("recall",)
#: zlib level 3: at 20,000 tasks a quarter of level 6's time (0.14 s against 0.37 s)
#: for a page 12 % larger (3.2 MB of data against 2.8 MB).
_LEVEL = 3
_VERDICT = {"correct": "c", "wrong": "w", "error": "e"}


# --------------------------------------------------------------------------- one task, as data


def _text(value: object) -> str:
    """A value as the page shows it (``None`` as nothing)."""
    if type(value) is str:
        return value
    return "" if value is None else str(value)


def _message_text(message: Mapping[str, Any]) -> str:
    """A chat message as text: its content, then any tool calls it makes."""
    content = message.get("content")
    calls = message.get("tool_calls")
    stopped = message.get("finish_reason")  # noted only for a reply the server ended early
    if isinstance(content, str) and not calls and not stopped:
        return content  # the common case, 80,000 times in a 20,000-task run
    parts = []
    if isinstance(content, str):
        parts.append(content)
    elif content is not None:
        parts.append(json.dumps(content, ensure_ascii=False, indent=1))
    if isinstance(calls, list):
        for call in calls:
            function = _mapping(_mapping(call).get("function"))
            parts.append(f"\u2192 {function.get('name')}({function.get('arguments')})")
    if stopped:
        parts.append(f"[the server ended this reply early: finish_reason {stopped!r}]")
    return "\n".join(parts)


def _call_text(call: ToolCallDoc) -> str:
    arguments = call.arguments
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"\u2192 {call.name}({shown}) = {call.result}"


def transcript_entry(record: TranscriptEntry) -> tuple[dict[str, Any], bool]:
    """A turn's transcript as the page shows it, and whether every model reply in
    it was replayed from the response cache (``False`` when it made no model call).

    ``{"m": [[role, text, cached], ...]}`` for its messages; an agent of one's own
    that records no messages: ``{"c": [tool call text, ...]}``; neither: ``{}``.
    """
    messages = record.messages
    if messages:
        # dict, not Mapping: records come from JSON, and this runs 40,000 times in a long run
        shown = []
        replied = live = False  # a model reply; one not replayed from the cache
        for message in messages:
            if type(message) is not dict:
                continue
            role, cached = message.get("role"), message.get("cached")
            shown.append([_text(role), _message_text(message), 1 if cached else 0])
            if role == "assistant":
                replied = True
                live = live or not cached
        return {"m": shown}, replied and not live
    if record.tool_calls:
        return {"c": [_call_text(call) for call in record.tool_calls]}, False
    return {}, False


def _unread_results(response: Response) -> bool:
    """Whether a tool call other than final_answer and the memory's writes returned
    something that is no JSON list: a recall tool answering free text, whose records
    the run cannot list (a JSON list, empty or not, was read into ``memory_recalled``)."""
    writes = {_mapping(write).get("tool") for write in response.memory_writes}
    for call in response.tool_calls:
        if call.name == "final_answer" or call.name in writes:
            continue
        try:
            result = boundedread.loads(str(call.result), depth=boundedread.MAX_ARTEFACT_DEPTH)
        except (ValueError, RecursionError):
            return True
        if not isinstance(result, list):
            return True
    return False


def recalled_entry(response: Response | None) -> dict[str, Any]:
    """What memory gave the agent in the task turn: ``{"i": [[text, score], ...]}``
    for the records (``score`` formatted, or ``None``), else ``{"n": note}``.

    A response may list the hits itself (``memory_recalled``); a ``recall`` tool
    call carries them as its result; otherwise only the count is known (an
    ExpRAG agent puts its experiences into the prompt, shown above them).
    """
    if response is None:
        return {"n": _NONE}
    hits = response.memory_recalled
    items: list[list[Any]] = []
    for hit in hits:
        if hit:
            score = _count(hit.get("score"))
            items.append([_text(hit.get("content", hit)), None if score is None else f"score {score:.3f}"])
        else:
            items.append([_text(hit), None])
    calls = response.tool_calls if not items else []  # recall tools' hits are listed above
    for call in calls:
        if call.name in _RECALL_TOOLS:
            query = _mapping(call.arguments).get("query")
            items.append([f"recall({_text(query)}) returned\n{_text(call.result)}", None])
    if items:
        return {"i": items}
    count = response.memory_recalls
    if count and "memory_recalled" in response.model_fields_set and not _unread_results(response):
        return {"n": f"{int(count)} recall(s), no record returned"}
    if count:
        return {
            "n": f"{int(count)} recall(s); the run did not record what they returned "
            "(an ExpRAG agent shows its recalled experiences in the prompt above)"
        }
    return {"n": "none"}


def _count(value: object) -> float | None:
    """A number from a record, or None (the page formats it: a dash for None)."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[return-value]
    return _number(value) if kind is float else None


def turn_entry(response: Response) -> list[Any]:
    """A turn's costs: [tokens, prompt tokens, completion tokens, seconds, agent
    turns, cached (as the response says), protocol violation]; numbers are raw
    (``None``: unknown), the page formats them."""
    given = "usage" in response.model_fields_set
    usage = response.usage
    prompt = usage.prompt_tokens if given and "prompt_tokens" in usage.model_fields_set else None
    completion = usage.completion_tokens if given and "completion_tokens" in usage.model_fields_set else None
    tokens = usage.total_tokens if given and "total_tokens" in usage.model_fields_set else None
    if tokens is None and prompt is not None and completion is not None:
        tokens = prompt + completion
    violation = response.protocol_violation
    return [
        tokens, prompt, completion, _count(response.seconds) if "seconds" in response.model_fields_set else None,
        response.agent_turns if "agent_turns" in response.model_fields_set else None,
        bool(response.cached), _text(violation) if violation else None,
    ]


def verdict(scored: Score) -> str:
    if scored.error:
        return "error"
    return "correct" if scored.correct else "wrong"


def task_record(
    scored: Score,
    turns: Mapping[str, list[Any]],
    recalled: dict[str, Any] | None,
    transcripts: Mapping[str, tuple[dict[str, Any], bool]],
) -> dict[str, Any]:
    """One task as the drill-down shows it (short keys: 20,000 of these are packed).

    ``turns``, ``transcripts``: by kind (``task``, ``feedback``), from
    :func:`turn_entry` and :func:`transcript_entry`; ``recalled`` from
    :func:`recalled_entry` of the task turn's response.
    """
    answer = scored.raw_answer
    record: dict[str, Any] = {
        "p": _position(scored.position), "i": _text(scored.task_id), "v": _VERDICT[verdict(scored)],
        "x": _text(scored.extracted), "t": _text(scored.target), "m": _text(scored.match_mode),
        "r": _text(scored.reason), "R": recalled if recalled is not None else {"n": _NONE},
    }
    if scored.group is not None:
        record["g"] = _text(scored.group)
    for kind, key in (("task", "T"), ("feedback", "F")):
        turn = turns.get(kind)
        transcript = transcripts.get(kind)
        if turn is not None:
            # cached: the response says so, or every model reply of its transcript was replayed
            record[key] = [*turn[:5], turn[5] or (transcript is not None and transcript[1]), turn[6]]
        record["tt" if kind == "task" else "ft"] = transcript[0] if transcript is not None else None
    final = turns.get("task")
    if answer is None and final is not None:
        answer = final[7] if len(final) > 7 else None
    record["a"] = None if answer is None else _text(answer)
    return record


# --------------------------------------------------------------------------- a run's tasks, streamed


class _Ahead:
    """The entries of a file's records, read in step with the tasks that ask for them.

    A run writes a stream's records in the order its tasks ran (one process runs a
    stream, a resume or a crashed worker's successor goes on from where it stopped),
    and scores.jsonl is in stream order: so the record a task asks for is the next
    one, and is dropped once given. A task with no record (a failed episode has no
    feedback turn) stops the reading at the first record of a later task of its
    stream (``later``). So a serial run's report holds a few entries, not the run's
    (20,000 tasks: ~100 MB held before). What is read past on the way is held until
    asked for: under xdist, the other streams' responses (their compact entries, as
    every response was before); records in no task order, at worst all of them.
    """

    def __init__(self, records: Iterable[Any], key: Any, entry: Any) -> None:
        self._records = iter(records)
        self._key = key
        self._entry = entry
        self._held: dict[Any, Any] = {}

    def take(self, wanted: Any, later: Any) -> Any:
        """The entry of ``wanted`` (None: it has no record); ``later(key)``: whether
        a record of ``key`` comes after ``wanted``'s in a run's order."""
        if wanted in self._held:
            return self._held.pop(wanted)
        for record in self._records:
            key = self._key(record)
            if key == wanted:
                return self._entry(record)
            self._held[key] = self._entry(record)
            if later(key):
                break
        return None

    def finish(self) -> None:
        """Read the records no task asked for, holding none: the file's reader checks
        it to its end (a line repeated or damaged after the last task's, records that
        do not add up to the summary) before the page is written."""
        for _ in self._records:
            pass


def _response_key(response: Response) -> tuple[str, str, str]:
    return response.stream, response.task_id, response.kind


def _turn(response: Response) -> tuple[list[Any], dict[str, Any] | None]:
    """A response's costs (with its final answer) and, for a task turn, what it recalled."""
    turn = [*turn_entry(response), response.final_answer]
    return turn, recalled_entry(response) if response.kind == "task" else None


def _transcript_key(record: TranscriptEntry) -> tuple[str, str]:
    return record.task_id, record.kind


def _pack(records: Sequence[Mapping[str, Any]]) -> str:
    # ASCII (\\u escapes): a lone surrogate from an agent's reply stays valid JSON
    text = json.dumps(records, ensure_ascii=True, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode("ascii"), _LEVEL)).decode("ascii")


def stream_pages(
    stream: str,
    scores: Iterable[Score],
    ranks: Mapping[str, int],
    responses: _Ahead,
    transcripts: Iterable[TranscriptEntry],
) -> Iterator[str]:
    """The packed pages of one stream's tasks, in stream order (``ranks``: each
    task id's place in it)."""
    kept = _Ahead(transcripts, _transcript_key, transcript_entry)
    page: list[dict[str, Any]] = []
    for scored in scores:
        task_id = scored.task_id
        rank = ranks.get(task_id, -1)

        def later_transcript(key: tuple[str, str], rank: int = rank) -> bool:
            return ranks.get(key[0], -1) > rank

        def later_response(key: tuple[str, str, str], rank: int = rank) -> bool:
            return key[0] == stream and ranks.get(key[1], -1) > rank

        turns: dict[str, list[Any]] = {}
        recalled = None
        transcripts_of: dict[str, tuple[dict[str, Any], bool]] = {}
        for kind in ("task", "feedback"):
            found = responses.take((stream, task_id, kind), later_response)
            if found is not None:
                turns[kind] = found[0]
                if kind == "task":
                    recalled = found[1]
            transcript = kept.take((task_id, kind), later_transcript)
            if transcript is not None:
                transcripts_of[kind] = transcript
        page.append(task_record(scored, turns, recalled, transcripts_of))
        if len(page) == PAGE_SIZE:
            yield _pack(page)
            page = []
    kept.finish()
    if page:
        yield _pack(page)


class _StreamIndex:
    """What the page needs of each stream's tasks before their pages: their order,
    verdicts and positions, from a first read of the scores (a few bytes a task)."""

    def __init__(self) -> None:
        #: stream -> [(position, task id, verdict letter, position as shown)], in position order
        self.tasks: dict[str, list[tuple[float, str, str, str]]] = {}
        #: each stream's scores are together and in position order (scores.jsonl as
        #: a run writes it): the pages read them again from the file instead of holding them
        self.in_order = True
        #: the scores as read, while there are at most :data:`HELD_SCORES` of them
        #: (None past that): the pages then take them from here, not from a second read
        self.held: list[Score] | None = []

    @classmethod
    def read(cls, scores: Iterable[Score]) -> _StreamIndex:
        index = cls()
        last: str | None = None
        held = index.held
        for scored in scores:
            if held is not None:
                held.append(scored)
                if len(held) > HELD_SCORES:
                    held = index.held = None
            stream = scored.stream
            position = scored.position
            entry = (float(position), scored.task_id, _VERDICT[verdict(scored)], _position(position))
            tasks = index.tasks.get(stream)
            if tasks is None:
                tasks = index.tasks[stream] = []
            elif stream != last or entry[0] < tasks[-1][0]:
                index.in_order = False
            tasks.append(entry)
            last = stream
        for tasks in index.tasks.values():
            tasks.sort(key=lambda task: task[0])
        return index

    def ranks(self, stream: str) -> dict[str, int]:
        ranks: dict[str, int] = {}
        for rank, task in enumerate(self.tasks[stream]):
            task_id = task[1]
            ranks.setdefault(task_id, rank)
        return ranks


def _compact(scored: Score) -> Score:
    """What the drill-down shows of a score (not ``details``, not the traceback)."""
    return scored.model_copy(update={"details": {}, "traceback": None, "recall_similarity": None})


def _streams_in_order(
    index: _StreamIndex, read_scores: Callable[[], Iterable[Score]]
) -> Iterator[tuple[str, Iterator[Score]]]:
    """Each stream's scores in position order: those the index held, else read again
    from the file when it holds them so, else held (compact) and sorted."""
    scores = index.held if index.held is not None else read_scores()
    if index.in_order:
        for stream, group in itertools.groupby(scores, key=lambda scored: scored.stream):
            yield stream, group
        return
    by_stream: dict[str, list[Score]] = {}
    for scored in scores:
        by_stream.setdefault(scored.stream, []).append(_compact(scored))
    for stream, items in by_stream.items():
        items.sort(key=lambda s: s.position)
        yield stream, iter(items)


def _transcript(record: TranscriptEntry | Mapping[str, Any]) -> TranscriptEntry:
    return record if isinstance(record, TranscriptEntry) else TranscriptEntry.model_validate(record)


def task_sections(
    read_scores: Callable[[], Iterable[Score | Mapping[str, Any]]],
    read_responses: Iterable[Response | Mapping[str, Any]],
    read_transcripts: Callable[[str], Iterable[TranscriptEntry | Mapping[str, Any]]],
) -> Iterator[str]:
    """The page's "Tasks" part, piece by piece: per stream a drill-down of every task.

    ``scores()`` reads the scores (once for each stream's verdicts and order, and
    for a run of over :data:`HELD_SCORES` tasks once more for its pages);
    ``transcripts(stream)`` gives a stream's transcript records. A long run's
    records are read as the pages are written, not held.
    """
    def scores() -> Iterator[Score]:
        return map(as_score, read_scores())

    def transcripts(stream: str) -> Iterator[TranscriptEntry]:
        return map(_transcript, read_transcripts(stream))

    index = _StreamIndex.read(scores())
    if not index.tasks:
        return
    turns = _Ahead(map(as_response, read_responses), _response_key, _turn)
    yield "<h2>Tasks</h2>"
    for number, (stream, scored_items) in enumerate(_streams_in_order(index, scores)):
        tasks = index.tasks[stream]
        verdicts = "".join(task[2] for task in tasks)
        correct = verdicts.count("c")
        positions = [task[3] for task in tasks]
        # a run of part of a stream (-k, a resumed subset) has gaps: "go to position" needs them
        gaps = "" if positions == [str(n) for n in range(1, len(positions) + 1)] else f' data-positions="{",".join(positions)}"'
        yield (
            f'<details class="stream-tasks" data-stream="{_e(stream)}" data-index="{number}" '
            f'data-tasks="{len(tasks)}" data-page-size="{PAGE_SIZE}" data-verdicts="{verdicts}"{gaps}>'
            f"<summary>{_e(stream)}: {correct:,} of {len(tasks):,} correct</summary>"
            '<div class="task-pages"><noscript><p class="warning">The per-task drill-down is drawn by this '
            "page's own script (it loads nothing); allow scripts for this file to see it.</p></noscript></div>"
        )
        for page in stream_pages(stream, scored_items, index.ranks(stream), turns, transcripts(stream)):
            yield f'<script type="text/plain" class="task-page">{page}</script>'
        yield "</details>"
    turns.finish()


_PAGE_BLOCK = re.compile(r'<script type="text/plain" class="task-page">([A-Za-z0-9+/=]*)</script>')
_STREAM_OPEN = re.compile(r'<details class="stream-tasks" data-stream="([^"]*)"')


def read_task_pages(page: str) -> dict[str, list[dict[str, Any]]]:
    """Every task record a report holds, by stream (what the script unpacks): for
    tests and for tools that read a report back."""
    from html import unescape

    found: dict[str, list[dict[str, Any]]] = {}
    starts = [(match.start(), unescape(match.group(1))) for match in _STREAM_OPEN.finditer(page)]
    for match in _PAGE_BLOCK.finditer(page):
        stream = [name for start, name in starts if start < match.start()][-1]
        data = zlib.decompress(base64.b64decode(match.group(1))).decode("ascii")
        found.setdefault(stream, []).extend(json.loads(data))
    return found


# --------------------------------------------------------------------------- the script


#: Lays out the packed pages: controls, the page's table and drill-downs, each
#: drill-down's body when it is first opened. Text goes in through textContent
#: (``append`` of a string) only; nothing is fetched; no inline handlers.
SCRIPT = r"""
(() => {
  "use strict";
  const DASH = "\u2013";
  const VERDICT = {c: "correct", w: "wrong", e: "error"};
  const FILTERS = [["all", "all tasks"], ["w", "wrong"], ["e", "failed episodes"], ["c", "correct"]];
  function el(tag, cls, ...children) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  function pre(text) { return text ? el("pre", null, text) : el("p", null, DASH); }
  function count(n) { return n === null || n === undefined ? DASH : Math.trunc(n).toLocaleString("en"); }
  function seconds(s) { return s === null || s === undefined ? DASH : s < 1 ? (s * 1000).toFixed(2) + " ms" : s.toFixed(2) + " s"; }
  function code(text) { return el("code", null, text || ""); }
  async function unpack(block) {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot unpack the per-task pages (it needs DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later)");
    }
    const bytes = Uint8Array.from(atob(block.textContent.trim()), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return JSON.parse(await new Response(stream).text());
  }
  function turnFacts(label, turn) {
    const dd = el("dd", null);
    if (!turn) { dd.append(DASH + " (no response recorded)"); return [el("dt", null, label), dd]; }
    const violation = turn[6] ? el("span", "fail violation", "protocol violation: " + turn[6]) : el("span", "violation", "no protocol violation");
    dd.append("tokens " + count(turn[0]) + " (" + count(turn[1]) + " prompt, " + count(turn[2]) + " completion) \u00b7 latency " +
      seconds(turn[3]) + " \u00b7 " + count(turn[4]) + " agent turn(s) \u00b7 ", el("span", "cached", turn[5] ? "cached" : "not cached"),
      " \u00b7 ", violation);
    return [el("dt", null, label), dd];
  }
  function transcript(entry) {
    const box = el("div", "transcript");
    if (entry === null || entry === undefined) { box.append(el("p", null, DASH + " (no transcript recorded)")); return box; }
    if (entry.m) {
      for (const [role, text, cached] of entry.m) {
        const message = el("div", "message", el("span", "role", role + (cached ? " (cached)" : "")), pre(text));
        message.dataset.role = role;
        box.append(message);
      }
    } else if (entry.c) {
      box.append(el("p", null, "no messages recorded (an agent records them with turn.add_message); its tool calls:"));
      for (const text of entry.c) {
        const call = el("div", "message", el("span", "role", "tool call"), pre(text));
        call.dataset.role = "tool-call";
        box.append(call);
      }
    } else {
      box.append(el("p", null, DASH + " (empty transcript)"));
    }
    return box;
  }
  function prompt(entry) {
    for (const [role, text] of (entry && entry.m) || []) if (role === "user") return text;
    return null;
  }
  function recalled(entry) {
    if (entry.i) {
      return el("ol", "recalled", ...entry.i.map(([text, score]) => el("li", null, pre(text), score ? el("small", null, score) : null)));
    }
    return el("p", null, entry.n);
  }
  function body(task) {
    const facts = el("dl", "facts",
      el("dt", null, "prompt the agent saw"), el("dd", null, pre(prompt(task.tt))),
      el("dt", null, "memories recalled"), el("dd", null, recalled(task.R)),
      el("dt", null, "answer"), el("dd", null, pre(task.a)),
      el("dt", null, "extracted"), el("dd", null, code(task.x)),
      el("dt", null, "target"), el("dd", null, code(task.t)),
      el("dt", null, "why"), el("dd", null, task.r + " ", el("small", null, "(" + task.m + ")")));
    if (task.g !== undefined) facts.append(el("dt", null, "group"), el("dd", null, task.g));
    facts.append(...turnFacts("task turn", task.T), ...turnFacts("feedback turn", task.F));
    return [facts,
      el("details", null, el("summary", null, "task turn transcript"), transcript(task.tt)),
      el("details", null, el("summary", null, "feedback turn transcript"), transcript(task.ft))];
  }
  function detail(task) {
    const ok = task.v === "c";
    const node = el("details", "task", el("summary", null, "#" + task.p + " ", code(task.i),
      el("span", "verdict " + (ok ? "pass" : "fail"), VERDICT[task.v])));
    node.dataset.task = task.i;
    node.dataset.position = task.p;
    node.addEventListener("toggle", () => { if (node.open && node.childElementCount === 1) node.append(...body(task)); });
    return node;
  }
  function row(task) {
    const ok = task.v === "c";
    const turn = task.T;
    const notes = el("td", turn && turn[6] ? "fail" : null);
    if (turn && turn[5]) notes.append("cached");
    if (turn && turn[6]) notes.append((turn[5] ? "; " : "") + "protocol violation: " + turn[6]);
    if (!notes.textContent) notes.append(turn ? DASH : DASH + " (no response)");
    return el("tr", null,
      el("td", "num", task.p), el("td", "id", code(task.i)),
      el("td", ok ? "pass" : "fail", ok ? "yes" : task.v === "e" ? "no (failed episode)" : "no"),
      el("td", null, code(task.x)), el("td", null, code(task.t)),
      el("td", null, task.r + " ", el("small", null, "(" + task.m + ")")),
      el("td", "num", turn ? count(turn[0]) : DASH), el("td", "num", turn ? seconds(turn[3]) : DASH), notes);
  }
  const HEAD = [["#", "num", "position in the stream"], ["task"], ["correct"], ["answer (extracted)"], ["target"],
    ["why (match mode)"], ["tokens", "num", "task turn"], ["latency", "num", "task turn"],
    ["notes", null, "cached: the task turn's replies came from the response cache"]];
  class Stream {
    constructor(root) {
      this.root = root;
      this.name = root.dataset.stream;
      this.size = Number(root.dataset.pageSize);
      this.verdicts = root.dataset.verdicts;
      this.positions = root.dataset.positions ? root.dataset.positions.split(",") : null;
      this.blocks = root.querySelectorAll("script.task-page");
      this.pages = new Map();
      this.filter = "all";
      this.page = 0;
      this.box = root.querySelector(".task-pages");
      this.status = el("span", "page-status");
      this.select = el("select", null, ...FILTERS.map(([value, label]) => { const o = el("option", null, label); o.value = value; return o; }));
      this.previous = el("button", null, "\u2190 previous");
      this.next = el("button", null, "next \u2192");
      this.position = el("input", null);
      this.position.type = "number"; this.position.min = "1"; this.position.placeholder = "position";
      this.go = el("button", null, "go");
      this.select.setAttribute("aria-label", "which tasks of " + this.name);
      this.position.setAttribute("aria-label", "go to a position in " + this.name);
      this.table = el("tbody", null);
      this.details = el("div", "task-details");
      this.message = el("p", "warning");
      this.message.hidden = true;
      const head = el("tr", null, ...HEAD.map(([label, cls, tip]) => { const th = el("th", cls || null, label); if (tip) th.title = tip; return th; }));
      this.box.append(
        el("div", "pager", el("label", null, "show ", this.select), this.previous, this.status, this.next,
          el("span", "jump", this.position, this.go)),
        this.message,
        el("div", "scroll", el("table", "tasks", el("thead", null, head), this.table)),
        el("h3", null, this.name + ": each task"), this.details);
      this.select.addEventListener("change", () => { this.filter = this.select.value; this.show(0); });
      this.previous.addEventListener("click", () => this.show(this.page - 1));
      this.next.addEventListener("click", () => this.show(this.page + 1));
      this.go.addEventListener("click", () => this.jump());
      this.position.addEventListener("keydown", event => { if (event.key === "Enter") this.jump(); });
    }
    selected() {
      const picked = [];
      for (let i = 0; i < this.verdicts.length; i++) if (this.filter === "all" || this.verdicts[i] === this.filter) picked.push(i);
      return picked;
    }
    chunk(index) {
      if (!this.pages.has(index)) this.pages.set(index, unpack(this.blocks[index]));
      return this.pages.get(index);
    }
    jump() {
      const wanted = String(Math.trunc(Number(this.position.value)));
      const index = this.positions ? this.positions.indexOf(wanted) : Number(wanted) - 1;
      if (!(index >= 0 && index < this.verdicts.length)) {
        this.message.textContent = this.name + " has no task at position " + this.position.value;
        this.message.hidden = false;
        return;
      }
      this.filter = "all"; this.select.value = "all";
      this.show(Math.floor(index / this.size)).then(() => {
        const found = [...this.details.querySelectorAll("details.task")].find(d => d.dataset.position === wanted);
        if (found) { found.open = true; found.scrollIntoView(); }
      });
    }
    async show(page) {
      const picked = this.selected();
      const pages = Math.max(1, Math.ceil(picked.length / this.size));
      this.page = Math.min(Math.max(page, 0), pages - 1);
      const shown = picked.slice(this.page * this.size, (this.page + 1) * this.size);
      this.previous.disabled = this.page === 0;
      this.next.disabled = this.page >= pages - 1;
      const first = shown.length ? this.page * this.size + 1 : 0;
      this.status.textContent = " " + first.toLocaleString("en") + "\u2013" + (this.page * this.size + shown.length).toLocaleString("en") +
        " of " + picked.length.toLocaleString("en") + " " + (this.filter === "all" ? "tasks" : "shown") + " ";
      try {
        const tasks = [];
        for (const index of shown) tasks.push((await this.chunk(Math.floor(index / this.size)))[index % this.size]);
        this.table.replaceChildren(...tasks.map(row));
        this.details.replaceChildren(...tasks.map(detail));
        this.message.hidden = true;
      } catch (error) {
        this.message.textContent = "The tasks of " + this.name + " could not be shown: " + error.message;
        this.message.hidden = false;
      }
    }
  }
  for (const root of document.querySelectorAll("details.stream-tasks")) new Stream(root).show(0);
})();
""".strip()

#: For the page's Content-Security-Policy: this script, and no other, may run.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")


def script_tag() -> str:
    return f"<script>{SCRIPT}</script>"


__all__ = [
    "PAGE_SIZE",
    "SCRIPT",
    "SCRIPT_HASH",
    "read_task_pages",
    "recalled_entry",
    "script_tag",
    "task_record",
    "task_sections",
    "transcript_entry",
    "turn_entry",
    "verdict",
]
