"""The typed run summary keeps summary.json as users know it: the same keys, in the same order, for a batch run
and an incremental one; a figure a run did not compute is left out, never written as null."""

from __future__ import annotations

import io
import json

from offsets_audit.sinks.summary import IncrementalFacts, MicroBatches, RecordCounts, RunSummary

COUNTS = {"read": 10, "decoded": 9, "quarantined": 1, "unreadable": 1, "records_lost": 3,
          "by_record_type": {"OffsetCommit": 9}, "by_error_code": {"unknown_version": 2}}
FIGURES = {"groups": {"consumer": 2}, "findings": {"rebalance_storm (warning)": 1},
           "latency": [{"group_type": "consumer", "rebalances": 4}]}


def _batch() -> RunSummary:
    summary = RunSummary(run_id="r1", records=RecordCounts.of(COUNTS), timings_s={"read+decode": 1.5, "replay:x": 0.1},
                         tables={"findings": "out/findings"}).with_figures(FIGURES)
    summary.input = {"files": 3}
    summary.report = "out/report/r1.html"
    return summary


def test_a_batch_summary_is_the_json_users_know():
    out = _batch().as_dict()
    assert list(out) == ["run_id", "records", "timings_s", "tables", "groups", "findings", "latency", "input", "report"]
    assert out["records"] == COUNTS and out["findings"] == FIGURES["findings"]
    assert json.loads(_batch().to_json()) == out


def test_an_incremental_summary_adds_its_facts_where_they_were():
    facts = IncrementalFacts(checkpoint="cp", clock=123, skipped_rules=(), stages={"replay": "ran"},
                             batches=MicroBatches(fold=[3], records=[3, 4], covered_fold=[3], covered_records=[3, 4]))
    summary = RunSummary(run_id="n1", records=RecordCounts.of(COUNTS), timings_s={}, tables={},
                         incremental=facts).with_figures({**FIGURES, "provisional_findings": {}})
    out = summary.as_dict()
    assert list(out) == ["run_id", "mode", "checkpoint", "batches", "records", "clock", "timings_s", "tables",
                         "skipped_rules", "stages", "groups", "findings", "provisional_findings", "latency"]
    assert out["mode"] == "incremental" and out["batches"] == {
        "fold": [3], "records": [3, 4], "covered": {"fold": [3], "records": [3, 4]}}
    assert summary.stages == {"replay": "ran"}


def test_the_printed_lines_read_the_typed_summary():
    from offsets_audit.job import print_summary

    printed = io.StringIO()
    print_summary(_batch(), printed)
    lines = printed.getvalue().splitlines()
    assert lines[0] == ("run r1: read 10 records = 9 decoded + 1 quarantined; 3 records lost in 1 unreadable "
                        "stretches")
    assert "quarantine: unknown_version 2" in lines and lines[-1] == "report: out/report/r1.html"
