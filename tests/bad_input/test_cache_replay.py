"""A replayed reply gets the cleaning a live one gets; a lost report fails the run.

The response cache replays what is on disk: an entry written by an older version,
edited, or damaged. Whatever it holds, the agent must receive what a live reply of
the same body would have given (:func:`..models.cleaning.clean_completion`, the
one step both paths call): a lone surrogate replayed raw made report.html
unwritable while the run exited 0. And a report that cannot be written is a lost
result: the run fails (exit 1) and says how to render it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_evomemory.cli import main
from pytest_evomemory.models.cache import _read_entry
from pytest_evomemory.models.cleaning import clean_completion
from pytest_evomemory.models.openai_compat import completion_from_json
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import echo_policy
from pytest_evomemory.util.redaction import register_secret

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, tiny_run_config

ECHOED = "replay-Secret-Value-0042"

#: entry field -> a value a live reply's body could hold (as JSON text), for both paths
POISONS: dict[str, dict[str, Any]] = {
    "lone_surrogate_content": {"content": "a\ud800b"},
    "nul_content": {"content": "a\x00b"},
    "surrogate_in_arguments": {"tool_calls": [{"id": "c1", "name": "final_answer", "arguments": '{"answer": "x\\udfffy"}'}]},
    "surrogate_in_tool_name": {"tool_calls": [{"id": "c\ud83d", "name": "final\udc00answer", "arguments": "{}"}]},
    "echoed_key_content": {"content": f"debug: Bearer {ECHOED}"},
    "echoed_key_arguments": {"tool_calls": [{"id": "c1", "name": "final_answer", "arguments": f'{{"answer": "{ECHOED}"}}'}]},
    "negative_usage": {"usage": {"prompt_tokens": -5, "completion_tokens": 3}},
    "absurd_usage": {"usage": {"prompt_tokens": 10**30, "completion_tokens": 3}},
}


def _live(entry: dict[str, Any]) -> Any:
    """What the HTTP client makes of the same reply: parse, then its cleaning."""
    message: dict[str, Any] = {"role": "assistant", "content": entry.get("content")}
    if entry.get("tool_calls"):
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in entry["tool_calls"]
        ]
    payload = {"choices": [{"message": message, "finish_reason": "stop"}], "usage": entry.get("usage", {})}
    return clean_completion(completion_from_json(json.loads(json.dumps(payload))))


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_replayed_entry_is_cleaned_as_a_live_reply_is(tmp_path: Path, poison: str) -> None:
    register_secret(ECHOED)
    entry = {"format": 1, "content": None, "tool_calls": [], "usage": {}, "finish_reason": "stop", **POISONS[poison]}
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(entry), encoding="ascii")  # \\ud800 escapes, as a file may hold them
    replayed = _read_entry(path)
    assert replayed is not None and replayed.cached
    live = _live(entry)
    assert (replayed.content, replayed.tool_calls, replayed.usage) == (live.content, live.tool_calls, live.usage)
    text = json.dumps([replayed.content, [c.__dict__ for c in replayed.tool_calls]], ensure_ascii=False)
    text.encode("utf-8")  # every artefact can hold it
    assert ECHOED not in text


@pytest.mark.parametrize(
    "entry",
    [
        {"format": 1, "content": "x", "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}] * 65},
        {"format": 1, "content": "x", "tool_calls": "not a list"},
        {"format": 1, "content": "x", "usage": {"prompt_tokens": "NaN"}},
        {"format": 1, "content": 5},
    ],
    ids=["too_many_tool_calls", "tool_calls_not_a_list", "usage_string", "content_number"],
)
def test_an_entry_no_live_reply_could_give_is_a_miss_or_cleaned(tmp_path: Path, entry: dict[str, Any]) -> None:
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(entry), encoding="ascii")
    replayed = _read_entry(path)
    assert replayed is None or (replayed.usage.prompt_tokens == 0 and replayed.content == "x")


def _run(pytester: pytest.Pytester, run: Path) -> pytest.RunResult:
    return pytester.runpytest(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")


def test_a_poisoned_cache_replays_into_a_complete_report(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
) -> None:
    """As a user meets it: the cache holds a reply with a lone surrogate (here put
    there by editing the entries a first run wrote); the re-run replays it."""
    server = scripted_openai_server(echo_policy)
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, model={"cache": True})
    assert _run(pytester, run).ret == 0
    entries = list(isolated_cache.rglob("*.json"))
    assert entries
    for path in entries:
        entry = json.loads(path.read_text(encoding="utf-8"))
        for call in entry["tool_calls"]:
            arguments = json.loads(call["arguments"])
            if "answer" in arguments:
                arguments["answer"] = arguments["answer"] + "\ud800"
            call["arguments"] = json.dumps(arguments)  # ASCII: "\\ud800"
        entry["content"] = "note \udfff"
        path.write_text(json.dumps(entry), encoding="ascii")
    result = _run(pytester, run)
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["overall"]["cached_responses"] == 2  # both task turns (their feedback quotes a new answer)
    assert "could not be written" not in result.stdout.str()
    # the page holds only storable text: it reads as strict UTF-8 (its drill-down data
    # is compressed, so the replaced character is not searchable in the page's text)
    report = (pytester.path / "results" / "report.html").read_bytes().decode("utf-8")
    assert report.startswith("<!DOCTYPE html>")
    scores = [json.loads(line) for line in (pytester.path / "results" / "scores.jsonl").read_text().splitlines()]
    assert scores and all(score["raw_answer"].endswith("\ufffd") for score in scores)


#: A conftest that makes writing report.html fail as a full disk does.
FULL_DISK_AT_REPORT = """
import pytest_evomemory.reporting.html as html


def _full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")


html.write_html_report = _full_disk
"""


def test_a_report_that_cannot_be_written_fails_the_run(
    pytester: pytest.Pytester, scripted_openai_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(FULL_DISK_AT_REPORT)
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, scripted_openai_server(echo_policy).base_url)
    result = pytester.runpytest_subprocess(f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "evomemory: the HTML report could not be written: OSError: *No space left on device*; the session fails "
        "(the results are written: 'evomemory report *results' renders it again)",
    ])
    assert json.loads((pytester.path / "results" / "summary.json").read_text())["overall"]["tasks"] == 2

    import importlib

    from pytest_evomemory import reporting
    from pytest_evomemory.runtime.session import EXIT_FAILED

    def full_disk(*args: object, **kwargs: object) -> Path:
        raise OSError(28, "No space left on device")

    # An in-process pytester run earlier in this worker restores sys.modules but can
    # leave the package attribute on an older copy of the module: patch every live copy.
    fresh = importlib.import_module("pytest_evomemory.reporting.html")
    for module in {id(m): m for m in (fresh, vars(reporting)["html"])}.values():
        monkeypatch.setattr(module, "write_html_report", full_disk)
    monkeypatch.chdir(pytester.path)
    assert main(["run", "--config", str(run), "-q"]) == EXIT_FAILED
