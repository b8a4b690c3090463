"""Streams groups (KIP-1071): the replay of record types 17-23.

Mirrors ``GroupMetadataManager.replay`` for the ``StreamsGroup*`` records and ``streams.StreamsGroup``:
the group is ``NotReady`` until its topology epoch equals the validated topology epoch carried by
``StreamsGroupMetadataValue``.
"""
from __future__ import annotations

from typing import Any

from .events import EventKind
from .state import (
    GroupState,
    RecordType,
    STREAMS_MEMBER_STATES,
    ModernGroup,
    jsonable,
    tasks_plain,
    tasks_with_epochs,
)

_TASK_KINDS = (("active", "activeTasks"), ("standby", "standbyTasks"), ("warmup", "warmupTasks"))


class StreamsGroup(ModernGroup):
    """In-memory view of one streams group."""

    group_type = "streams"
    joined_detail_fields = ("instance_id", "rack_id", "process_id", "topology_epoch")
    assignment_fields = ("assigned_tasks", "tasks_pending_revocation")
    fenced_detail_fields = ("process_id",)
    member_states = STREAMS_MEMBER_STATES
    deletion_checks_targets = False  # Kafka's streams group tombstone check does not look at target assignments

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.validated_topology_epoch = -1
        self.stored_description_topology_epoch = -1
        self.failed_description_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.topology: dict | None = None

    @property
    def state(self) -> GroupState:
        """``StreamsGroup.maybeUpdateGroupState`` (adds NotReady before Assigning)."""
        if not self.members:
            return GroupState.EMPTY
        if self.topology is None or self.topology.get("epoch") != self.validated_topology_epoch:
            return GroupState.NOT_READY
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
            return self.deletion_events()
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
        return [(EventKind.TOPOLOGY_CHANGED, None, {
            "old_topology_epoch": old_epoch,
            "topology_epoch": None if self.topology is None else self.topology["epoch"],
            "subtopology_ids": [] if self.topology is None else
            [s.get("subtopologyId") for s in self.topology["subtopologies"]],
        })]

    def metadata_of(self, value: dict) -> dict:
        return dict(
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

    def target_of(self, value: dict) -> dict:
        return {kind: tasks_plain(value.get(field)) for kind, field in _TASK_KINDS}

    def assignment_of(self, value: dict, member_epoch: int) -> dict:
        return {
            "assigned_tasks": {k: tasks_with_epochs(value.get(f), member_epoch) for k, f in _TASK_KINDS},
            "tasks_pending_revocation": {
                k: tasks_with_epochs(value.get(f + "PendingRevocation"), member_epoch) for k, f in _TASK_KINDS},
        }

    def empty_assignment(self) -> dict:
        return {"assigned_tasks": {"active": {}, "standby": {}, "warmup": {}},
                "tasks_pending_revocation": {"active": {}, "standby": {}, "warmup": {}}}

    def to_dict(self) -> dict[str, Any]:
        out = self.base_dict()
        out.update(
            validated_topology_epoch=self.validated_topology_epoch,
            stored_description_topology_epoch=self.stored_description_topology_epoch,
            failed_description_topology_epoch=self.failed_description_topology_epoch,
            last_assignment_configs=self.last_assignment_configs,
            topology=self.topology,
            topology_epoch=None if self.topology is None else self.topology.get("epoch"),
            members=[self.member_view(m) for m in self.members.values()],
            target_assignment=self.target_assignment,
        )
        return jsonable(out)


# One dispatch table per group kind on purpose, as Kafka has one replay method per record family; the
# consumer/share/streams tables look alike because the kinds share record shapes, not handlers.
_HANDLERS: dict[int, Any] = {
    RecordType.STREAMS_GROUP_METADATA: StreamsGroup._group_metadata,
    RecordType.STREAMS_GROUP_PARTITION_METADATA: StreamsGroup._partition_metadata,
    RecordType.STREAMS_GROUP_MEMBER_METADATA: StreamsGroup._member_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: StreamsGroup._target_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: StreamsGroup._target_member,
    RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: StreamsGroup._current_assignment,
    RecordType.STREAMS_GROUP_TOPOLOGY: StreamsGroup._topology,
}
