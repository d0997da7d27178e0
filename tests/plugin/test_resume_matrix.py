"""The resume matrix of issue 16 §1, run through the plugin as a user runs it.

A temp agent repository whose conftest.py overrides ``evomemory_agent_factory``
(a model-free ``tool_use`` agent that calls the memory's declared tools by role:
it recalls with the prompt, answers from the first recalled "Q/A" record, and in
the feedback turn forgets the record that misled it, where the memory has a
``forget`` tool, and retains the Q/A plus a fact that a consolidating memory
merges) and ``evomemory_memory_factory`` (the memory under test). The run is
killed with SIGKILL from inside the agent — the whole run: under ``-n 2`` the
worker kills its sibling worker and the controller first — and resumed with
``--evomemory-resume``.

After the last resume, the scores (``correct``/``extracted`` per task), every
stream's memory at its end (the state files of the snapshot taken after its
last episode) and the recalls of every task run after a resume equal those of
an uninterrupted run; a memory without snapshots is refused with the one-line
message, exit 4 before any task (nothing new written) and no traceback.

Memories: built-in ``inprocess`` and ``sqlite``; ``renamed`` (tools
``note``/``lookup``); ``forgetful`` (a ``forget`` tool the agent uses);
``consolidating`` (tests/memory/consolidating_adapter.py: ``remember``/``search``/
``forget``, derived records with new ids); ``nosnap`` (no snapshot support);
the memory libraries ``mem0`` (tools ``add``/``search``/``delete``, the agent
deletes what misled it) and ``langmem`` (``manage_memory``/``search_memory``),
built-in backends with ``infer: false`` and the hashing embedder (no model).
Modes: serial and ``-n 2``. Kills: at a task turn, at a feedback turn, and
three kills in one run. Selection (each memory in one mode; each kill kind in each
mode; 8 cases instead of 48):

    memory         serial            -n 2
    inprocess      task              -
    sqlite         -                 task
    renamed        three kills       -
    forgetful      -                 feedback
    consolidating  -                 three kills
    nosnap         task (refused)    -
    mem0           feedback          -
    langmem        -                 task

The libraries give their records random ids (UUIDs) and wall-clock timestamps,
which no two runs share: their memories and recalls are compared with each id
replaced by its place in the order the store was given its records, and each
timestamp by a placeholder; scores, contents and similarity scores stay exact.

Serially the streams run one after the other (sample_facts, then sample_choice),
so the kill points of one run follow that order; under ``-n 2`` the two streams
race, so the three kills of one run are all in one stream.

Under ``-n 2`` the controller writes the result journal from the workers' reports,
so a kill -9 of the whole run can leave the journal several episodes behind the
snapshots a worker already saved; only the last two are kept, and resume then
refuses the stream ("holds no memory snapshot taken after episode N"). The
matrix kills once the controller has caught up (the agent stops the other
worker, waits, then kills); the last test kills without waiting and accepts an
exact resume or that clean refusal.

The uninterrupted reference is run once per memory (serially; the streams are
independent, so ``-n 2`` must score the same) and shared by both modes.

tests/plugin/test_resume_matrix_damage.py damages, between the kill and the
resume, the snapshot slot the resume would restore from.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ..conftest import read_jsonl
from ..memory.conftest import skip_without_extra

REPO = Path(__file__).resolve().parents[2]

CONFTEST = '''
import glob, json, os, signal, time
import pytest

ROLES = {"recall": "recall", "lookup": "recall", "search": "recall", "search_memory": "recall",
         "retain": "retain", "note": "retain", "remember": "retain", "add": "retain", "manage_memory": "retain",
         "forget": "forget", "delete": "forget"}
FACTORIES = {
    "renamed": "tests.plugin.resume_matrix_memories:renamed",
    "forgetful": "tests.plugin.resume_matrix_memories:forgetful",
    "nosnap": "tests.plugin.resume_matrix_memories:nosnap",
    "consolidating": "tests.memory.consolidating_adapter:create",
}


def scored(out):
    """stream -> task ids in the run's result journal (the controller's, under xdist)."""
    done = {}
    try:
        with open(os.path.join(out, "scores.jsonl")) as journal:
            for line in journal:
                try:
                    record = json.loads(line)
                except ValueError:  # blank, or the line the controller is writing now
                    continue
                done.setdefault(record["stream"], set()).add(record["task_id"])
    except OSError:
        pass
    return done


def caught_up(out, stream, task_id):
    """Whether the journal holds this stream's previous task and is at most one
    episode behind every stream's latest memory snapshot."""
    done = scored(out)
    number = int(task_id[1:])
    if number > 1 and f"{task_id[0]}{number - 1:02d}" not in done.get(stream, ()):
        return False
    for label in glob.glob(os.path.join(out, "memory", "*", "slot-*", "episodes.json")):
        try:
            with open(label) as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            continue
        if not isinstance(saved, dict) or "episodes" not in saved:
            continue  # a label being rewritten in place
        if saved["episodes"] - len(done.get(saved["stream"], ())) > 1:
            return False
    return True


def kill_the_run(stimulus):
    """kill -9 of the whole run. Under xdist the other workers are stopped first and
    the controller is given time to journal the results it already received: the
    matrix tests resume from a journal as up to date as the snapshots (a journal
    lagging further behind is refused, see the module docstring)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        parent = os.getppid()
        siblings = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if ppid == parent:
                    siblings.append(int(entry))
                    os.kill(int(entry), signal.SIGSTOP)
        try:  # whatever happens while waiting, nothing is left stopped
            deadline = time.monotonic() + (0 if os.environ.get("NO_CATCH_UP") else 20)
            while time.monotonic() < deadline and not caught_up(os.environ["OUT_DIR"], stimulus.stream, stimulus.task_id):
                time.sleep(0.02)
        finally:
            os.kill(parent, signal.SIGKILL)
            for pid in siblings:
                os.kill(pid, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def hits(result):
    """A recall tool's records as {id, content}: the built-in format, Mem0's
    {"results": [{"id", "memory"}]} or LangMem's store items."""
    value = json.loads(result)
    if isinstance(value, dict):
        return [{"id": hit["id"], "content": hit["memory"]} for hit in value["results"]]
    return [{"id": hit["key"], "content": hit["value"]["content"]} if "value" in hit else hit for hit in value]


class MatrixAgent:
    def __init__(self):
        self._prompt = ""
        self._used = None

    def reset(self):
        pass

    def respond(self, stimulus, turn):
        tools = {ROLES[spec.name]: (spec.name, (spec.parameters.get("required") or ["content"])[0])
                 for spec in turn.tools if spec.name in ROLES}
        here = f"{stimulus.task_id}/{stimulus.kind}"
        if stimulus.kind == "task":
            self._prompt, self._used = stimulus.prompt, None
            name, argument = tools["recall"]
            result = turn.call_tool(name, {argument: stimulus.prompt})
            with open(os.environ["RECALL_LOG"], "a") as log:
                log.write(json.dumps([stimulus.stream, stimulus.task_id, result]) + "\\n")
            answer = "unknown"
            for hit in hits(result):
                if "\\nA: " in hit["content"]:
                    answer, self._used = hit["content"].split("\\nA: ", 1)[1], hit["id"]
                    break
            if os.environ.get("KILL_AT") == here:
                kill_the_run(stimulus)
            turn.call_tool("final_answer", {"answer": answer})
            return
        if stimulus.submitted_answer != stimulus.target and self._used and "forget" in tools:
            name, argument = tools["forget"]
            turn.call_tool(name, {argument: self._used})
        name, argument = tools["retain"]
        turn.call_tool(name, {argument: f"Q: {self._prompt}\\nA: {stimulus.target}"})
        turn.call_tool(name, {argument: f"the latest answer is {stimulus.target}"})
        if os.environ.get("KILL_AT") == here:
            kill_the_run(stimulus)
        turn.call_tool("final_answer", {"answer": "Feedback recorded"})


@pytest.fixture(scope="session")
def evomemory_agent_factory():
    return lambda config, memory: MatrixAgent()


@pytest.fixture(scope="session")
def evomemory_memory_factory():
    reference = FACTORIES.get(os.environ["MATRIX_MEMORY"])
    if reference is None:
        return None  # a built-in backend, named in run.yaml
    module, name = reference.split(":")
    return getattr(__import__(module, fromlist=[name]), name)
'''

RUN = """
name: matrix
benchmark: {{benchmark: sample}}
agent: {{kind: recall_baseline, memory_strategy: tool_use}}
memory: {memory}
"""

#: The memory libraries (built-in backends whose records have random ids and timestamps).
LIBRARIES = ("mem0", "langmem")
#: The memory config of each built-in backend in the matrix (the others are conftest factories).
BUILTIN = {
    "inprocess": "{backend: inprocess, top_k: 4}",
    "sqlite": "{backend: sqlite, top_k: 4}",
    "mem0": "{backend: mem0, top_k: 4, embedder: hashing, mem0: {infer: false}}",
    "langmem": "{backend: langmem, top_k: 4, embedder: hashing, langmem: {infer: false}}",
}

#: memory -> (serial kills, ``-n 2`` kills); each run of a case is killed at the next point.
#: Each memory runs in one mode, and each mode meets each kind of kill (a task turn, a
#: feedback turn, three kills in one run): 8 cases cover what 15 did.
KILLS: dict[str, tuple[list[str], list[str]]] = {
    "inprocess": (["f06/task"], []),
    "sqlite": ([], ["f03/task"]),
    "renamed": (["f03/task", "f08/feedback", "c06/task"], []),
    "forgetful": ([], ["f06/feedback"]),
    "consolidating": ([], ["f03/task", "f06/feedback", "f10/task"]),
    "nosnap": (["f06/task"], []),
    "mem0": (["f06/feedback"], []),
    "langmem": ([], ["c04/task"]),
}
CASES = [
    pytest.param(memory, mode, kills, id=f"{memory}-{mode}", marks=[pytest.mark.slow] if memory in LIBRARIES else [])
    for memory, (serial, xdist) in KILLS.items()
    for mode, kills in (("serial", serial), ("xdist", xdist))
    if kills
]


class Outcome:
    """What an uninterrupted or resumed run produced that resume must keep equal."""

    def __init__(self, run_dir: Path, recall_log: Path) -> None:
        self.scores = sorted(
            (s["stream"], s["task_id"], s["correct"], s["extracted"]) for s in read_jsonl(run_dir / "scores.jsonl")
        )
        # the streams' snapshot directories (a library's live store may sit beside them)
        streams = sorted(path for path in (run_dir / "memory").glob("sample_*") if any(path.glob("slot-*")))
        self.memories = {stream.name: final_state(stream) for stream in streams}
        self.forgotten = sum(
            write["role"] == "forget" for r in read_jsonl(run_dir / "responses.jsonl") for write in r["memory_writes"]
        )
        # the last recall logged for a task: a task killed mid-episode is run again
        self.recalls = {(stream, task): result for stream, task, result in logged_recalls(recall_log)}
        #: uuid -> its place in the order the stores were given their records
        self.ids: dict[str, str] = {}
        for stream in sorted(self.memories):
            for text in self.memories[stream].values():
                for found in UUID.findall(text):
                    self.ids.setdefault(found, f"<record {len(self.ids)}>")

    def canonical(self, text: str) -> str:
        """``text`` with every id of a record replaced by its place, every timestamp by a placeholder."""
        return TIMESTAMP.sub("<time>", UUID.sub(lambda found: self.ids.get(found.group(), "<unknown id>"), text))

    def comparable(self) -> tuple[object, ...]:
        memories = {s: {name: self.canonical(text) for name, text in files.items()} for s, files in self.memories.items()}
        recalls = {key: self.canonical(result) for key, result in self.recalls.items()}
        return self.scores, memories, recalls


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?\+00:00")


def logged_recalls(path: Path) -> list[tuple[str, str, str]]:
    """The agent's recall log: (stream, task id, the recall tool's result) per task turn.

    Under xdist the kill of the run can land while another worker is writing its line:
    that torn tail belongs to a task that never finished (it runs again on resume), so
    it is cut from the file here, before the resumed run appends after it.
    """
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        path.write_text(text, encoding="utf-8")
    return [tuple(json.loads(line)) for line in text.splitlines()]


def final_state(stream_dir: Path, episodes: int = 12) -> dict[str, str]:
    """The state files of the snapshot taken after the stream's last (12th) episode."""
    for slot in stream_dir.glob("slot-*"):
        label = json.loads((slot / "episodes.json").read_text(encoding="utf-8"))
        if label.get("episodes") == episodes:
            files = {}
            for path in sorted((slot / "state").iterdir()):
                if path.name.startswith(".") and path.suffix == ".tmp":  # a write cut short (atomicfile.py)
                    continue
                files[path.name] = path.read_text(encoding="utf-8")
            if "manifest.json" in files:  # RecordLog: its records are the prefix of the stream's log it names
                manifest = json.loads(files["manifest.json"])
                log = manifest.pop("log")
                path = stream_dir / "log" / f"records-{log['generation']}.jsonl"
                files["records.jsonl"] = path.read_bytes()[: log["bytes"]].decode()
                files["manifest.json"] = json.dumps(manifest, sort_keys=True)
            return files
    raise AssertionError(f"{stream_dir}: no snapshot after episode {episodes}")


_REFERENCES: dict[str, Outcome] = {}


@pytest.fixture(autouse=True)
def inner_runs_are_not_xdist_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this suite itself runs under xdist, its worker's variables would reach the
    inner runs, and a serial inner run would take itself for an xdist worker."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # plugins the agent repository does not use cost half of each run's start-up
    quiet = ("no:randomly", "no:cacheprovider", "no:hypothesispytest", "no:anyio")
    # a bound, so that a kill sequence gone wrong fails this test instead of hanging CI
    return pytester.runpytest_subprocess(*(arg for plugin in quiet for arg in ("-p", plugin)), *args, timeout=240)


def reference(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, memory: str) -> Outcome:
    if memory not in _REFERENCES:
        monkeypatch.setenv("RECALL_LOG", str(pytester.path / "reference-recalls.log"))
        result = run(pytester, "--evomemory-config=run.yaml", "--evomemory-output-dir=reference")
        assert result.ret == 0, result.stdout.str()
        _REFERENCES[memory] = Outcome(pytester.path / "reference", pytester.path / "reference-recalls.log")
    return _REFERENCES[memory]


@pytest.mark.parametrize(("memory", "mode", "kills"), CASES)
def test_a_killed_run_resumes_to_the_uninterrupted_memory_or_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, memory: str, mode: str, kills: list[str]
) -> None:
    pytester.makeconftest(CONFTEST)
    if memory in LIBRARIES:
        skip_without_extra(memory)
    (pytester.path / "run.yaml").write_text(RUN.format(memory=BUILTIN.get(memory, BUILTIN["inprocess"])), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), str(REPO)]))
    monkeypatch.setenv("MATRIX_MEMORY", memory)
    monkeypatch.delenv("KILL_AT", raising=False)
    monkeypatch.setenv("OUT_DIR", str(pytester.path / "out"))
    refused = memory == "nosnap"
    expected = None if refused else reference(pytester, monkeypatch, memory)

    xdist = ["-n", "2"] if mode == "xdist" else []
    log = pytester.path / "recalls.log"
    monkeypatch.setenv("RECALL_LOG", str(log))
    first = True
    resumed_from: list[int] = []
    for kill_at in kills:
        monkeypatch.setenv("KILL_AT", kill_at)
        resumed_from.append(len(logged_recalls(log)))
        args = ["--evomemory-config=run.yaml", "--evomemory-output-dir=out"] if first else ["--evomemory-resume=out"]
        killed = run(pytester, *args, *xdist)
        assert killed.ret != 0, killed.stdout.str()
        first = False
        if refused:
            break
    monkeypatch.delenv("KILL_AT")
    resumed_from.append(len(logged_recalls(log)))
    scores_file = pytester.path / "out" / "scores.jsonl"
    scores_before = scores_file.read_bytes() if scores_file.exists() else b""
    final = run(pytester, "--evomemory-resume=out", *xdist)
    output = final.stdout.str() + final.stderr.str()

    if refused:  # before any task (issue 22 item 7): exit 4, and nothing new is written
        assert final.ret == pytest.ExitCode.USAGE_ERROR, output
        assert "Traceback" not in output
        assert (scores_file.read_bytes() if scores_file.exists() else b"") == scores_before
        message = "cannot be resumed: it does not implement snapshot(directory) and restore(directory)"
        lines = [line for line in output.splitlines() if message in line]
        assert lines, output
        # serially only the killed stream was under way; under -n 2 both may be (the first is named)
        streams = ["sample_facts" if kills[0].startswith("f") else "sample_choice"] if mode == "serial" else [
            "sample_facts", "sample_choice"]
        assert any(f"stream '{stream}'" in line for line in lines for stream in streams), lines
        return

    assert final.ret == 0, output
    got = Outcome(pytester.path / "out", log)
    assert expected is not None
    assert got.scores == expected.scores
    if memory in LIBRARIES:
        assert got.comparable() == expected.comparable()
        assert "<unknown id>" not in repr(got.comparable())
    else:
        assert got.memories == expected.memories
        assert got.recalls == expected.recalls
    assert set(got.memories) == {"sample_facts", "sample_choice"}
    if memory in ("forgetful", "consolidating", "mem0"):  # the agent did forget records
        assert expected.forgotten > 0
    if memory == "consolidating":  # and recalled derived records with ids retain never returned
        assert any("(earlier: " in result for result in expected.recalls.values())
    # every resumed run started after the kill and recalled what the reference recalled
    recalled = logged_recalls(log)
    for start in resumed_from[1:]:
        stream, task, result = recalled[start]
        if memory in LIBRARIES:
            assert expected.canonical(expected.recalls[(stream, task)]) == got.canonical(result)
        else:
            assert expected.recalls[(stream, task)] == result


def test_an_xdist_run_killed_before_its_journal_caught_up_resumes_exactly_or_refuses_cleanly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CONFTEST)
    (pytester.path / "run.yaml").write_text(RUN.format(memory=BUILTIN["inprocess"]), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), str(REPO)]))
    monkeypatch.setenv("MATRIX_MEMORY", "consolidating")
    monkeypatch.setenv("OUT_DIR", str(pytester.path / "out"))
    monkeypatch.delenv("KILL_AT", raising=False)
    expected = reference(pytester, monkeypatch, "consolidating")
    monkeypatch.setenv("RECALL_LOG", str(pytester.path / "recalls.log"))
    monkeypatch.setenv("NO_CATCH_UP", "1")
    monkeypatch.setenv("KILL_AT", "f09/feedback")
    killed = run(pytester, "--evomemory-config=run.yaml", "--evomemory-output-dir=out", "-n", "2")
    assert killed.ret != 0
    monkeypatch.delenv("KILL_AT")
    final = run(pytester, "--evomemory-resume=out", "-n", "2")
    output = final.stdout.str() + final.stderr.str()
    assert "Traceback" not in output
    if final.ret == 0:
        got = Outcome(pytester.path / "out", pytester.path / "recalls.log")
        assert (got.scores, got.memories, got.recalls) == (expected.scores, expected.memories, expected.recalls)
        return
    refusals = [line for line in output.splitlines() if "holds no memory snapshot taken after episode" in line]
    assert refusals or "no readable run.json" in output, output
