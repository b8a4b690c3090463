"""The batch Spark replay gives the same tables as the pure replay on the golden histories."""
from __future__ import annotations

import json

import pytest

from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected, source_df

pytestmark = pytest.mark.spark

HISTORY_NAMES = ["history-consumer-group", "history-simple-and-txn-commits", "history-streams-group"]


@pytest.fixture(scope="module")
def replayed(spark):
    from offsets_audit.codec.spark import decode
    from offsets_audit.replay.spark import replay

    records = []
    for name in HISTORY_NAMES:
        for r in load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"):
            # One partition per history so the three logs stay independent.
            r["partition"] = HISTORY_NAMES.index(name)
            records.append(r)
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    tables = replay(decode(source_df(spark, records)))
    return replay_records(records), {k: v.collect() for k, v in tables.as_dict().items()}


def test_spark_group_state_equals_pure_replay(replayed):
    pure, tables = replayed
    got = {r["group_id"]: r.asDict() for r in tables["group_state"]}
    assert set(got) == set(pure.groups)
    for group_id, fold in pure.groups.items():
        expected = fold.state_row()
        assert {k: got[group_id][k] for k in expected} == expected


def test_spark_members_equal_pure_replay(replayed):
    pure, tables = replayed
    expected = sorted((m for f in pure.groups.values() for m in f.member_rows()), key=lambda m: (m["group_id"], m["member_id"]))
    got = sorted((r.asDict() for r in tables["members"]), key=lambda m: (m["group_id"], m["member_id"]))
    assert got == expected


def test_spark_group_events_equal_pure_replay(replayed):
    pure, tables = replayed
    group_kinds = {e["event"] for e in pure.events} - {
        "offset_committed", "offset_expired_or_deleted", "txn_offset_pending", "txn_offset_committed", "txn_offset_aborted"}
    expected = sorted((e["partition"], e["offset"], e["event"], e["member_id"], json.dumps(e["details"], sort_keys=True))
                      for e in pure.events if e["event"] in group_kinds)
    got = sorted((r["partition"], r["offset"], r["event"], r["member_id"], r["details"]) for r in tables["group_events"])
    assert got == expected


def test_spark_target_assignments_equal_pure_replay(replayed):
    pure, tables = replayed
    expected = sorted((r["group_id"], r["offset"], r["assignment_epoch"], json.dumps(r["target"]))
                      for f in pure.groups.values() for r in f.target_assignment_rows())
    got = sorted((r["group_id"], r["offset"], r["assignment_epoch"], r["target"]) for r in tables["target_assignments"])
    assert got == expected and expected


def test_spark_offsets_equal_pure_replay_committed_and_pending(replayed):
    pure, tables = replayed
    committed = {(r["group_id"], r["topic"], r["partition"]): (r["committed_offset"], r["committed_leader_epoch"],
                                                               r["metadata"], r["record_offset"])
                 for r in tables["offsets"] if r["status"] == "committed"}
    assert committed == {k: (c["committed_offset"], c["committed_leader_epoch"], c["metadata"], c["record_offset"])
                         for k, c in pure.offsets.committed.items()}
    pending = {(r["producer_id"], r["group_id"], r["topic"], r["partition"]) for r in tables["offsets"] if r["status"] == "pending"}
    assert pending == {(r["producer_id"], r["group_id"], r["topic"], r["partition"]) for r in pure.offsets.pending_rows()}


def test_the_fold_input_is_shuffled_once(spark):
    """The fold's input is partitioned by group (``plans.by_group``) before the window that keeps the first commit
    after each group record, which that partitioning satisfies: one exchange and one sort, none again for the
    fold's grouping."""
    from offsets_audit.codec.spark import decode
    from offsets_audit.replay.spark import fold_groups

    records = load_expected(HISTORIES / f"{HISTORY_NAMES[0]}-00000000000000000000.expected.jsonl")
    plan = fold_groups(decode(source_df(spark, records)))._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange hashpartitioning") == 1, plan
    assert plan.count("Sort [") == 1, plan
