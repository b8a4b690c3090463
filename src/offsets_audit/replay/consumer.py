"""Consumer groups (KIP-848): the replay of record types 3-8 and 16.

Mirrors ``GroupMetadataManager.replay`` for the ``ConsumerGroup*`` records and the state that
``modern.consumer.ConsumerGroup`` / ``ConsumerGroupMember`` keep.
"""
from __future__ import annotations

from typing import Any

from .state import (
    RecordType,
    LEAVE_GROUP_MEMBER_EPOCH,
    MODERN_MEMBER_STATES,
    Anomaly,
    ModernGroup,
    jsonable,
    member_identity,
    metadata_change_events,
    partitions_with_epochs,
)


class ConsumerGroup(ModernGroup):
    """In-memory view of one consumer group as the coordinator rebuilds it from the log."""

    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.resolved_regular_expressions: dict[str, dict] = {}

    def new_member(self, member_id: str) -> dict:
        member = super().new_member(member_id)
        member.update(
            subscribed_topic_names=[],
            subscribed_topic_regex="",
            server_assignor=None,
            classic_member_metadata=None,
            assigned_partitions={},
            partitions_pending_revocation={},
        )
        return member

    def replay(self, record_type: int, key: dict, value: dict | None) -> list[tuple]:
        handler = _HANDLERS[record_type]
        return handler(self, key, value)

    # -- record handlers ----------------------------------------------------------------------

    def _member_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        if value is None:
            return self.remove_member(member_id)
        member, joined = self.member_for_metadata(member_id)
        before = dict(member)
        member.update(
            instance_id=value.get("instanceId"),
            rack_id=value.get("rackId"),
            client_id=value.get("clientId", ""),
            client_host=value.get("clientHost", ""),
            subscribed_topic_names=list(value.get("subscribedTopicNames") or ()),
            subscribed_topic_regex=value.get("subscribedTopicRegex", ""),
            rebalance_timeout_ms=value.get("rebalanceTimeoutMs", -1),
            server_assignor=value.get("serverAssignor"),
            classic_member_metadata=value.get("classicMemberMetadata"),
        )
        if joined:
            return [("member_joined", member_id, {
                **member_identity(member),
                "instance_id": member["instance_id"],
                "rack_id": member["rack_id"],
                "subscribed_topic_names": member["subscribed_topic_names"],
                "subscribed_topic_regex": member["subscribed_topic_regex"],
                "classic_protocol": member["classic_member_metadata"] is not None,
                "server_assignor": member["server_assignor"],
            })]
        return metadata_change_events(member, before, joined)

    def _current_assignment(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        member = self.members.get(member_id)
        if value is None:
            if member is None:
                return []
            member.update(
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
            return [("member_fenced_by_tombstone", member_id, {"instance_id": member.get("instance_id")})]
        if member is None:
            member = self.new_member(member_id)
            self.members[member_id] = member
        return self.update_member_assignment(member, value)

    def update_member_assignment(self, member: dict, value: dict) -> list[tuple]:
        epoch = value.get("memberEpoch", 0)
        fields = ("assigned_partitions", "partitions_pending_revocation")
        old, old_assignment = self.member_epochs(member), tuple(member[f] for f in fields)
        member["member_epoch"] = epoch
        member["previous_member_epoch"] = value.get("previousMemberEpoch", 0)
        member["state"] = MODERN_MEMBER_STATES.get(value.get("state", 0), "UNKNOWN")
        member["assigned_partitions"] = partitions_with_epochs(value.get("assignedPartitions"), epoch)
        member["partitions_pending_revocation"] = partitions_with_epochs(
            value.get("partitionsPendingRevocation"), epoch
        )
        return self.member_change_events(member, old, old_assignment, fields)

    def _regular_expression(self, key: dict, value: dict | None) -> list[tuple]:
        regex = key.get("regularExpression")
        if value is None:
            self.resolved_regular_expressions.pop(regex, None)
        else:
            self.resolved_regular_expressions[regex] = {
                "topics": sorted(value.get("topics") or ()),
                "version": value.get("version"),
                "timestamp": value.get("timestamp"),
            }
        return [("regex_resolution_changed", None, {
            "regular_expression": regex,
            "topics": None if value is None else sorted(value.get("topics") or ()),
        })]

    # -- views --------------------------------------------------------------------------------

    def member_view(self, member: dict) -> dict:
        out = dict(member)
        out["classic_protocol"] = member.get("classic_member_metadata") is not None
        out["target_assignment"] = self.target_assignment.get(member["member_id"])
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out["resolved_regular_expressions"] = self.resolved_regular_expressions
        out["members"] = [self.member_view(m) for m in self.members.values()]
        out["target_assignment"] = self.target_assignment
        return jsonable(out)


_HANDLERS: dict[int, Any] = {
    RecordType.CONSUMER_GROUP_METADATA: ConsumerGroup._group_metadata,
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: ConsumerGroup._partition_metadata,
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: ConsumerGroup._member_metadata,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ConsumerGroup._target_metadata,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ConsumerGroup._target_member,
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ConsumerGroup._current_assignment,
    RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION: ConsumerGroup._regular_expression,
}

__all__ = ["ConsumerGroup", "Anomaly"]
