"""Consumer groups (KIP-848): the replay of record types 3-8 and 16.

Mirrors ``GroupMetadataManager.replay`` for the ``ConsumerGroup*`` records and the state that
``modern.consumer.ConsumerGroup`` / ``ConsumerGroupMember`` keep.
"""
from __future__ import annotations

from typing import Any

from .events import EventKind
from .state import (
    RecordType,
    Anomaly,
    ModernGroup,
    jsonable,
    partitions_with_epochs,
)


class ConsumerGroup(ModernGroup):
    """In-memory view of one consumer group as the coordinator rebuilds it from the log."""

    group_type = "consumer"
    joined_detail_fields = ("instance_id", "rack_id", "subscribed_topic_names", "subscribed_topic_regex",
                            "server_assignor")
    assignment_fields = ("assigned_partitions", "partitions_pending_revocation")
    fenced_detail_fields = ("instance_id",)

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

    def metadata_of(self, value: dict) -> dict:
        return dict(
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

    def joined_details(self, member: dict) -> dict:
        details = super().joined_details(member)
        details["classic_protocol"] = member["classic_member_metadata"] is not None
        return details

    def assignment_of(self, value: dict, member_epoch: int) -> dict:
        return {
            "assigned_partitions": partitions_with_epochs(value.get("assignedPartitions"), member_epoch),
            "partitions_pending_revocation": partitions_with_epochs(
                value.get("partitionsPendingRevocation"), member_epoch),
        }

    def empty_assignment(self) -> dict:
        return {"assigned_partitions": {}, "partitions_pending_revocation": {}}

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
        return [(EventKind.REGEX_RESOLUTION_CHANGED, None, {
            "regular_expression": regex,
            "topics": None if value is None else sorted(value.get("topics") or ()),
        })]

    # -- views --------------------------------------------------------------------------------

    def member_view(self, member: dict) -> dict:
        # Not super().member_view: the key order (classic_protocol before target_assignment) is the table's.
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


# One dispatch table per group kind on purpose, as Kafka has one replay method per record family; the
# consumer/share/streams tables look alike because the kinds share record shapes, not handlers.
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
