"""The run manifest ``_runs/<run_id>.json`` is the last thing a run writes: after every table, the summary and the
HTML report. A run stopped before it (killed, a full disk) is incomplete, never complete with an older summary or
a cut report."""

from __future__ import annotations

import shutil

import pytest

from offsets_audit import sinks

pytestmark = pytest.mark.spark


def test_the_manifest_comes_after_the_tables_the_summary_and_the_report(spark, tmp_path, monkeypatch):
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job
    from offsets_audit.sinks import report as report_sink
    from replay_support import HISTORIES

    order: list[str] = []
    real_write_run, real_complete = sinks.write_run, sinks.complete_run
    real_text, real_report = sinks.write_text_file, report_sink.write_report

    def write_run(*args, **kwargs):
        paths = real_write_run(*args, **kwargs)
        order.append("tables")
        return paths

    def complete_run(*args, **kwargs):
        order.append("manifest")
        return real_complete(*args, **kwargs)

    def write_text_file(spark_, output, relative, text):
        order.append(relative.split("/")[0])
        return real_text(spark_, output, relative, text)

    def write_report(*args, **kwargs):
        order.append("report")
        return real_report(*args, **kwargs)

    monkeypatch.setattr(sinks, "write_run", write_run)
    monkeypatch.setattr(sinks, "complete_run", complete_run)
    monkeypatch.setattr(sinks, "write_text_file", write_text_file)
    monkeypatch.setattr(report_sink, "write_report", write_report)
    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log", logs / "00000000000000000000.log")
    settings = load_settings(overrides={"run_id": "ordered", "source": {"kind": "segments", "path": str(logs.parent)},
                                    "output": {"path": str(tmp_path / "out"), "html_report": True}})
    run_job(spark, settings, progress=False)
    assert order[0] == "tables" and order[-1] == "manifest", order
    assert {"summary", "report"} <= set(order[1:-1]), order
    assert sinks.run_manifest(spark, str(tmp_path / "out"), "ordered") is not None
    assert not (tmp_path / "out" / "_lease.json").exists()
