"""The Spark ``rebalances.causes`` / ``cause_members`` and ``rebalance_causes`` equal the pure core's rows
on a golden history (segments -> codec -> replay -> audit, local Spark)."""
from __future__ import annotations


import pytest

from offsets_audit.config import load_settings
from replay_support import HISTORIES, audited_golden_log, load_expected

pytestmark = pytest.mark.spark

NAME = "history-consumer-group"


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    out = audited_golden_log(spark, tmp_path_factory.mktemp("logs"), NAME, load_settings())
    yield {name: [r.asDict(recursive=True) for r in out[name].collect()]
           for name in ("rebalances", "rebalance_causes", "latency_summary")}
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
