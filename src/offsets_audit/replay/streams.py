"""Streams groups (KIP-1071): the replay of record types 17-23.

Mirrors ``GroupMetadataManager.replay`` for the ``StreamsGroup*`` records and ``streams.StreamsGroup``:
the group is ``NotReady`` until its topology epoch equals the validated topology epoch carried by
``StreamsGroupMetadataValue``.
"""
from __future__ import annotations

from typing import Any

from .state import (
    RecordType,
    LEAVE_GROUP_MEMBER_EPOCH,
    STREAMS_MEMBER_STATES,
    ModernGroup,
    jsonable,
    member_identity,
    metadata_change_events,
    tasks_plain,
    tasks_with_epochs,
)

_TASK_KINDS = (("active", "activeTasks"), ("standby", "standbyTasks"), ("warmup", "warmupTasks"))


class StreamsGroup(ModernGroup):
    """In-memory view of one streams group."""

    group_type = "streams"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.validated_topology_epoch = -1
        self.stored_description_topology_epoch = -1
        self.failed_description_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.topology: dict | None = None

    @property
    def state(self) -> str:
        """``StreamsGroup.maybeUpdateGroupState`` (adds NotReady before Assigning)."""
        if not self.members:
            return "Empty"
        if self.topology is None or self.topology.get("epoch") != self.validated_topology_epoch:
            return "NotReady"
        return super().state

    def new_member(self, member_id: str) -> dict:
        member = super().new_member(member_id)
        member.update(
            state=None,
            topology_epoch=-1,
            process_id=None,
            user_endpoint=None,
            client_tags={},
            assigned_tasks={"active": {}, "standby": {}, "warmup": {}},
            tasks_pending_revocation={"active": {}, "standby": {}, "warmup": {}},
        )
        return member

    def replay(self, record_type: int, key: dict, value: dict | None) -> list[tuple]:
        return _HANDLERS[record_type](self, key, value)

    def _group_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        if value is None:
            problems = []
            if self.members:
                problems.append(f"{len(self.members)} members remain")
            if self.assignment_epoch != -1:
                problems.append("target assignment metadata was not deleted first")
            events: list[tuple] = [("group_deleted", None, {})]
            if problems:
                events.insert(0, ("replay_anomaly", None, {
                    "reason": "group tombstone before its member/target tombstones", "problems": problems}))
            return events
        old_validated, old_configs = self.validated_topology_epoch, self.last_assignment_configs
        self.validated_topology_epoch = value.get("validatedTopologyEpoch", -1)
        self.stored_description_topology_epoch = value.get("storedDescriptionTopologyEpoch", -1)
        self.failed_description_topology_epoch = value.get("failedDescriptionTopologyEpoch", -1)
        configs = value.get("lastAssignmentConfigs")
        self.last_assignment_configs = {c["key"]: c["value"] for c in configs} if configs else {}
        events = self.set_group_metadata(value)
        for _, _, details in events:
            details.update(old_validated_topology_epoch=old_validated,
                           validated_topology_epoch=self.validated_topology_epoch,
                           assignment_configs_changed=old_configs != self.last_assignment_configs)
        return events

    def _topology(self, key: dict, value: dict | None) -> list[tuple]:
        old_epoch = None if self.topology is None else self.topology.get("epoch")
        if value is None:
            self.topology = None
        else:
            self.topology = {"epoch": value.get("epoch"), "subtopologies": value.get("subtopologies") or []}
        return [("topology_changed", None, {
            "old_topology_epoch": old_epoch,
            "topology_epoch": None if self.topology is None else self.topology["epoch"],
            "subtopology_ids": [] if self.topology is None else
            [s.get("subtopologyId") for s in self.topology["subtopologies"]],
        })]

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
            rebalance_timeout_ms=value.get("rebalanceTimeoutMs", -1),
            topology_epoch=value.get("topologyEpoch"),
            process_id=value.get("processId"),
            user_endpoint=value.get("userEndpoint"),
            client_tags={t["key"]: t["value"] for t in value.get("clientTags") or ()},
        )
        if joined:
            return [("member_joined", member_id, {
                **member_identity(member),
                "instance_id": member["instance_id"],
                "rack_id": member["rack_id"],
                "process_id": member["process_id"],
                "topology_epoch": member["topology_epoch"],
            })]
        return metadata_change_events(member, before, joined)

    def target_of(self, value: dict) -> dict:
        return {kind: tasks_plain(value.get(field)) for kind, field in _TASK_KINDS}

    def _current_assignment(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        member = self.members.get(member_id)
        empty: dict[str, dict] = {"active": {}, "standby": {}, "warmup": {}}
        if value is None:
            if member is None:
                return []
            member.update(member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                          assigned_tasks=empty, tasks_pending_revocation=dict(empty))
            return [("member_fenced_by_tombstone", member_id, {"process_id": member.get("process_id")})]
        if member is None:
            member = self.members[member_id] = self.new_member(member_id)
        epoch = value.get("memberEpoch", 0)
        fields = ("assigned_tasks", "tasks_pending_revocation")
        old, old_tasks = self.member_epochs(member), tuple(member[f] for f in fields)
        member["member_epoch"] = epoch
        member["previous_member_epoch"] = value.get("previousMemberEpoch", 0)
        member["state"] = STREAMS_MEMBER_STATES.get(value.get("state", 0), "UNKNOWN")
        member["assigned_tasks"] = {k: tasks_with_epochs(value.get(f), epoch) for k, f in _TASK_KINDS}
        member["tasks_pending_revocation"] = {
            k: tasks_with_epochs(value.get(f + "PendingRevocation"), epoch) for k, f in _TASK_KINDS
        }
        return self.member_change_events(member, old, old_tasks, fields)

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out.update(
            validated_topology_epoch=self.validated_topology_epoch,
            stored_description_topology_epoch=self.stored_description_topology_epoch,
            failed_description_topology_epoch=self.failed_description_topology_epoch,
            last_assignment_configs=self.last_assignment_configs,
            topology=self.topology,
            topology_epoch=None if self.topology is None else self.topology.get("epoch"),
            members=[dict(m, target_assignment=self.target_assignment.get(m["member_id"]))
                     for m in self.members.values()],
            target_assignment=self.target_assignment,
        )
        return jsonable(out)


_HANDLERS: dict[int, Any] = {
    RecordType.STREAMS_GROUP_METADATA: StreamsGroup._group_metadata,
    RecordType.STREAMS_GROUP_PARTITION_METADATA: StreamsGroup._partition_metadata,
    RecordType.STREAMS_GROUP_MEMBER_METADATA: StreamsGroup._member_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: StreamsGroup._target_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: StreamsGroup._target_member,
    RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: StreamsGroup._current_assignment,
    RecordType.STREAMS_GROUP_TOPOLOGY: StreamsGroup._topology,
}
