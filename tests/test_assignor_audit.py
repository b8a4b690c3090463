"""Assignor audit: inputs rebuilt from replayed golden histories must re-run to the recorded targets."""
from __future__ import annotations

import json

import pytest

from offsets_audit.assignors import run
from offsets_audit.assignors.inputs import (
    INFERRED,
    METADATA_PROVIDED,
    METADATA_VERIFIED,
    PARTITION_METADATA_RECORD,
    MemberOrder,
    consumer_subscription_type,
    reconstruct_group,
    timeline_order,
)
from offsets_audit.assignors.rerun import audit_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, parse_topics
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected
from golden_files import read_golden

CONSUMER_HISTORIES = ("history-consumer-group", "history-assignment-batching")


def _history(name):
    result = replay_records(load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"))
    snapshot = TopicMetadata(parse_topics(json.loads(read_golden(HISTORIES / f"{name}.state.json"))))
    return result, snapshot


@pytest.fixture(scope="module", params=CONSUMER_HISTORIES)
def consumer_history(request):
    return _history(request.param)


def _runs(result, snapshot):
    for fold in result.groups.values():
        yield from reconstruct_group(fold.target_assignment_rows(), snapshot)


def test_every_recorded_uniform_assignment_reruns_to_the_recorded_target(consumer_history):
    result, snapshot = consumer_history
    runs = list(_runs(result, snapshot))
    assert runs
    for r in runs:
        assert r.assignor == "uniform"
        assert run(r.assignor, r.case_input) == r.recorded, (r.group_id, r.assignment_epoch)


def test_snapshot_verifies_against_the_group_metadata_hash(consumer_history):
    result, snapshot = consumer_history
    for r in _runs(result, snapshot):
        assert r.metadata_hash_match is True
        assert r.confidence == METADATA_VERIFIED


def test_later_snapshot_is_repaired_to_the_partition_count_of_the_time():
    result, snapshot = _history("history-consumer-group")
    runs = {r.assignment_epoch: r for r in _runs(result, snapshot)}
    for epoch in (2, 3, 4):  # orders grew from 6 to 12 partitions before epoch 5
        assert runs[epoch].metadata_source == "snapshot_repaired"
        assert {t["name"]: t["partitions"] for t in runs[epoch].case_input["topics"]}["orders"] == 6
    assert runs[5].metadata_source == "snapshot"


def test_without_snapshot_names_and_counts_are_inferred_and_verified_by_hash(consumer_history):
    result, _ = consumer_history
    for r in _runs(result, None):
        assert r.confidence == METADATA_VERIFIED, (r.group_id, r.assignment_epoch)
        assert run(r.assignor, r.case_input) == r.recorded


def test_deliberately_wrong_snapshot_is_only_provided_and_reported_as_mismatch():
    result, _ = _history("history-consumer-group")
    wrong = TopicMetadata([{"name": "orders", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 12},
                           {"name": "payments", "id": "AAAAAAAAAAAAAAAAAAAAAg", "partitions": 3}])
    for r in _runs(result, wrong):
        assert r.snapshot_hash_match is False
        assert r.metadata_source == "inferred"  # the recorded assignment itself reproduces the hash


def test_wrong_snapshot_without_hash_to_fall_back_on_is_metadata_provided():
    row = {"group_id": "g", "group_type": "consumer", "assignment_epoch": 2, "assignment_timestamp": 0,
           "partition": 0, "offset": 5, "metadata_hash": 12345,
           "members": [{"member_id": "m1", "member_epoch": 0, "subscribed_topic_names": ["t"]}],
           "target": {"m1": {}}, "previous_target": {}}
    snapshot = TopicMetadata([{"name": "t", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 4}])
    (r,) = reconstruct_group([row], snapshot)
    assert r.confidence == METADATA_PROVIDED
    assert r.metadata_hash_match is False and r.snapshot_hash_match is False


def test_partition_metadata_record_is_used_when_present():
    row = {"group_id": "g", "group_type": "consumer", "assignment_epoch": 2, "assignment_timestamp": 0,
           "partition": 0, "offset": 5, "metadata_hash": 0,
           "members": [{"member_id": "m1", "member_epoch": 0, "subscribed_topic_names": ["t"]}],
           "target": {"m1": {"AAAAAAAAAAAAAAAAAAAAAQ": [0, 1]}}, "previous_target": {},
           "partition_metadata": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "topicName": "t", "numPartitions": 2}]}
    (r,) = reconstruct_group([row])
    assert r.confidence == PARTITION_METADATA_RECORD
    assert run(r.assignor, r.case_input) == r.recorded


def test_inferred_without_any_metadata_or_hash():
    row = {"group_id": "g", "group_type": "consumer", "assignment_epoch": 2, "assignment_timestamp": 0,
           "partition": 0, "offset": 5, "metadata_hash": 0,
           "members": [{"member_id": "m1", "member_epoch": 0, "subscribed_topic_names": ["t"]}],
           "target": {"m1": {"AAAAAAAAAAAAAAAAAAAAAQ": [0, 1, 2]}}, "previous_target": {}}
    (r,) = reconstruct_group([row])
    assert r.confidence == INFERRED
    assert r.metadata_hash_match is None
    assert r.case_input["topics"][0]["partitions"] == 3


def test_subscription_type_is_heterogeneous_when_one_member_lacks_a_name():
    members = [{"subscribed_topic_names": ["a", "b"]}, {"subscribed_topic_names": ["a"]}]
    assert consumer_subscription_type(members, {}) == "HETEROGENEOUS"
    assert consumer_subscription_type(members[:1] * 2, {}) == "HOMOGENEOUS"


def test_subscription_type_one_regex_for_every_member_is_homogeneous():
    members = [{"subscribed_topic_regex": "t.*"}, {"subscribed_topic_regex": "t.*"}]
    resolved = {"t.*": {"topics": ["t1", "t2"]}}
    assert consumer_subscription_type(members, resolved) == "HOMOGENEOUS"
    mixed = [{"subscribed_topic_regex": "t.*"}, {"subscribed_topic_regex": "t.*", "subscribed_topic_names": ["t1"]}]
    assert consumer_subscription_type(mixed, resolved) == "HETEROGENEOUS"


def test_timeline_hash_map_iterates_last_inserted_first_within_a_slot():
    keys = ["a", "b", "c", "d", "e"]
    order = timeline_order(keys, 2)
    assert sorted(order) == keys
    order_of_reversed = timeline_order(list(reversed(keys)), 2)
    for slot_keys in ([k for k in order if k in order_of_reversed],):
        assert len(slot_keys) == 5


def test_member_added_by_the_heartbeat_is_listed_last():
    order = MemberOrder()
    first = [{"member_id": "x", "member_epoch": 0}]
    assert [m["member_id"] for m in order.order(first)] == ["x"]
    second = [{"member_id": "x", "member_epoch": 2}, {"member_id": "y", "member_epoch": 0}]
    assert [m["member_id"] for m in order.order(second)][-1] == "y"


def test_audit_rows_mark_what_if_rows_as_never_mismatching():
    result, snapshot = _history("history-consumer-group")
    fold = result.groups["orders-app"]
    rows = audit_group(fold.target_assignment_rows(), snapshot, what_if=["range", "lag_aware"])
    reruns = [r for r in rows if r["kind"] == "rerun"]
    what_ifs = [r for r in rows if r["kind"] == "what_if"]
    assert all(r["match"] is True and r["moved_partitions"] == 0 for r in reruns)
    assert {r["assignor"] for r in what_ifs} == {"range", "lag_aware"}
    assert all(r["match"] is None for r in what_ifs)
    assert any(r["moved_partitions"] for r in what_ifs)


def test_streams_reruns_are_graded_inferred_because_task_offsets_are_not_logged():
    result, snapshot = _history("history-streams-group")
    rows = audit_group(result.groups["wordcount-app"].target_assignment_rows(), snapshot)
    assert rows and all(r["confidence"] == INFERRED and r["assignor"] == "sticky" for r in rows)
    assert all(r["metadata_hash_match"] is True for r in rows)
    assert all(r["error"] is None for r in rows)


def test_consumer_case_input_lists_each_subscribed_topic_id_once_in_topic_ids_order():
    """``TopicIds`` over the member's names as the ``HashSet<String>`` Kafka keeps them in ("a" hashes to 97,
    "b" to 98: a's bucket comes first), missing topics skipped."""
    from offsets_audit.assignors.inputs import consumer_case_input

    topics = {"a": {"id": "AAAAAAAAAAAAAAAAAAAAAA", "name": "a", "partitions": 2},
              "b": {"id": "BBBBBBBBBBBBBBBBBBBBBB", "name": "b", "partitions": 1}}
    row = {"group_type": "consumer", "members": [
        {"member_id": "m1", "subscribed_topic_names": ["b", "a", "b", "missing", "a"]}]}
    case = consumer_case_input(row, topics, {})
    assert case["members"][0]["subscribed_topic_ids"] == ["AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"]
    assert [t["name"] for t in case["topics"]] == ["a", "b"]


def test_kafka_3_x_heterogeneous_uniform_targets_are_judged_by_3_x_rule():
    """Kafka 3.x's uniform builder for members with different subscriptions is an algorithm 4.0 replaced: a 3.x
    cluster's target is re-run with 3.x's rule, a 4.x cluster's with 4.x's; with the brokers' version unknown a
    target only 3.x's rule gives is no fault (the row says why), and a target neither gives is a mismatch."""
    from offsets_audit.assignors.inputs import AssignorRun
    from offsets_audit.assignors.rerun import RerunChain, _audit_run
    from offsets_audit.audit.rules.assignor import assignor_findings
    from offsets_audit.audit.rules.registry import default_rule_settings

    a, b = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
    case = {"subscription_type": "HETEROGENEOUS",
            "topics": [{"id": a, "name": "a", "partitions": 2, "partition_racks": None},
                       {"id": b, "name": "b", "partitions": 1, "partition_racks": None}],
            "members": [{"member_id": "m1", "instance_id": None, "rack_id": None, "subscribed_topic_names": ["a"],
                         "subscribed_topic_ids": [a], "current_assignment": {}},
                        {"member_id": "m2", "instance_id": None, "rack_id": None,
                         "subscribed_topic_names": ["a", "b"], "subscribed_topic_ids": [a, b],
                         "current_assignment": {a: [0, 1]}}],
            "assignable_partitions": None}
    # m2 gives up one partition of a to the joiner: 3.x's rule moves the first in its order, 4.0's the last.
    by_3_x = {"m1": {a: [0]}, "m2": {a: [1], b: [0]}}
    by_4_x = {"m1": {a: [1]}, "m2": {a: [0], b: [0]}}

    def row(recorded, before_4_0):
        # (the case input carries the flag as inputs.GroupReconstruction sets it for a 3.x cluster)
        target = AssignorRun(group_id="g", group_type="consumer", assignment_epoch=1, assignment_timestamp=None,
                             partition=0, offset=1, assignor="uniform",
                             case_input=dict(case, before_4_0=True) if before_4_0 else dict(case),
                             recorded={"error": None, "members": recorded}, confidence="partition_metadata_record",
                             metadata_source="partition_metadata_record", metadata_hash_match=None,
                             before_4_0=before_4_0)
        return _audit_run(target, RerunChain(), what_if=(), offsets=None, auto_offset_reset="latest")[0]

    assert row(by_3_x, True)["match"] is True and row(by_4_x, True)["match"] is False
    assert row(by_4_x, False)["match"] is True and row(by_3_x, False)["match"] is False
    assert row(by_4_x, None)["match"] is True
    unknown = row(by_3_x, None)
    assert unknown["match"] is True and "Kafka 3.x's uniform assignor" in unknown["notes"]
    neither = {"m1": {}, "m2": {a: [0, 1], b: [0]}}
    for before_4_0 in (True, False, None):
        judged = row(neither, before_4_0)
        assert (judged["kind"], judged["match"], judged["error"]) == ("rerun", False, None)
        assert len(assignor_findings([judged], default_rule_settings())) == 1

