"""Database passwords never reach an artefact, report, log or error message."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml


def run_config(directory: Path, postgres: dict[str, Any], password_env: str) -> Path:
    document = {
        "name": "secret_scan",
        "benchmark": {"benchmark": "sample", "limit": 3},
        "agent": {"kind": "recall_baseline", "memory_strategy": "deterministic_recall"},
        "memory": {"backend": "postgres", "postgres": {**postgres, "password_env": password_env}},
    }
    path = directory / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def everything_written(pytester: pytest.Pytester, result: pytest.RunResult) -> list[str]:
    texts = [result.stdout.str(), result.stderr.str()]
    for path in pytester.path.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return texts


@pytest.fixture
def distinctive_role(postgres_settings: dict[str, Any]) -> Any:
    """A login role whose password is a string nothing else would ever print."""
    import psycopg

    role, password = f"evomemory_scan_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    admin = psycopg.connect(
        host=postgres_settings["host"], port=postgres_settings["port"], user=postgres_settings["user"],
        dbname=postgres_settings["dbname"], password=os.environ.get("PGPASSWORD"), autocommit=True,
    )
    with admin:
        admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'")
        try:
            yield role, password
        finally:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_the_database_password_appears_in_no_output_of_a_run(
    pytester: pytest.Pytester,
    postgres_settings: dict[str, Any],
    distinctive_role: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    role, password = distinctive_role
    monkeypatch.setenv("EVOMEMORY_SCAN_PASSWORD", password)
    config = run_config(pytester.path, {**postgres_settings, "user": role}, "EVOMEMORY_SCAN_PASSWORD")
    result = pytester.runpytest_subprocess(
        f"--evomemory-config={config}", "-p", "no:randomly", "--junitxml=junit.xml", "-v"
    )
    result.assert_outcomes(passed=6)
    assert (pytester.path / "evomemory-results" / "secret_scan" / "report.html").is_file()
    texts = everything_written(pytester, result)
    assert len(texts) > 8
    assert not [text for text in texts if password in text]


def test_a_wrong_password_is_not_echoed_in_the_error(
    pytester: pytest.Pytester, postgres_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-pw-7f3a9c1e5d"
    monkeypatch.setenv("EVOMEMORY_SCAN_PASSWORD", wrong)
    config = run_config(pytester.path, postgres_settings, "EVOMEMORY_SCAN_PASSWORD")
    result = pytester.runpytest_subprocess(f"--evomemory-config={config}", "-p", "no:randomly")
    result.assert_outcomes(errors=2, skipped=4)  # one failure per stream that cannot start
    result.stdout.fnmatch_lines(["*could not start*could not connect*"])
    assert not [text for text in everything_written(pytester, result) if wrong in text]
