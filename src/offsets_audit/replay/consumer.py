"""Consumer groups (KIP-848): the replay of record types 3-8 and 16.

Mirrors ``GroupMetadataManager.replay`` for the ``ConsumerGroup*`` records and the state that
``modern.consumer.ConsumerGroup`` / ``ConsumerGroupMember`` keep.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .events import EventKind
from .state import (
    RecordType,
    Anomaly,
    ModernGroup,
    ModernMember,
    jsonable,
    partitions_with_epochs,
)


@dataclass(slots=True, eq=False)
class ConsumerMember(ModernMember):
    """``modern.consumer.ConsumerGroupMember``: the shared member fields plus its subscription, its
    classic-protocol metadata (a member that joined through the classic protocol) and its partitions,
    each with the epoch it was assigned in."""

    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    classic_member_metadata: dict | None = None
    assigned_partitions: dict[str, dict[int, int]] = field(default_factory=dict)
    partitions_pending_revocation: dict[str, dict[int, int]] = field(default_factory=dict)

    assignment_fields: ClassVar[tuple[str, ...]] = ("assigned_partitions", "partitions_pending_revocation")

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def update_with_metadata(self, value: dict) -> None:
        self.instance_id = value.get("instanceId")
        self.rack_id = value.get("rackId")
        self.client_id = value.get("clientId", "")
        self.client_host = value.get("clientHost", "")
        self.subscribed_topic_names = list(value.get("subscribedTopicNames") or ())
        self.subscribed_topic_regex = value.get("subscribedTopicRegex", "")
        self.rebalance_timeout_ms = value.get("rebalanceTimeoutMs", -1)
        self.server_assignor = value.get("serverAssignor")
        self.classic_member_metadata = value.get("classicMemberMetadata")

    def set_assignment(self, value: dict | None, member_epoch: int) -> None:
        if value is None:
            self.assigned_partitions, self.partitions_pending_revocation = {}, {}
            return
        self.assigned_partitions = partitions_with_epochs(value.get("assignedPartitions"), member_epoch)
        self.partitions_pending_revocation = partitions_with_epochs(
            value.get("partitionsPendingRevocation"), member_epoch)


class ConsumerGroup(ModernGroup):
    """In-memory view of one consumer group as the coordinator rebuilds it from the log."""

    group_type = "consumer"
    member_class = ConsumerMember
    joined_detail_fields = ("instance_id", "rack_id", "subscribed_topic_names", "subscribed_topic_regex",
                            "server_assignor")
    fenced_detail_fields = ("instance_id",)

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.resolved_regular_expressions: dict[str, dict] = {}

    def replay(self, record_type: int, key: dict, value: dict | None) -> list[tuple]:
        handler = _HANDLERS[record_type]
        return handler(self, key, value)

    # -- record handlers ----------------------------------------------------------------------

    def joined_details(self, member: ModernMember) -> dict:
        details = super().joined_details(member)
        details["classic_protocol"] = member.uses_classic_protocol
        return details

    def _regular_expression(self, key: dict, value: dict | None) -> list[tuple]:
        regex = key["regularExpression"]
        # A new dict rather than an update in place: the fold keeps the one a member record saw (the
        # resolutions the group's stored subscription type counted), without a copy per member record.
        resolved = dict(self.resolved_regular_expressions)
        if value is None:
            resolved.pop(regex, None)
        else:
            resolved[regex] = {
                "topics": sorted(value.get("topics") or ()),
                "version": value.get("version"),
                "timestamp": value.get("timestamp"),
            }
        self.resolved_regular_expressions = resolved
        return [(EventKind.REGEX_RESOLUTION_CHANGED, None, {
            "regular_expression": regex,
            "topics": None if value is None else sorted(value.get("topics") or ()),
        })]

    # -- views --------------------------------------------------------------------------------

    def member_view(self, member: ModernMember) -> dict:
        # Not super().member_view: the key order (classic_protocol before target_assignment) is the table's.
        out = member.to_dict()
        out["classic_protocol"] = member.uses_classic_protocol
        out["target_assignment"] = self.target_assignment.get(member.member_id)
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out["resolved_regular_expressions"] = self.resolved_regular_expressions
        out["members"] = [self.member_view(m) for m in self.members.values()]
        out["target_assignment"] = self.target_assignment
        return jsonable(out)


# One dispatch table per group kind, as Kafka has one replay method per record family: the kinds share record
# layouts, not handlers.
_HANDLERS: dict[int, Any] = {
    RecordType.CONSUMER_GROUP_METADATA: ConsumerGroup._group_metadata,
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: ConsumerGroup._partition_metadata,
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: ConsumerGroup._member_metadata,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ConsumerGroup._target_metadata,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ConsumerGroup._target_member,
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ConsumerGroup._current_assignment,
    RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION: ConsumerGroup._regular_expression,
}

__all__ = ["ConsumerGroup", "ConsumerMember", "Anomaly"]
