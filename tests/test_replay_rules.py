"""One test per replay rule, on hand-built records encoded with the codec (``encode_record``)."""
from __future__ import annotations

import copy
import pickle
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from offsets_audit.codec import encode_record
from offsets_audit.replay import GroupFold, replay_records
from offsets_audit.replay.consumer import ConsumerMember
from offsets_audit.replay.share import ShareMember
from offsets_audit.replay.streams import StreamsMember

G = "g1"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


class Log:
    """Appends records to one ``__consumer_offsets`` partition with increasing offsets."""

    def __init__(self, partition: int = 0) -> None:
        self.partition = partition
        self.records: list[dict] = []

    def add(self, record_type, key, value, version=0, producer_id=-1):
        k, v = encode_record(record_type, key, value, None if value is None else version)
        offset = len(self.records)
        self.records.append({"key": k, "value": v, "partition": self.partition, "offset": offset,
                             "timestamp": 1_000 + offset, "producer_id": producer_id, "producer_epoch": 0,
                             "is_transactional": producer_id != -1, "is_control": False, "control_type": None})
        return self

    def marker(self, producer_id, control_type):
        offset = len(self.records)
        self.records.append({"key": None, "value": None, "partition": self.partition, "offset": offset,
                             "timestamp": 1_000 + offset, "producer_id": producer_id, "is_transactional": True,
                             "is_control": True, "control_type": control_type, "coordinator_epoch": 0})
        return self

    def commit(self, topic, partition, offset, group=G, producer_id=-1):
        return self.add(1, {"group": group, "topic": topic, "partition": partition},
                        {"offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": 1}, 3, producer_id)

    def offset_tombstone(self, topic, partition, group=G):
        return self.add(1, {"group": group, "topic": topic, "partition": partition}, None)

    def consumer_member(self, member_id, instance_id=None, topics=("t",), group=G):
        return self.add(5, {"groupId": group, "memberId": member_id}, {
            "instanceId": instance_id, "rackId": None, "clientId": "c", "clientHost": "h",
            "subscribedTopicNames": list(topics), "subscribedTopicRegex": "", "rebalanceTimeoutMs": 1000,
            "serverAssignor": "uniform"})

    def consumer_epoch(self, epoch, group=G):
        return self.add(3, {"groupId": group}, {"epoch": epoch, "metadataHash": 0})

    def consumer_target(self, member_id, partitions, group=G):
        return self.add(7, {"groupId": group, "memberId": member_id},
                        {"topicPartitions": [{"topicId": TOPIC_ID, "partitions": list(partitions)}]})

    def consumer_target_metadata(self, epoch, timestamp, group=G):
        return self.add(6, {"groupId": group}, {"assignmentEpoch": epoch, "assignmentTimestamp": timestamp})

    def consumer_current(self, member_id, epoch, previous, state=0, partitions=(), pending=(), group=G):
        tp = [{"topicId": TOPIC_ID, "partitions": list(partitions), "assignmentEpochs": [epoch] * len(partitions)}]
        pr = [{"topicId": TOPIC_ID, "partitions": list(pending), "assignmentEpochs": [previous] * len(pending)}]
        return self.add(8, {"groupId": group, "memberId": member_id}, {
            "memberEpoch": epoch, "previousMemberEpoch": previous, "state": state,
            "assignedPartitions": tp if partitions else [], "partitionsPendingRevocation": pr if pending else []})

    def consumer_leave(self, member_id, group=G):
        return (self.add(8, {"groupId": group, "memberId": member_id}, None)
                .add(7, {"groupId": group, "memberId": member_id}, None)
                .add(5, {"groupId": group, "memberId": member_id}, None))

    def classic(self, generation, members=(), protocol_type="consumer", group=G):
        return self.add(2, {"group": group}, {
            "protocolType": protocol_type, "generation": generation, "protocol": "range" if members else None,
            "leader": members[0] if members else None, "currentStateTimestamp": 5,
            "members": [{"memberId": m, "groupInstanceId": None, "clientId": "c", "clientHost": "h",
                         "rebalanceTimeout": 1000, "sessionTimeout": 1000, "subscription": b"", "assignment": b""}
                        for m in members]}, 3)

    def replay(self):
        return replay_records(self.records)


def kinds(result, group=G):
    return [e["event"] for e in result.events if e["group_id"] == group]


def committed(result, group=G):
    return {(t, p): c["committed_offset"] for (g, t, p), c in result.offsets.committed.items() if g == group}


# -- offsets ------------------------------------------------------------------------------------

def test_non_transactional_commit_applies_at_once_last_write_wins():
    result = Log().commit("t", 0, 5).commit("t", 0, 7).replay()
    assert committed(result) == {("t", 0): 7}
    assert kinds(result).count("offset_committed") == 2


def test_legacy_offset_commit_type0_is_read_as_type1():
    log = Log().add(0, {"group": G, "topic": "t", "partition": 1}, {"offset": 42, "metadata": "m", "commitTimestamp": 9})
    assert committed(log.replay()) == {("t", 1): 42}


def test_commit_for_unknown_group_creates_simple_empty_classic_group():
    result = Log().commit("t", 0, 5).replay()
    fold = result.groups[G]
    assert fold.group.group_type == "classic" and fold.group.is_simple and fold.group.state == "Empty"
    assert kinds(result)[0] == "group_created"


def test_transactional_commit_pending_until_commit_marker():
    log = Log().commit("t", 0, 5, producer_id=9)
    assert committed(log.replay()) == {} and log.replay().offsets.pending_rows()[0]["committed_offset"] == 5
    result = log.marker(9, "COMMIT").replay()
    assert committed(result) == {("t", 0): 5} and result.offsets.pending_rows() == []
    assert "txn_offset_committed" in kinds(result)


def test_transactional_commit_dropped_on_abort_marker():
    result = Log().commit("t", 0, 1).commit("t", 0, 5, producer_id=9).marker(9, "ABORT").replay()
    assert committed(result) == {("t", 0): 1}
    assert "txn_offset_aborted" in kinds(result)


def test_commit_marker_applies_only_if_pending_record_offset_is_greater():
    result = Log().commit("t", 0, 5, producer_id=9).commit("t", 0, 8).marker(9, "COMMIT").replay()
    assert committed(result) == {("t", 0): 8}
    applied = [e["details"]["applied"] for e in result.events if e["event"] == "txn_offset_committed"]
    assert applied == [False]


def test_marker_only_closes_its_own_producer():
    result = Log().commit("t", 0, 5, producer_id=9).commit("t", 1, 6, producer_id=10).marker(9, "COMMIT").replay()
    assert committed(result) == {("t", 0): 5}
    assert [(r["producer_id"], r["partition"]) for r in result.offsets.pending_rows()] == [(10, 1)]


def test_markers_are_per_partition_of_consumer_offsets():
    log = Log(partition=0).commit("t", 0, 5, producer_id=9)
    other = Log(partition=1).marker(9, "COMMIT")
    result = replay_records(log.records + other.records)
    assert committed(result) == {}


def test_offset_tombstone_clears_committed_and_pending():
    result = Log().commit("t", 0, 1).commit("t", 0, 5, producer_id=9).offset_tombstone("t", 0).marker(9, "COMMIT").replay()
    assert committed(result) == {}
    assert "offset_expired_or_deleted" in kinds(result)


# -- consumer groups ---------------------------------------------------------------------------

def _joined_consumer_group(log=None):
    log = log or Log()
    return (log.consumer_member("m1").consumer_epoch(2).consumer_target("m1", [0, 1])
            .consumer_target_metadata(2, 100).consumer_current("m1", 2, 1, 0, [0, 1]))


def test_consumer_group_states_assigning_reconciling_stable_empty():
    log = Log().consumer_member("m1").consumer_epoch(2)
    assert log.replay().groups[G].group.state == "Assigning"
    log.consumer_target("m1", [0]).consumer_target_metadata(2, 100)
    assert log.replay().groups[G].group.state == "Reconciling"
    log.consumer_current("m1", 2, 1, 0, [0])
    assert log.replay().groups[G].group.state == "Stable"
    log.consumer_leave("m1").consumer_epoch(3)
    assert log.replay().groups[G].group.state == "Empty"


def test_member_epoch_and_assignment_epochs_are_tracked():
    result = _joined_consumer_group().consumer_current("m1", 3, 2, 1, [0], pending=[1]).replay()
    member = result.groups[G].group.members["m1"]
    assert (member.member_epoch, member.previous_member_epoch, member.state) == (3, 2, "UNREVOKED_PARTITIONS")
    assert member.assigned_partitions == {TOPIC_ID: {0: 3}}
    assert member.partitions_pending_revocation == {TOPIC_ID: {1: 2}}
    assert {"member_epoch_advanced", "member_assignment_changed"} <= set(kinds(result))


def test_target_assignment_computed_event_lists_changed_members():
    result = _joined_consumer_group().replay()
    computed = [e for e in result.events if e["event"] == "target_assignment_computed"]
    assert computed[0]["details"]["assignment_epoch"] == 2
    assert computed[0]["details"]["members_changed"] == ["m1"]
    rows = result.groups[G].target_assignment_rows()
    assert rows[0]["target"] == {"m1": {TOPIC_ID: [0, 1]}} and rows[0]["previous_target"] == {}


def test_target_rows_keep_each_target_assignment_as_it_was_computed():
    # Rows share the members' targets (no deep copies): a later target record must replace a member's target,
    # never change the one an earlier row holds.
    log = _joined_consumer_group().consumer_member("m2").consumer_epoch(3).consumer_target("m1", [0]) \
        .consumer_target("m2", [1]).consumer_target_metadata(3, 200)
    log.consumer_epoch(4).consumer_target("m2", [1, 2]).consumer_target_metadata(4, 300)
    rows = log.replay().groups[G].target_assignment_rows()
    assert [r["target"] for r in rows] == [{"m1": {TOPIC_ID: [0, 1]}}, {"m1": {TOPIC_ID: [0]}, "m2": {TOPIC_ID: [1]}},
                                           {"m1": {TOPIC_ID: [0]}, "m2": {TOPIC_ID: [1, 2]}}]
    assert [r["previous_target"] for r in rows] == [{}, rows[0]["target"], rows[1]["target"]]


def test_group_epoch_bumped_event_has_old_and_new():
    result = _joined_consumer_group().consumer_epoch(3).replay()
    bumps = [e["details"] for e in result.events if e["event"] == "group_epoch_bumped"]
    assert [(b["old"], b["new"]) for b in bumps] == [(0, 2), (2, 3)]
    assert all("old_metadata_hash" in b and "metadata_hash" in b for b in bumps)


def test_member_tombstones_in_kafka_order_remove_member():
    result = _joined_consumer_group().consumer_leave("m1").replay()
    assert result.groups[G].group.members == {}
    assert kinds(result)[-2:] == ["member_fenced_by_tombstone", "member_left"]
    assert "replay_anomaly" not in kinds(result)


def test_group_deletion_tombstones_make_group_dead():
    log = _joined_consumer_group().consumer_leave("m1")
    log.add(6, {"groupId": G}, None).add(3, {"groupId": G}, None)
    result = log.replay()
    assert result.groups[G].group is None and result.groups[G].state_row()["state"] == "Dead"
    assert kinds(result)[-1] == "group_deleted" and "replay_anomaly" not in kinds(result)


def test_reordered_tombstones_are_tolerated_as_anomaly_kafka_17306():
    log = _joined_consumer_group()
    log.add(3, {"groupId": G}, None)
    result = log.replay()
    assert result.groups[G].group is None
    assert "replay_anomaly" in kinds(result) and kinds(result)[-1] == "group_deleted"


def test_modern_group_replaces_only_a_simple_classic_group():
    result = _joined_consumer_group(Log().commit("t", 0, 1)).replay()
    assert result.groups[G].group.group_type == "consumer"
    assert "group_type_changed" in kinds(result) and "replay_anomaly" not in kinds(result)
    clash = _joined_consumer_group(Log().classic(1, ["c1"])).replay()
    assert "replay_anomaly" in kinds(clash)


def test_classic_to_consumer_upgrade_record_sequence():
    log = Log().classic(1, ["c1"]).add(2, {"group": G}, None)
    result = _joined_consumer_group(log).replay()
    assert result.groups[G].group.group_type == "consumer"
    assert "replay_anomaly" not in kinds(result)
    assert kinds(result)[:3] == ["group_created", "classic_generation_changed", "member_joined"]


def test_consumer_to_classic_downgrade_record_sequence():
    log = _joined_consumer_group().consumer_leave("m1")
    log.add(6, {"groupId": G}, None).add(3, {"groupId": G}, None).classic(3, ["c1"])
    result = log.replay()
    g = result.groups[G].group
    assert (g.group_type, g.state, g.generation, g.leader) == ("classic", "Stable", 3, "c1")


def test_classic_group_loads_empty_or_stable_and_tracks_generation():
    result = Log().classic(1, ["a", "b"]).classic(2, []).replay()
    g = result.groups[G].group
    assert g.state == "Empty" and g.generation == 2
    gens = [e["details"]["generation"] for e in result.events if e["event"] == "classic_generation_changed"]
    assert gens == [1, 2]


def test_regular_expression_resolution_is_kept():
    log = _joined_consumer_group().add(16, {"groupId": G, "regularExpression": "t.*"},
                                       {"topics": ["t1", "t2"], "version": 3, "timestamp": 7})
    assert log.replay().groups[G].group.resolved_regular_expressions["t.*"]["topics"] == ["t1", "t2"]


def test_deprecated_partition_metadata_is_kept_as_topic_metadata():
    log = _joined_consumer_group().add(4, {"groupId": G}, {"topics": [
        {"topicId": TOPIC_ID, "topicName": "t", "numPartitions": 2, "partitionMetadata": []}]})
    assert log.replay().groups[G].group.topic_metadata[0]["topicName"] == "t"


# -- share and streams -------------------------------------------------------------------------

def test_share_group_is_stable_with_members_and_empty_without():
    log = Log().add(10, {"groupId": G, "memberId": "s1"}, {"rackId": None, "clientId": "c", "clientHost": "h",
                                                            "subscribedTopicNames": ["t"]})
    log.add(11, {"groupId": G}, {"epoch": 2, "metadataHash": 0})
    assert log.replay().groups[G].group.state == "Stable"
    log.add(14, {"groupId": G, "memberId": "s1"}, None).add(10, {"groupId": G, "memberId": "s1"}, None)
    result = log.replay()
    assert result.groups[G].group.state == "Empty" and result.groups[G].group.group_type == "share"


def _streams_log():
    log = Log()
    log.add(23, {"groupId": G}, {"epoch": 0, "subtopologies": [{
        "subtopologyId": "0", "sourceTopics": ["t"], "sourceTopicRegex": [], "stateChangelogTopics": [],
        "repartitionSinkTopics": [], "repartitionSourceTopics": [], "copartitionGroups": []}]})
    log.add(19, {"groupId": G, "memberId": "s1"}, {
        "instanceId": None, "rackId": None, "clientId": "c", "clientHost": "h", "rebalanceTimeoutMs": 1,
        "topologyEpoch": 0, "processId": "p1", "userEndpoint": None, "clientTags": []})
    log.add(17, {"groupId": G}, {"epoch": 2, "metadataHash": 0})
    return log


def test_streams_group_not_ready_until_topology_epoch_validated():
    log = _streams_log()
    assert log.replay().groups[G].group.state == "NotReady"
    log.add(17, {"groupId": G}, {"epoch": 2, "metadataHash": 0, "validatedTopologyEpoch": 0})
    assert log.replay().groups[G].group.state == "Assigning"
    log.add(21, {"groupId": G, "memberId": "s1"}, {"activeTasks": [{"subtopologyId": "0", "partitions": [0]}],
                                                    "standbyTasks": [], "warmupTasks": []})
    log.add(20, {"groupId": G}, {"assignmentEpoch": 2, "assignmentTimestamp": 5})
    log.add(22, {"groupId": G, "memberId": "s1"}, {
        "memberEpoch": 2, "previousMemberEpoch": 1, "state": 1,
        "activeTasks": [{"subtopologyId": "0", "partitions": [0]}], "standbyTasks": [], "warmupTasks": [],
        "activeTasksPendingRevocation": [], "standbyTasksPendingRevocation": [], "warmupTasksPendingRevocation": []})
    result = log.replay()
    assert result.groups[G].group.state == "Stable"
    assert "topology_changed" in kinds(result)


# -- robustness and the fold ------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=40))), max_size=20))
def test_undecodable_records_become_replay_anomaly_never_raise(pairs):
    records = [{"key": k, "value": v, "partition": 0, "offset": i, "timestamp": i, "producer_id": -1,
                "is_control": False} for i, (k, v) in enumerate(pairs)]
    result = replay_records(records)
    assert all(e["event"] != "replay_anomaly" or "reason" in e["details"] for e in result.events)


def test_fold_serialises_and_resumes_for_streaming():
    records = _joined_consumer_group().records
    whole = GroupFold(G)
    whole.apply_all(records)
    first = GroupFold(G)
    first.apply_all(records[:3])
    resumed = GroupFold.from_bytes(first.to_bytes())
    resumed.apply_all(records[3:])
    assert resumed.state_row() == whole.state_row()
    assert resumed.member_rows() == whole.member_rows()
    assert resumed.target_assignment_rows() == whole.target_assignment_rows()


def test_fold_state_with_a_raw_previous_target_resumes_with_the_same_rows():
    # States written before the previous target was kept in its row's (jsonable) form hold the raw target.
    records = _joined_consumer_group(Log().consumer_member("m0")).consumer_epoch(3) \
        .consumer_target("m1", [1]).consumer_target_metadata(3, 200).records
    whole = GroupFold(G)
    whole.apply_all(records)
    first = GroupFold(G)
    first.apply_all(records[:-2])
    first._previous_target = copy.deepcopy(first.group.target_assignment)
    resumed = GroupFold.from_bytes(first.to_bytes())
    resumed.apply_all(records[-2:])
    assert resumed.target_assignment_rows() == whole.target_assignment_rows()
    assert len(whole.target_assignment_rows()) == 2 and whole.target_assignment_rows()[1]["previous_target"]


def test_fold_state_of_format_1_with_dict_members_resumes_as_member_dataclasses():
    # A streaming checkpoint written before members were dataclasses (state format 1) carries them as dicts
    # with the same keys; it is upgraded on load, not refused, so the replay resumes where it stopped.
    records = _joined_consumer_group().records
    whole = GroupFold(G)
    whole.apply_all(records)
    first = GroupFold(G)
    first.apply_all(records[:-1])
    state = dict(first.__dict__)
    state.pop("_decode")
    state["group"] = copy.copy(first.group)
    state["group"].members = {mid: m.to_dict() for mid, m in first.group.members.items()}
    resumed = GroupFold.from_bytes(bytes([1]) + zlib.compress(pickle.dumps(state)))
    assert isinstance(resumed.group.members["m1"], ConsumerMember)
    resumed.apply_all(records[-1:])
    assert resumed.to_dict() == whole.to_dict()
    assert resumed.member_rows() == whole.member_rows()


def test_members_are_slots_dataclasses_whose_fields_keep_the_member_table_order():
    result = _joined_consumer_group().replay()
    member = result.groups[G].group.members["m1"]
    assert isinstance(member, ConsumerMember) and not hasattr(member, "__dict__")
    shared = ["member_id", "member_epoch", "previous_member_epoch", "state", "instance_id", "rack_id", "client_id",
              "client_host", "rebalance_timeout_ms"]
    assert list(result.groups[G].to_dict()["members"][0]) == shared + [
        "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "classic_member_metadata",
        "assigned_partitions", "partitions_pending_revocation", "classic_protocol", "target_assignment"]
    assert list(ShareMember("m").to_dict()) == shared + ["subscribed_topic_names", "assigned_partitions"]
    assert list(StreamsMember("m").to_dict()) == shared + [
        "topology_epoch", "process_id", "user_endpoint", "client_tags", "assigned_tasks", "tasks_pending_revocation"]
    assert StreamsMember("m").state is None  # a streams member's state is unknown until its first assignment


def test_member_metadata_update_reports_only_changed_fields():
    log = _joined_consumer_group().consumer_member("m1", instance_id="i1", topics=("t", "u"))
    changed = [e["details"] for e in log.replay().events if e["event"] == "member_metadata_changed"]
    assert [(d["changed"], d["old"], d["new"]) for d in changed] == [
        (["instance_id", "subscribed_topic_names"], {"instance_id": None, "subscribed_topic_names": ["t"]},
         {"instance_id": "i1", "subscribed_topic_names": ["t", "u"]})]


def test_every_event_names_position_group_and_kind():
    result = _joined_consumer_group(Log().commit("t", 0, 1)).replay()
    for e in result.events:
        assert {"partition", "offset", "timestamp", "group_id", "group_type", "event", "details"} <= set(e)
