"""``offsets-audit check`` exit codes: 0 PASS, 1 FAIL, 2 a person's mistake (one line), 3 a crash (a bug,
never to be read as FAIL); and the report of a clean run says so in words."""

from __future__ import annotations

import pytest

from offsets_audit.commands.check import EXIT_INTERNAL_ERROR, verdict_line
from offsets_audit.audit.report import render_report
from offsets_audit.cli import main


@pytest.mark.parametrize("command", ["check", "run"])
def test_output_path_under_a_regular_file_is_one_line_and_exit_2(command, tmp_path, capsys):
    """An output path under a regular file: one line naming --output, exit 2, before any Spark work."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "afile").write_text("not a folder")
    code = main([command, "--input", str(tmp_path / "logs"), "--input-format", "segments",
                 "--output", str(tmp_path / "afile" / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "lies under the file" in err[0] and "--output" in err[0]


def test_output_path_that_is_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    (tmp_path / "afile").write_text("x")
    code = main(["check", "--input", str(tmp_path / "logs"), "--input-format", "segments",
                 "--output", str(tmp_path / "afile")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is a file" in err[0]


@pytest.mark.spark
def test_a_crash_exits_3_never_1(spark, tmp_path, capsys, monkeypatch):
    """A bug inside the job must not read as the gate's FAIL: exit 3 and a line saying it is not a verdict."""
    import offsets_audit.job

    def broken(*args, **kwargs):
        raise RuntimeError("simulated internal failure")

    monkeypatch.setattr(offsets_audit.job, "run_job", broken)
    (tmp_path / "logs").mkdir()
    # an empty input is refused before the job unless the config lets it through; the crash is what is tested
    (tmp_path / "let-empty.yaml").write_text("check:\n  fail_on_empty: false\n")
    code = main(["check", "--config", str(tmp_path / "let-empty.yaml"), "--input", str(tmp_path / "logs"),
                 "--input-format", "segments", "--output", str(tmp_path / "out"), "--run-id", "boom"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == EXIT_INTERNAL_ERROR == 3
    assert out[-1].startswith("offsets-audit check: ERROR run boom: RuntimeError: simulated internal failure")


def test_clean_verdict_line():
    assert verdict_line([], "error", "c") == "offsets-audit check: PASS run c: 0 finding(s), none at or above 'error'"


def test_report_of_a_clean_run_says_so_in_words():
    html = render_report({"run_id": "c", "summary": {"records": {"read": 10, "decoded": 10, "quarantined": 0},
                                                      "groups": {"consumer": 5}},
                          "findings": [], "rebalances": [], "latency_summary": [], "timelines": {}})
    assert "Clean run. No findings: every enabled rule passed, no rebalances, nothing quarantined." in html
    assert "no findings: every rule passed" in html and "no rebalances in this run" in html
    assert "<p>No findings.</p>" in html


def test_report_of_a_run_with_losses_is_not_called_clean():
    html = render_report({"run_id": "q", "summary": {"records": {"read": 10, "decoded": 8, "quarantined": 2,
                                                                  "records_lost": 5}},
                          "findings": [], "rebalances": [], "latency_summary": [], "timelines": {}})
    assert "Clean run" not in html and "2 record(s) quarantined and 5 lost" in html
