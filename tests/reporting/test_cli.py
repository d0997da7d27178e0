"""The ``evomemory`` command: exit codes and one-line errors, as a shell script sees them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_evomemory.cli import main

from .conftest import parse_html

MakeRun = Callable[..., Path]
STREAMS = {"facts": [False, True], "choice": [True]}


def console_script() -> list[str]:
    """The installed entry point when there is one, so its declaration is tested too."""
    script = Path(sys.executable).with_name("evomemory")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pytest_evomemory.cli"]


def test_report_writes_next_to_the_artefacts_and_prints_the_path(make_run: MakeRun, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run("a", STREAMS)
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    assert len(parse_html((run_dir / "report.html").read_text()).find_all("svg", "curve")) == 2


def test_report_to_a_chosen_file(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("a", STREAMS)
    assert main(["report", str(run_dir), "-o", str(tmp_path / "deep" / "r.html")]) == 0
    assert (tmp_path / "deep" / "r.html").is_file() and not (run_dir / "report.html").exists()


def test_compare_with_labels(make_run: MakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = make_run("a", STREAMS), make_run("b", STREAMS)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", str(a), str(b), "--labels", "before, after"]) == 0
    tree = parse_html((tmp_path / "evomemory-compare.html").read_text())
    for svg in tree.find_all("svg", "curve"):
        assert [g.attrs["data-run"] for g in svg.find_all("g", "series")] == ["before", "after"]


def test_compare_gates_on_the_lower_bound_when_asked(
    make_run: MakeRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evomemory compare --min-gain-by``: +50 points on 2 tasks meets a 10-point
    margin on the estimate, not on its interval's lower bound (Agresti-Min's, below 0)."""
    a = make_run("a", {"facts": [False, False]})
    b = make_run("b", {"facts": [True, False]})
    out = str(tmp_path / "c.html")
    assert main(["compare", str(a), str(b), "-o", out, "--min-gain", "10"]) == 0
    assert main(["compare", str(a), str(b), "-o", out, "--min-gain", "10", "--min-gain-by", "lower-bound"]) == 1
    printed = capsys.readouterr().out
    assert "MISSED: overall gain of b over a +50.0 points over 2 paired tasks, 95% CI [-" in printed
    assert "(required of the 95% CI's lower bound)" in printed
    assert "power: b: the smallest gain detectable with 80% power (two-sided alpha 0.05) on 2 tasks is" in printed
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert "power: b: the smallest gain detectable with 80% power" in page


def test_a_comparison_names_every_method_and_counts_a_failed_task_as_wrong(
    make_run: MakeRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal, compare.json and the page name the method behind each interval and
    p, and say how a failed episode enters them: wrong, in the denominator (here the
    baseline's second task failed: 0 of 3 and a pair like any other, not 0 of 2)."""
    a = make_run("a", {"facts": [False, None, False]})
    b = make_run("b", {"facts": [True, True, False]})
    out = tmp_path / "c.html"
    assert main(["compare", str(a), str(b), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert ("95% CI: Wilson (accuracy); diff: Agresti-Min, paired on the tasks both ran; McNemar p: exact; "
            "a task whose episode failed counts as wrong (score 0) and stays in the denominator") in printed
    document = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert document["methods"]["denominator"].startswith("a task whose episode failed counts as wrong")
    baseline, versus = document["overall"]["runs"][0], document["overall"]["vs_baseline"][0]
    assert (baseline["correct"], baseline["tasks"], baseline["errors"]) == (0, 3, 1)
    assert (versus["paired_tasks"], versus["only_this_correct"], versus["difference"]) == (3, 2, pytest.approx(2 / 3))
    assert "stays in the denominator" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["report"], "the following arguments are required: RUN_DIR"),
        (["report", "{missing}"], "is not a directory"),
        (["report", "{empty}"], "has no summary.json"),
        (["compare", "{a}"], "evomemory compare: error: give at least two run directories to compare (see 'evomemory compare --help')"),
        (["compare", "{a}", "{missing}"], "is not a directory"),
        (["compare", "{a}", "{a}", "--labels", "x"], "--labels has 1 label(s) for 2 run directories"),
        (["compare", "{a}", "{a}", "--labels", "x,"], "--labels contains an empty label"),
        (["report", "{a}", "-o", "{a}/summary.json/x.html"], "is inside the run directory"),
        (["compare", "{a}", "{a}", "--min-gain-by", "p-value"], "--min-gain-by says what --min-gain requires"),
        (["compare", "{a}", "{a}", "--min-gain", "1", "--min-gain-by", "bound"], "--min-gain-by must be one of"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    make_run: MakeRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    paths = {"a": make_run("a", STREAMS), "missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    try:
        status = main([arg.format(**paths) for arg in argv])
    except SystemExit as exit_:  # argparse's own errors leave through sys.exit
        status = exit_.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("evomemory") and "error: " in lines[0] and message in lines[0], lines[0]


def test_the_installed_command_fails_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run([*console_script(), "report", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"evomemory: error: {tmp_path} has no summary.json; it is not a finished evomemory run (the file is written when the pytest session ends)\n"


def test_help_lists_both_commands() -> None:
    result = subprocess.run([*console_script(), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "report" in result.stdout and "compare" in result.stdout


def test_a_fault_of_ours_is_one_line_and_exit_3_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever command hits a bug of the package (here a report that raises a
    KeyError holding a secret): one redacted line saying it is ours and how to see
    where, exit 3 (pytest's internal error); EVOMEMORY_TRACEBACK=1 shows the traceback."""
    from pytest_evomemory import cli
    from pytest_evomemory.reporting import html

    secret = "sk-" + "z" * 40

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError(f"arm {secret}")

    monkeypatch.setattr(html, "write_html_report", broken)  # cli imports it when the command runs
    assert cli.main(["report", str(tmp_path)]) == cli.INTERNAL_ERROR
    error = capsys.readouterr().err
    assert error.startswith("evomemory: internal error (a bug in pytest-evomemory, not in your input): KeyError:")
    assert error.count("\n") == 1 and "Traceback" not in error and secret not in error
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(KeyError):
        cli.main(["report", str(tmp_path)])


def test_a_chosen_commands_parser_alone_parses_and_helps_as_in_the_whole_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """main() builds only the chosen command's parser: its help and its parse are
    those of the parser of every command (``evomemory --help``)."""
    from pytest_evomemory.cli import COMMANDS, build_parser, chosen_command

    assert chosen_command(["run", "--help"]) == "run"
    assert chosen_command(["--help", "run"]) is None and chosen_command(["runn"]) is None and chosen_command([]) is None
    for name in COMMANDS:
        helps = []
        for parser in (build_parser(), build_parser(name)):
            with pytest.raises(SystemExit):
                parser.parse_args([name, "--help"])
            helps.append(capsys.readouterr().out)
        assert helps[0] == helps[1] and helps[0].startswith(f"usage: evomemory {name} "), name
    assert vars(build_parser("report").parse_args(["report", "x"])) == vars(build_parser().parse_args(["report", "x"]))


def test_running_a_command_imports_no_other_commands_module() -> None:
    code = (
        "import sys\nfrom pytest_evomemory.cli import main\n"
        "try:\n    main(['report', '/nonexistent-run-dir'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('pytest_evomemory.cli.')))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip().splitlines()[-1] == "['pytest_evomemory.cli.common', 'pytest_evomemory.cli.report']"
