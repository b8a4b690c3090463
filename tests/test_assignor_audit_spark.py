"""Spark edge of the assignor audit on the golden consumer history (replay -> audit)."""
from __future__ import annotations

import json

import pytest

from offsets_audit.assignors import spark as assignor_spark
from offsets_audit.assignors.topic_metadata import read_topic_metadata
from offsets_audit.replay import replay_records
from offsets_audit.replay.spark import TARGET_ASSIGNMENTS_DDL, _JSON_COLUMNS_OF_TARGETS
from replay_support import HISTORIES, load_expected

pytestmark = pytest.mark.spark

NAME = "history-consumer-group"


@pytest.fixture(scope="module")
def target_assignments(spark):
    result = replay_records(load_expected(HISTORIES / f"{NAME}-00000000000000000000.expected.jsonl"))
    rows = []
    for fold in result.groups.values():
        for row in fold.target_assignment_rows():
            row = dict(row)
            for column in _JSON_COLUMNS_OF_TARGETS:
                row[column] = json.dumps(row[column], sort_keys=True)
            rows.append(row)
    columns = [c.split()[0] for c in TARGET_ASSIGNMENTS_DDL.split(", ")]
    return spark.createDataFrame([tuple(r.get(c) for c in columns) for r in rows], TARGET_ASSIGNMENTS_DDL)


def test_audit_reruns_every_recorded_assignment_and_all_match(spark, target_assignments):
    snapshot = read_topic_metadata(spark, str(HISTORIES / f"{NAME}.state.json"))
    out = assignor_spark.audit(target_assignments, snapshot, what_if=["range"])
    rows = [r.asDict() for r in out.collect()]
    reruns = [r for r in rows if r["kind"] == "rerun"]
    assert len(reruns) == target_assignments.count()
    assert all(r["match"] and r["confidence"] == "metadata_verified" for r in reruns)
    assert {r["assignor"] for r in rows if r["kind"] == "what_if"} == {"range"}
    check = assignor_spark.metadata_check(out).collect()
    assert [(r["group_id"], r["hash_verified"], r["matched"]) for r in check] == [("orders-app", 9, 9)]


def test_audit_with_offsets_uses_cogroup_and_computes_lag_spread(spark, target_assignments):
    offsets = spark.createDataFrame(
        [("orders-app", "orders", p, 10 * p, 100 * (p + 1), "committed") for p in range(12)],
        "group_id string, topic string, partition int, committed_offset long, end_offset long, status string")
    out = assignor_spark.audit(target_assignments, None, what_if=["lag_aware"], offsets=offsets)
    rows = [r.asDict() for r in out.filter("kind = 'rerun'").collect()]
    assert all(r["match"] for r in rows)
    assert any(r["recorded_lag_spread"] is not None for r in rows)
