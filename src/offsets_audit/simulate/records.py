"""Logical coordinator records: what the group coordinator appends, before byte encoding.

One helper per record family, in the spirit of Kafka's ``GroupCoordinatorRecordHelpers``: key and value
are dicts with Kafka's JSON field names (camelCase, the generated ``*JsonConverter`` names), so
``offsets_audit.codec.encode_record`` can turn them into the exact key/value bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offsets_audit.codec.record_types import RecordType

#: Value versions the coordinator of the golden Kafka snapshot writes.
OFFSET_COMMIT_VALUE_VERSION = 4
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(slots=True)
class LogicalRecord:
    """One ``__consumer_offsets`` record: type, key dict, value dict (``None`` = tombstone), value version.

    ``fault`` names an injected fault (see ``simulate.faults``); the writer lists it in ``faults.json``
    with the offset the record got.
    """

    record_type: RecordType
    key: dict
    value: dict | None
    value_version: int = 0
    fault: dict | None = None

    @property
    def group_id(self) -> str | None:
        return self.key.get("groupId", self.key.get("group"))


@dataclass(slots=True)
class Append:
    """One coordinator append = one record batch (all records of one ``CoordinatorResult``).

    A control append (``control`` = "COMMIT" or "ABORT") is a transaction marker written for
    ``producer_id`` with ``coordinator_epoch``; it has no data records.
    """

    time_ms: int
    records: list = field(default_factory=list)
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False
    control: str | None = None
    coordinator_epoch: int = 0


def topic_partitions(assignment: dict, with_epochs: bool, id_field: str = "topicId") -> list:
    """``{topic: {partition: epoch}}`` (or ``{topic: iterable}``) as the records' topic-partition arrays."""
    out = []
    for topic in sorted(assignment):
        parts = assignment[topic]
        if not parts:
            continue
        partitions = sorted(parts)
        entry = {id_field: topic, "partitions": partitions}
        if with_epochs:
            entry["assignmentEpochs"] = [parts[p] for p in partitions]
        out.append(entry)
    return out


# -- offsets -------------------------------------------------------------------------------------------------

def offset_commit(group_id, topic, partition, offset, leader_epoch, metadata, commit_ms) -> LogicalRecord:
    return LogicalRecord(RecordType.OFFSET_COMMIT, {"group": group_id, "topic": topic, "partition": partition},
                         {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata,
                          "commitTimestamp": commit_ms}, OFFSET_COMMIT_VALUE_VERSION)


def offset_tombstone(group_id, topic, partition) -> LogicalRecord:
    return LogicalRecord(RecordType.OFFSET_COMMIT, {"group": group_id, "topic": topic, "partition": partition}, None, 0)


# -- classic groups ------------------------------------------------------------------------------------------

def group_metadata(group_id, protocol_type, generation, protocol, leader, state_ms, members) -> LogicalRecord:
    return LogicalRecord(RecordType.GROUP_METADATA, {"group": group_id},
                         {"protocolType": protocol_type, "generation": generation, "protocol": protocol,
                          "leader": leader, "currentStateTimestamp": state_ms, "members": members},
                         GROUP_METADATA_VALUE_VERSION)


def group_tombstone(group_id) -> LogicalRecord:
    return LogicalRecord(RecordType.GROUP_METADATA, {"group": group_id}, None, 0)


# -- KIP-848 consumer groups -----------------------------------------------------------------------------------

def consumer_member_metadata(group_id, member) -> LogicalRecord:
    return LogicalRecord(RecordType.CONSUMER_GROUP_MEMBER_METADATA, {"groupId": group_id, "memberId": member.member_id}, {
        "instanceId": member.instance_id, "rackId": member.rack_id, "clientId": member.client_id,
        "clientHost": "localhost/127.0.0.1", "subscribedTopicNames": list(member.subscribed_topics),
        "subscribedTopicRegex": "", "rebalanceTimeoutMs": 30000, "serverAssignor": member.server_assignor,
        "classicMemberMetadata": None})


def _epoch_record(record_type: RecordType, group_id, epoch, metadata_hash) -> LogicalRecord:
    """A consumer/share group's epoch record (the two kinds' GroupMetadata values have the same fields)."""
    return LogicalRecord(record_type, {"groupId": group_id}, {"epoch": epoch, "metadataHash": metadata_hash})


def _target_partitions_record(record_type: RecordType, group_id, member_id, target: dict) -> LogicalRecord:
    """A consumer/share member's target assignment record: its partitions, without epochs."""
    return LogicalRecord(record_type, {"groupId": group_id, "memberId": member_id},
                         {"topicPartitions": topic_partitions(target, False)})


def _target_metadata_record(record_type: RecordType, group_id, assignment_epoch, assignment_ms) -> LogicalRecord:
    """Any modern kind's TargetAssignmentMetadata record (same fields for consumer, share and streams)."""
    return LogicalRecord(record_type, {"groupId": group_id},
                         {"assignmentEpoch": assignment_epoch, "assignmentTimestamp": assignment_ms})


def consumer_group_metadata(group_id, epoch, metadata_hash) -> LogicalRecord:
    return _epoch_record(RecordType.CONSUMER_GROUP_METADATA, group_id, epoch, metadata_hash)


def consumer_target_member(group_id, member_id, target: dict) -> LogicalRecord:
    return _target_partitions_record(RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id, target)


def consumer_target_metadata(group_id, assignment_epoch, assignment_ms) -> LogicalRecord:
    return _target_metadata_record(RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id,
                                   assignment_epoch, assignment_ms)


def consumer_current_assignment(group_id, member) -> LogicalRecord:
    return LogicalRecord(RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                         {"groupId": group_id, "memberId": member.member_id}, {
                             "memberEpoch": member.member_epoch,
                             "previousMemberEpoch": member.previous_member_epoch,
                             "state": member.state,
                             "assignedPartitions": topic_partitions(member.assigned, True),
                             "partitionsPendingRevocation": topic_partitions(member.pending_revocation, True)})


def member_tombstones(group_id, member_id, types) -> list:
    """Tombstones of one member's records, in the order the coordinator writes them on removal."""
    return [LogicalRecord(t, {"groupId": group_id, "memberId": member_id}, None) for t in types]


def group_tombstones(group_id, types) -> list:
    return [LogicalRecord(t, {"groupId": group_id}, None) for t in types]


# -- share groups ----------------------------------------------------------------------------------------------

def share_member_metadata(group_id, member) -> LogicalRecord:
    return LogicalRecord(RecordType.SHARE_GROUP_MEMBER_METADATA, {"groupId": group_id, "memberId": member.member_id}, {
        "rackId": member.rack_id, "clientId": member.client_id, "clientHost": "localhost/127.0.0.1",
        "subscribedTopicNames": list(member.subscribed_topics)})


def share_group_metadata(group_id, epoch, metadata_hash) -> LogicalRecord:
    return _epoch_record(RecordType.SHARE_GROUP_METADATA, group_id, epoch, metadata_hash)


def share_target_member(group_id, member_id, target) -> LogicalRecord:
    return _target_partitions_record(RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id, target)


def share_target_metadata(group_id, assignment_epoch, assignment_ms) -> LogicalRecord:
    return _target_metadata_record(RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id,
                                   assignment_epoch, assignment_ms)


# One current-assignment builder per kind: the fields differ per kind (as in Kafka).
def share_current_assignment(group_id, member) -> LogicalRecord:
    return LogicalRecord(RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"groupId": group_id, "memberId": member.member_id}, {
        "memberEpoch": member.member_epoch, "previousMemberEpoch": member.previous_member_epoch,
        "state": member.state, "assignedPartitions": topic_partitions(member.assigned, False)})


def share_state_partition_metadata(group_id, initializing: list, initialized: list) -> LogicalRecord:
    return LogicalRecord(RecordType.SHARE_GROUP_STATE_PARTITION_METADATA, {"groupId": group_id}, {
        "initializingTopics": initializing, "initializedTopics": initialized, "deletingTopics": []})


# -- streams groups (KIP-1071) -----------------------------------------------------------------------------------

def streams_member_metadata(group_id, member, topology_epoch) -> LogicalRecord:
    return LogicalRecord(RecordType.STREAMS_GROUP_MEMBER_METADATA, {"groupId": group_id, "memberId": member.member_id}, {
        "instanceId": member.instance_id, "rackId": None, "clientId": member.client_id,
        "clientHost": "localhost/127.0.0.1", "rebalanceTimeoutMs": 30000, "topologyEpoch": topology_epoch,
        "processId": member.process_id, "userEndpoint": {"host": f"host-{member.process_id[:4]}", "port": 8080},
        "clientTags": []})


def streams_topology(group_id, epoch, subtopologies) -> LogicalRecord:
    return LogicalRecord(RecordType.STREAMS_GROUP_TOPOLOGY, {"groupId": group_id}, {"epoch": epoch, "subtopologies": subtopologies})


def streams_group_metadata(group_id, epoch, metadata_hash, validated_topology_epoch, standby_replicas):
    return LogicalRecord(RecordType.STREAMS_GROUP_METADATA, {"groupId": group_id}, {
        "epoch": epoch, "metadataHash": metadata_hash, "validatedTopologyEpoch": validated_topology_epoch,
        "lastAssignmentConfigs": [{"key": "num.standby.replicas", "value": str(standby_replicas)}]})


def _tasks(tasks: dict, with_epochs: bool) -> list:
    return topic_partitions(tasks, with_epochs, id_field="subtopologyId")


def streams_target_member(group_id, member_id, active, standby) -> LogicalRecord:
    return LogicalRecord(RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, {"groupId": group_id, "memberId": member_id}, {
        "activeTasks": _tasks(active, False), "standbyTasks": _tasks(standby, False), "warmupTasks": []})


def streams_target_metadata(group_id, assignment_epoch, assignment_ms) -> LogicalRecord:
    return _target_metadata_record(RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, group_id,
                                   assignment_epoch, assignment_ms)


def streams_current_assignment(group_id, member) -> LogicalRecord:
    return LogicalRecord(RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"groupId": group_id, "memberId": member.member_id}, {
        "memberEpoch": member.member_epoch, "previousMemberEpoch": member.previous_member_epoch,
        "state": member.state, "activeTasks": _tasks(member.assigned, True),
        "standbyTasks": _tasks(member.standby, False), "warmupTasks": [],
        "activeTasksPendingRevocation": _tasks(member.pending_revocation, True),
        "standbyTasksPendingRevocation": _tasks(member.standby_pending, False), "warmupTasksPendingRevocation": []})
