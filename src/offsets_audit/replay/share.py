"""Share groups (KIP-932): the replay of record types 9-15.

Mirrors ``GroupMetadataManager.replay`` for the ``ShareGroup*`` records and ``modern.share.ShareGroup``,
whose state is only ``Empty`` or ``Stable``.
"""
from __future__ import annotations

from typing import Any

from .state import (
    RecordType,
    LEAVE_GROUP_MEMBER_EPOCH,
    MODERN_MEMBER_STATES,
    ModernGroup,
    jsonable,
    member_identity,
    metadata_change_events,
    partitions_plain,
)


class ShareGroup(ModernGroup):
    """In-memory view of one share group."""

    group_type = "share"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.state_partition_metadata: dict | None = None

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def new_member(self, member_id: str) -> dict:
        member = super().new_member(member_id)
        member.update(subscribed_topic_names=[], assigned_partitions={})
        return member

    def replay(self, record_type: int, key: dict, value: dict | None) -> list[tuple]:
        return _HANDLERS[record_type](self, key, value)

    def _member_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        if value is None:
            return self.remove_member(member_id)
        member, joined = self.member_for_metadata(member_id)
        before = dict(member)
        member.update(
            rack_id=value.get("rackId"),
            client_id=value.get("clientId", ""),
            client_host=value.get("clientHost", ""),
            subscribed_topic_names=list(value.get("subscribedTopicNames") or ()),
        )
        if joined:
            return [("member_joined", member_id, {
                **member_identity(member),
                "rack_id": member["rack_id"],
                "subscribed_topic_names": member["subscribed_topic_names"],
            })]
        return metadata_change_events(member, before, joined)

    def _current_assignment(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        member = self.members.get(member_id)
        if value is None:
            if member is None:
                return []
            member.update(member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                          assigned_partitions={})
            return [("member_fenced_by_tombstone", member_id, {})]
        if member is None:
            member = self.members[member_id] = self.new_member(member_id)
        old, old_assigned = self.member_epochs(member), (member["assigned_partitions"],)
        member["member_epoch"] = value.get("memberEpoch", 0)
        member["previous_member_epoch"] = value.get("previousMemberEpoch", 0)
        member["state"] = MODERN_MEMBER_STATES.get(value.get("state", 0), "UNKNOWN")
        member["assigned_partitions"] = partitions_plain(value.get("assignedPartitions"))
        return self.member_change_events(member, old, old_assigned, ("assigned_partitions",))

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
        return [("share_state_partition_metadata", None, {
            "initialized_topics": sorted(t.get("topicName") or t.get("topicId") or "" for t in initialized),
            "changed": old != self.state_partition_metadata})]

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out["state_partition_metadata"] = self.state_partition_metadata
        out["members"] = [
            dict(m, target_assignment=self.target_assignment.get(m["member_id"])) for m in self.members.values()
        ]
        out["target_assignment"] = self.target_assignment
        return jsonable(out)


_HANDLERS: dict[int, Any] = {
    RecordType.SHARE_GROUP_PARTITION_METADATA: ShareGroup._partition_metadata,
    RecordType.SHARE_GROUP_MEMBER_METADATA: ShareGroup._member_metadata,
    RecordType.SHARE_GROUP_METADATA: ShareGroup._group_metadata,
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: ShareGroup._target_metadata,
    RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: ShareGroup._target_member,
    RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: ShareGroup._current_assignment,
    RecordType.SHARE_GROUP_STATE_PARTITION_METADATA: ShareGroup._state_partition_metadata,
}
