"""What leaves for a terminal or a report is redacted in every spelling and inert.

Two classes of issue 23, tested as a user runs the plugin (serial and ``-n 2``):

* secrets in every spelling: a server's 401 body quoting the key URL-encoded,
  base64-encoded (alone or inside a ``Basic`` header's ``user:KEY``), JSON- or
  HTML-escaped or hex, and a user's agent raising with ``OPENAI_API_KEY``'s value,
  must not reach the terminal, JUnit XML, the JSON report, the run directory or the
  response cache;
* hostile text at the terminal: escape sequences (title, clear screen, OSC 8 links,
  OSC 52 clipboard), other C0/C1 controls and bidirectional overrides that a model
  server, or the user's agent, puts in an error must be shown, not obeyed: no raw
  ESC, BEL or C1 character in the run's output, while JUnit XML and the JSON report
  stay parseable.
"""

from __future__ import annotations

import base64
import html
import json
import re
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_evomemory.analysis.stats import Proportion
from pytest_evomemory.analysis.summary import StreamMetrics
from pytest_evomemory.reporting.terminal import format_comparison, format_table
from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import (
    FEEDBACK_ACKNOWLEDGEMENT,
    Fault,
    Script,
    final_answer,
    text,
)
from pytest_evomemory.util.redaction import MASK, redact, register_secret
from pytest_evomemory.util.text import inert

from .conftest import (
    KEY_VARIABLE,
    SECRET,
    assert_no_internal_error,
    everything_written,
    tasks_file,
    tiny_run_config,
)

#: A terminal obeys these: C0 controls but newline and tab, DEL, C1 controls, the
#: line/paragraph separators and the bidirectional controls.
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

#: What a hostile server (or agent) writes: a window title, clear screen, an OSC 8
#: link, an OSC 52 clipboard write, a one-byte CSI, a bidi override, BEL, CR, NUL.
HOSTILE = (
    "\x1b]0;pwned-title\x07\x1b[2J\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\"
    "\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eevil\u2066 \x00\x08\r\x0c done"
)


def _spellings(secret: str) -> dict[str, str]:
    """Each way a server or proxy may echo ``secret``."""
    raw = secret.encode()
    return {
        "percent_upper": urllib.parse.quote(secret, safe=""),
        "percent_lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(secret, safe="")),
        "percent_partial": secret.replace("-", "%2D"),
        "percent_plus": urllib.parse.quote_plus(secret + " x"),
        "percent_twice": urllib.parse.quote(urllib.parse.quote(secret, safe=""), safe=""),
        "base64": base64.b64encode(raw).decode(),
        "base64_urlsafe_unpadded": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic_user_key": "Basic " + base64.b64encode(b"user:" + raw).decode(),  # key at alignment 2
        "base64_alignment_1": base64.b64encode(b"x" + raw + b"!").decode(),
        "base64_alignment_0": base64.b64encode(b"abc" + raw).decode(),
        "json_unicode_escapes": "".join(f"\\u{ord(c):04x}" for c in secret),
        "json_escaped_slash": base64.b64encode(b"ab" + raw).decode().replace("/", "\\/"),
        "html_entities": "".join(f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):X};" for i, c in enumerate(secret)),
        "html_named": html.escape(secret).replace("+", "&plus;").replace("/", "&sol;").replace("_", "&lowbar;"),
        "hex": raw.hex(),
        "hex_upper": raw.hex().upper(),
    }


# --------------------------------------------------------------------------- the one function, directly


SPELLED = "Ab3+Cd4/Ef5=Gh6_Ij7-Kl8-spelled"


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    register_secret(SPELLED)


@pytest.mark.parametrize("shape", sorted(_spellings(SPELLED)))
@pytest.mark.parametrize("frame", ["json", "html", "header", "glued"])
def test_every_spelling_of_a_secret_is_masked(shape: str, frame: str) -> None:
    spelled = _spellings(SPELLED)[shape]
    body = {
        "json": f'{{"error": {{"message": "Incorrect API key provided: {spelled}."}}}}',
        "html": f"<tr><td>X-Forwarded-Auth</td><td>{spelled}</td></tr>",
        "header": f"proxy echo: x-upstream: {spelled}\r\n",
        "glued": f"key={spelled}&next=1",
    }[frame]
    cleaned = redact(body)
    assert spelled not in cleaned and MASK in cleaned
    assert SPELLED not in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "Score 50% & more: \\frac{1}{2} \\u00e9t\\u00e9 &amp; &#233;",
        "aGVsbG8gd29ybGQ= is base64 for hello world; 68656c6c6f is hex",
        "%41%42%43 is ABC, &#65;&#66; too",
    ],
)
def test_escapes_without_a_secret_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_inert_shows_what_a_terminal_would_obey() -> None:
    shown = inert(HOSTILE)
    assert OBEYED.search(shown) is None
    assert "\\x1b]0;pwned-title\\x07" in shown and "\\u202eevil" in shown and "\\x9b31m" in shown
    assert inert(shown) == shown  # idempotent: its output is printable ASCII where it changed anything
    assert inert("line one\n\tline two") == "line one\n\tline two"
    assert inert("line one\n\tline two", one_line=True) == "line one\\x0a\\x09line two"
    assert inert("caf\u00e9 \u6771\u4eac \U0001f600 a\u200db") == "caf\u00e9 \u6771\u4eac \U0001f600 a\u200db"
    assert inert("lone \ud800 surrogate") == "lone \\ud800 surrogate"


def test_tables_show_names_from_artefacts_inertly() -> None:
    stream = StreamMetrics(f"s{HOSTILE}", tasks=2, correct=1)
    stream.groups = {}
    from pytest_evomemory.analysis.summary import GroupMetrics

    stream.groups[f"g{HOSTILE}"] = GroupMetrics(tasks=2, correct=1)
    lines = format_table({"s": stream, "overall": StreamMetrics("overall", tasks=2, correct=1)})
    assert not any(OBEYED.search(line) for line in lines)
    entry = {"label": f"run{HOSTILE}", "present": True, **Proportion(1, 2).to_dict()}
    versus = {"difference": 0.0, "ci_low": -0.5, "ci_high": 0.5, "mcnemar_p": 1.0, "paired_tasks": 2}
    scope = {"runs": [entry, entry], "vs_baseline": [versus]}
    document = {
        "baseline": f"base{HOSTILE}", "streams": {f"st{HOSTILE}": scope}, "overall": scope,
        "warnings": [f"warn{HOSTILE}"],
    }
    lines = format_comparison(document)
    assert len(lines) > 3 and not any(OBEYED.search(line) for line in lines)


# --------------------------------------------------------------------------- through the plugin

_ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider")


def _reports(pytester: pytest.Pytester) -> tuple[str, str]:
    return (
        f"--junitxml={pytester.path / 'junit.xml'}",
        f"--json-report-file={pytester.path / 'report.json'}",
    )


def _parseable(pytester: pytest.Pytester) -> None:
    ET.parse(pytester.path / "junit.xml")
    json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))


def test_a_401_quoting_the_key_in_another_spelling_leaks_nowhere(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
) -> None:
    """One task per spelling: each task's only model call gets a 401 quoting the key
    in that spelling (a model error leaves no feedback turn)."""
    spellings = _spellings(SECRET)
    replies = [
        Fault(401, {"error": {"message": f"Incorrect API key provided: {spelled}", "type": "auth"}})
        for spelled in spellings.values()
    ]
    server = scripted_openai_server(Script(replies))
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, model={"cache": True})
    tasks_file(pytester.path, count=len(replies))
    result = pytester.runpytest(f"--evomemory-config={run}", *_ARGS, "-l", "-rA", "--json-report", *_reports(pytester))
    assert_no_internal_error(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(server.requests) == len(replies)
    written = everything_written(pytester, result, isolated_cache)
    assert {"junit.xml", "report.json", "scores.jsonl", "events.jsonl", "report.html"} <= {Path(n).name for n in written}
    leaks = sorted(
        (name, shape) for name, content in written.items() for shape, spelled in [("plain", SECRET), *spellings.items()]
        if spelled in content
    )
    assert leaks == []
    masked = re.findall(r"Incorrect API key provided: (?:Basic )?\*\*\*", result.stdout.str())
    assert len(masked) >= len(replies)


#: The user's agent: it prints and logs the key, holds it in a local, and raises with
#: it (and with a hostile escape sequence) in its task turn and its feedback turn.
LEAKY_AGENT = '''
import logging
import os

import pytest


class Leaky:
    def reset(self):
        pass

    def respond(self, stimulus, turn):
        key = os.environ["OPENAI_API_KEY"]
        print("agent stdout:", key)
        logging.getLogger("agent").warning("agent log: %s", key)
        raise RuntimeError(f"upstream refused key {key} (as {key.encode().hex()}) HOSTILE")


@pytest.fixture(scope="session")
def evomemory_agent_factory():
    return lambda config, memory: Leaky()
'''


@pytest.mark.parametrize("workers", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_an_agent_raising_with_the_key_leaks_it_nowhere(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
    workers: list[str],
) -> None:
    pytester.makeconftest(LEAKY_AGENT.replace("HOSTILE", HOSTILE.encode("unicode_escape").decode()))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, scripted_openai_server().base_url)
    result = pytester.runpytest(
        f"--evomemory-config={run}", *_ARGS, *workers, "-l", "-rA", "--tb=long", "--json-report", *_reports(pytester)
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str() + result.stderr.str()
    assert "upstream refused key *** (as ***)" in output  # the failure is shown, the key is not
    assert OBEYED.search(output) is None, [line for line in output.splitlines() if OBEYED.search(line)][:3]
    assert "\\x1b]52;c;" in output
    _parseable(pytester)
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    crashes = [test[when]["crash"]["message"] for test in report["tests"] for when in ("call", "teardown")]
    assert len(crashes) == 4 and all("upstream refused key *** (as ***)" in crash for crash in crashes)
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert 'message="RuntimeError: upstream refused key *** (as ***)' in junit
    written = everything_written(pytester, result, isolated_cache)
    spellings = [SECRET, *_spellings(SECRET).values()]
    leaks = sorted({name for name, content in written.items() for spelled in spellings if spelled in content})
    assert leaks == []


@pytest.mark.parametrize("workers", [[], pytest.param(["-n", "2"], marks=pytest.mark.slow)], ids=["serial", "xdist"])
def test_escape_sequences_from_the_server_are_shown_not_obeyed(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    workers: list[str],
) -> None:
    """Three tasks, three shapes of hostile reply: a JSON error's message, an HTML
    error page, and a 200 whose text never calls final_answer (twice: max_steps)."""
    replies = [
        Fault(401, {"error": {"message": f"denied {HOSTILE}", "type": "auth"}}),
        Fault(502, raw=f"<html><body>{HOSTILE}</body></html>".encode(), content_type="text/html"),
        text(f"no tool call, just {HOSTILE}"),
        text(f"no tool call, just {HOSTILE}"),
    ]
    server = scripted_openai_server(Script(replies, then=lambda request: final_answer(FEEDBACK_ACKNOWLEDGEMENT)))
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, max_steps=2)
    tasks_file(pytester.path, count=3)
    result = pytester.runpytest(f"--evomemory-config={run}", *_ARGS, *workers, "-rA", "--json-report", *_reports(pytester))
    assert_no_internal_error(result)
    assert len(server.requests) >= len(replies)
    output = result.stdout.str() + result.stderr.str()
    assert OBEYED.search(output) is None, [line for line in output.splitlines() if OBEYED.search(line)][:3]
    assert "HTTP status 401: denied \\x1b]0;pwned-title\\x07\\x1b[2J\\x1b]8;;https://evil.example/" in output
    result.stdout.fnmatch_lines(["FAILED evomemory::test_task[[]mine/t*[]] - *"])
    _parseable(pytester)
