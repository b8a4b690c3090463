"""Spark edge of the audit: the golden batching history through segments -> codec -> replay -> audit."""
from __future__ import annotations


import pytest

from offsets_audit.config import load_settings
from replay_support import HISTORIES, audited_golden_log, load_expected, planned_as_a_small_log

pytestmark = pytest.mark.spark

NAME = "history-assignment-batching"
#: batch-override-0 runs with assignment interval 0 (the simulated cluster's group config)
SETTINGS = load_settings().replace(broker={"group_overrides": {"batch-override-0": {"assignment_interval_ms": 0}}})


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    # planned and run as the job plans a log this small
    with planned_as_a_small_log(spark, len(load_expected(HISTORIES / f"{NAME}-00000000000000000000.expected.jsonl"))):
        out = audited_golden_log(spark, tmp_path_factory.mktemp("logs"), NAME, SETTINGS)
        tables = {k: v.toPandas() for k, v in out.as_dict().items()}
    yield tables
    out.release()


def test_findings_table_layout_and_content(audited):
    f = audited["findings"]
    assert list(f.columns) == ["id", "group_id", "group_type", "rule", "severity", "time", "message", "evidence",
                               "details"]
    # batch-override-3000 is audited against the broker default (1000 ms): it never violates it
    assert set(f["rule"]) <= {"offset_committed_backwards"}
    assert f["id"].is_unique


def test_findings_match_the_pure_audit(audited):
    from offsets_audit.audit import audit_events
    from offsets_audit.replay import replay_records
    from replay_support import load_expected

    config = SETTINGS
    events = replay_records(load_expected(HISTORIES / f"{NAME}-00000000000000000000.expected.jsonl")).events
    findings, rebalances = audit_events(events, config)
    assert sorted(audited["findings"]["id"]) == sorted(x.id for x in findings)
    spark_rows = audited["rebalances"].sort_values(["group_id", "group_epoch"])
    pure = sorted(rebalances, key=lambda r: (r["group_id"], r["group_epoch"]))
    assert list(spark_rows["time_to_assignment_ms"]) == [r["time_to_assignment_ms"] for r in pure]
    assert list(spark_rows["convergence_ms"]) == [r["convergence_ms"] for r in pure]


def test_latency_summary_percentiles(audited):
    s = audited["latency_summary"]
    row = s[(s["level"] == "group_day") & (s["group_id"] == "batch-default")].iloc[0]
    assert row["rebalances"] == 20 and row["time_to_assignment_ms_max"] == 1330
    by_type = s[s["level"] == "group_type"].iloc[0]
    assert by_type["group_type"] == "consumer" and by_type["rebalances"] == 60
