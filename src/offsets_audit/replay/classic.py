"""Classic groups: the replay of ``GroupMetadata`` (record type 2) and simple groups.

Mirrors ``GroupMetadataManager.replay(GroupMetadataKey, GroupMetadataValue)``: every value replaces the
whole group with a freshly loaded ``ClassicGroup`` in state ``Empty`` (no members) or ``Stable``; a
tombstone removes the group whatever its type. An offset commit for an unknown group creates a
"simple" classic group: empty, with no protocol type (``OffsetMetadataManager.replay``).
"""
from __future__ import annotations

from typing import Any

from .state import GroupState, jsonable


class ClassicGroup:
    """A classic (JoinGroup/SyncGroup) group as ``ClassicGroup`` looks right after loading."""

    group_type = "classic"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.current_state_timestamp: int | None = None
        self.members: list[dict] = []

    @property
    def state(self) -> GroupState:
        """``Empty`` when loaded without members, otherwise ``Stable`` (the load rule)."""
        return GroupState.STABLE if self.members else GroupState.EMPTY

    @property
    def is_simple(self) -> bool:
        """``ClassicGroup.isSimpleGroup``: no protocol type and no members; modern groups may replace it."""
        return not self.protocol_type and not self.members

    def load(self, value: dict) -> None:
        protocol_type = value.get("protocolType")
        self.protocol_type = protocol_type or None
        self.generation = value.get("generation", 0)
        self.protocol = value.get("protocol")
        self.leader = value.get("leader")
        ts = value.get("currentStateTimestamp", -1)
        self.current_state_timestamp = None if ts in (None, -1) else ts
        members = []
        for m in value.get("members") or ():
            session_timeout = m.get("sessionTimeout")
            rebalance_timeout = m.get("rebalanceTimeout", -1)
            members.append({
                "member_id": m.get("memberId"),
                "instance_id": m.get("groupInstanceId"),
                "client_id": m.get("clientId"),
                "client_host": m.get("clientHost"),
                "rebalance_timeout_ms": session_timeout if rebalance_timeout in (None, -1) else rebalance_timeout,
                "session_timeout_ms": session_timeout,
                "subscription": m.get("subscription"),
                "assignment": m.get("assignment"),
                "subscription_decoded": m.get("subscription_decoded"),
                "assignment_decoded": m.get("assignment_decoded"),
            })
        self.members = members

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "group_id": self.group_id,
            "group_type": self.group_type,
            "state": self.state,
            "generation": self.generation,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "current_state_timestamp": self.current_state_timestamp,
            "simple": self.is_simple,
            "members": self.members,
        })
