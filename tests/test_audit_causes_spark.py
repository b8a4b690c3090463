"""The Spark ``rebalances.causes`` / ``cause_members`` and ``rebalance_causes`` equal the pure core's rows
on a golden history (segments -> codec -> replay -> audit, local Spark)."""
from __future__ import annotations


import pytest

from offsets_audit.config import load_settings
from replay_support import HISTORIES, audited_golden_log, load_expected, planned_as_a_small_log

pytestmark = pytest.mark.spark

NAME = "history-consumer-group"


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    # planned and run as the job plans a log this small
    with planned_as_a_small_log(spark, len(load_expected(HISTORIES / f"{NAME}-00000000000000000000.expected.jsonl"))):
        out = audited_golden_log(spark, tmp_path_factory.mktemp("logs"), NAME, load_settings())
        rows = {name: [r.asDict(recursive=True) for r in out[name].collect()]
                for name in ("rebalances", "rebalance_causes", "latency_summary")}
    yield rows
    out.release()


def _pure():
    from offsets_audit.audit import audit_events
    from offsets_audit.replay import replay_records

    events = replay_records(load_expected(HISTORIES / f"{NAME}-00000000000000000000.expected.jsonl")).events
    return audit_events(events, load_settings())[1]


def test_spark_rebalance_causes_equal_the_pure_rows(audited):
    key = lambda r: (r["group_id"], r["group_epoch"])  # noqa: E731
    spark_rows = sorted(audited["rebalances"], key=key)
    pure = sorted(_pure(), key=key)
    assert [(r["group_epoch"], r["causes"], r["cause_members"]) for r in spark_rows] == \
        [(r["group_epoch"], r["causes"], r["cause_members"]) for r in pure]


def test_spark_rebalance_causes_table_equals_summarize_causes(audited):
    from offsets_audit.audit.causes import summarize_causes

    key = lambda r: tuple(str(r[k]) for k in ("level", "group_id", "day", "cause", "client_id", "client_host"))  # noqa: E731
    assert sorted(audited["rebalance_causes"], key=key) == sorted(summarize_causes(_pure()), key=key)


def test_spark_latency_summary_counts_causes_as_summarize_latency_does(audited):
    from offsets_audit.audit.latency import summarize_latency

    key = lambda r: tuple(str(r[k]) for k in ("level", "group_type", "group_id", "day"))  # noqa: E731
    spark_rows = [(key(r), r["rebalances"], r["causes"]) for r in sorted(audited["latency_summary"], key=key)]
    pure = [(key(r), r["rebalances"], r["causes"]) for r in sorted(summarize_latency(_pure()), key=key)]
    assert spark_rows == pure
    assert all(sum(c["rebalances"] for c in causes) >= n for _, n, causes in spark_rows)


def test_spark_whatif_cluster_rows_equal_cluster_rows(spark):
    """The cluster rows of ``assignment_interval_whatif`` as Spark aggregates are ``interval_whatif.cluster_rows``:
    per candidate interval, and over the recommended rows (none recommended at one interval, a group without a
    recommendation, missing figures)."""
    from offsets_audit.audit import interval_whatif as W
    from offsets_audit.audit.spark import whatif_cluster

    def group(gid, interval, recommended, bumps, p95):
        row = {c: None for c in W.WHATIF_COLUMNS}
        row.update(level="group", group_id=gid, interval_ms=interval, candidate="candidate", bumps=bumps,
                   recorded_runs=bumps, runs=bumps // 2, runs_saved=bumps - bumps // 2, unanswered_bumps=0,
                   coordinator_ms=1.5 * bumps, time_to_assignment_p95_ms=p95, time_to_assignment_max_ms=p95,
                   added_p95_ms=None if p95 is None else p95 / 2, recommended=recommended)
        return row

    rows = [group("a", 0, False, 10, 5.0), group("a", 1000, True, 10, 7.0), group("b", 0, True, 4, None),
            group("b", 1000, False, 4, 9.0), group("c", 0, None, 6, 1.0), group("c", 5000, False, 6, 2.0)]
    df = spark.createDataFrame(rows, W.WHATIF_DDL)
    key = lambda r: (r["candidate"], r["interval_ms"] is not None, r["interval_ms"] or 0)  # noqa: E731
    spark_rows = sorted((r.asDict() for r in whatif_cluster(df).collect()), key=key)
    assert spark_rows == sorted(W.cluster_rows(rows), key=key)
    assert whatif_cluster(df.filter("recommended IS NOT TRUE")).filter("candidate = 'recommended'").count() == 0
