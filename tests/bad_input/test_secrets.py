"""No secret in any output or artefact, whatever shape of reply echoes it.

A proxy's debug page, a JSON error quoting the header, a 200 that is not JSON, a
body cut off mid-key, an answer that echoes the request: each run goes through the
plugin as a user runs it (JUnit XML, the JSON report, ``-l`` locals and ``-vv``
included), and every file and output is grepped for the key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_evomemory.testing.fixtures import ServerFactory
from pytest_evomemory.testing.scripted_server import Fault, Script, final_answer, text

from .conftest import KEY_VARIABLE, SECRET, assert_no_internal_error, everything_written, tiny_run_config

_HTML = (
    "<html><body><h1>502 Bad Gateway</h1><table>"
    f"<tr><td>Authorization</td><td>Bearer {SECRET}</td></tr>"
    "<tr><td>User-Agent</td><td>pytest-evomemory</td></tr></table></body></html>"
).encode()
_ECHOED_HEADERS = f"POST /v1/chat/completions\r\nAuthorization: Bearer {SECRET}\r\nAccept: */*\r\n".encode()

#: reply shape -> the reply (one per model call; every call gets the same shape)
SHAPES: dict[str, Fault | dict[str, object]] = {
    "json_error_401": Fault(401, {"error": {"message": f"Incorrect API key provided: {SECRET}.", "type": "auth"}}),
    "json_error_other_shape": Fault(403, {"detail": f"key {SECRET} has no access", "headers": {"authorization": f"Bearer {SECRET}"}}),
    "html_page_502": Fault(502, raw=_HTML, content_type="text/html"),
    "non_json_200": Fault(200, raw=_ECHOED_HEADERS, content_type="text/plain"),
    "truncated_200": Fault(200, raw=b'{"choices": [{"message": {"content": "debug: Bearer ' + SECRET[:-7].encode(), content_type="application/json"),
    "truncated_error_mid_key": Fault(400, raw=b"Authorization header was: " + SECRET[:-12].encode()),
    "answer_echoes_headers": final_answer(f"Authorization: Bearer {SECRET}"),
    "plain_text_echoes_key": text(f"your key is {SECRET}"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_output_or_artefact_holds_the_key(
    pytester: pytest.Pytester,
    scripted_openai_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    isolated_cache: Path,
    shape: str,
) -> None:
    reply = SHAPES[shape]
    server = scripted_openai_server(Script([], then=lambda request: reply))
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    run = tiny_run_config(pytester.path, server.base_url, model={"cache": True})
    result = pytester.runpytest(
        f"--evomemory-config={run}", "-p", "no:randomly", "-p", "no:cacheprovider", "-l", "-vv",
        f"--junitxml={pytester.path / 'junit.xml'}",
        "--json-report", f"--json-report-file={pytester.path / 'report.json'}",
    )
    assert_no_internal_error(result)
    assert server.requests, "the run made no model call"
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    written = everything_written(pytester, result, isolated_cache)
    assert {"junit.xml", "report.json", "scores.jsonl", "summary.json", "report.html"} <= {
        Path(name).name for name in written
    }
    leaks = [name for name, content in written.items() if SECRET[:12] in content]
    assert leaks == []
    summary = json.loads((pytester.path / "results" / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2
