"""Share groups (KIP-932): the replay of record types 9-15.

Mirrors ``GroupMetadataManager.replay`` for the ``ShareGroup*`` records and ``modern.share.ShareGroup``,
whose state is only ``Empty`` or ``Stable``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .events import EventKind
from .state import (
    GroupState,
    RecordType,
    ModernGroup,
    ModernMember,
    jsonable,
    partitions_plain,
)


@dataclass(slots=True, eq=False)
class ShareMember(ModernMember):
    """``modern.share.ShareGroupMember``: the shared member fields plus its subscription and its
    partitions (a share member's assignment carries no epochs)."""

    subscribed_topic_names: list[str] = field(default_factory=list)
    assigned_partitions: dict[str, list[int]] = field(default_factory=dict)

    assignment_fields: ClassVar[tuple[str, ...]] = ("assigned_partitions",)

    def update_with_metadata(self, value: dict) -> None:
        self.rack_id = value.get("rackId")
        self.client_id = value.get("clientId", "")
        self.client_host = value.get("clientHost", "")
        self.subscribed_topic_names = list(value.get("subscribedTopicNames") or ())

    def set_assignment(self, value: dict | None, member_epoch: int) -> None:
        self.assigned_partitions = {} if value is None else partitions_plain(value.get("assignedPartitions"))


class ShareGroup(ModernGroup):
    """In-memory view of one share group."""

    group_type = "share"
    member_class = ShareMember
    joined_detail_fields = ("rack_id", "subscribed_topic_names")

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.state_partition_metadata: dict | None = None

    @property
    def state(self) -> GroupState:
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def replay(self, record_type: int, key: dict, value: dict | None) -> list[tuple]:
        return _HANDLERS[record_type](self, key, value)

    def _state_partition_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        old = self.state_partition_metadata
        if value is None:
            self.state_partition_metadata = None
        else:
            self.state_partition_metadata = {
                k: value.get(k) for k in ("initializingTopics", "initializedTopics", "deletingTopics")
            }
        # Partitions whose share state became initialized get assigned by the next group epoch bump
        # (``GroupMetadataManager.initializedAssignmentPending``); the audit names that cause.
        initialized = (self.state_partition_metadata or {}).get("initializedTopics") or []
        return [(EventKind.SHARE_STATE_PARTITION_METADATA, None, {
            "initialized_topics": sorted(t.get("topicName") or t.get("topicId") or "" for t in initialized),
            "changed": old != self.state_partition_metadata})]

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out["state_partition_metadata"] = self.state_partition_metadata
        out["members"] = [self.member_view(m) for m in self.members.values()]
        out["target_assignment"] = self.target_assignment
        return jsonable(out)


# One dispatch table per group kind, as Kafka has one replay method per record family: the kinds share record
# layouts, not handlers.
_HANDLERS: dict[int, Any] = {
    RecordType.SHARE_GROUP_PARTITION_METADATA: ShareGroup._partition_metadata,
    RecordType.SHARE_GROUP_MEMBER_METADATA: ShareGroup._member_metadata,
    RecordType.SHARE_GROUP_METADATA: ShareGroup._group_metadata,
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: ShareGroup._target_metadata,
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: ShareGroup._target_member,
    RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: ShareGroup._current_assignment,
    RecordType.SHARE_GROUP_STATE_PARTITION_METADATA: ShareGroup._state_partition_metadata,
}
