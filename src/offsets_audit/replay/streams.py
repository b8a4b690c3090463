"""Streams groups (KIP-1071): the replay of record types 17-23.

Mirrors ``GroupMetadataManager.replay`` for the ``StreamsGroup*`` records and ``streams.StreamsGroup``:
the group is ``NotReady`` until its topology epoch equals the validated topology epoch carried by
``StreamsGroupMetadataValue``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .events import EventKind
from .state import (
    GroupState,
    MemberState,
    RecordType,
    STREAMS_MEMBER_STATES,
    ModernGroup,
    ModernMember,
    jsonable,
    tasks_plain,
    tasks_with_epochs,
)

_TASK_KINDS = (("active", "activeTasks"), ("standby", "standbyTasks"), ("warmup", "warmupTasks"))


def _no_tasks() -> dict[str, dict[str, dict[int, int]]]:
    return {"active": {}, "standby": {}, "warmup": {}}


@dataclass(slots=True, eq=False)
class StreamsMember(ModernMember):
    """``streams.StreamsGroupMember``: the shared member fields plus its topology epoch, process, endpoint
    and client tags, and its active / standby / warm-up tasks, each partition with the epoch it was
    assigned in. Its state is unknown (``None``) until its first current-assignment record."""

    state: MemberState | None = None
    topology_epoch: int | None = -1
    process_id: str | None = None
    user_endpoint: dict | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    assigned_tasks: dict[str, dict[str, dict[int, int]]] = field(default_factory=_no_tasks)
    tasks_pending_revocation: dict[str, dict[str, dict[int, int]]] = field(default_factory=_no_tasks)

    member_states: ClassVar[dict[int, MemberState]] = STREAMS_MEMBER_STATES
    assignment_fields: ClassVar[tuple[str, ...]] = ("assigned_tasks", "tasks_pending_revocation")

    def update_with_metadata(self, value: dict) -> None:
        self.instance_id = value.get("instanceId")
        self.rack_id = value.get("rackId")
        self.client_id = value.get("clientId", "")
        self.client_host = value.get("clientHost", "")
        self.rebalance_timeout_ms = value.get("rebalanceTimeoutMs", -1)
        self.topology_epoch = value.get("topologyEpoch")
        self.process_id = value.get("processId")
        self.user_endpoint = value.get("userEndpoint")
        self.client_tags = {t["key"]: t["value"] for t in value.get("clientTags") or ()}

    def set_assignment(self, value: dict | None, member_epoch: int) -> None:
        if value is None:
            self.assigned_tasks, self.tasks_pending_revocation = _no_tasks(), _no_tasks()
            return
        self.assigned_tasks = {k: tasks_with_epochs(value.get(f), member_epoch) for k, f in _TASK_KINDS}
        self.tasks_pending_revocation = {
            k: tasks_with_epochs(value.get(f + "PendingRevocation"), member_epoch) for k, f in _TASK_KINDS}


class StreamsGroup(ModernGroup):
    """In-memory view of one streams group."""

    group_type = "streams"
    member_class = StreamsMember
    joined_detail_fields = ("instance_id", "rack_id", "process_id", "topology_epoch")
    fenced_detail_fields = ("process_id",)
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

    def target_of(self, value: dict) -> dict:
        return {kind: tasks_plain(value.get(field)) for kind, field in _TASK_KINDS}

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


# One dispatch table per group kind, as Kafka has one replay method per record family: the kinds share record
# layouts, not handlers.
_HANDLERS: dict[int, Any] = {
    RecordType.STREAMS_GROUP_METADATA: StreamsGroup._group_metadata,
    RecordType.STREAMS_GROUP_PARTITION_METADATA: StreamsGroup._partition_metadata,
    RecordType.STREAMS_GROUP_MEMBER_METADATA: StreamsGroup._member_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: StreamsGroup._target_metadata,
    RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: StreamsGroup._target_member,
    RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: StreamsGroup._current_assignment,
    RecordType.STREAMS_GROUP_TOPOLOGY: StreamsGroup._topology,
}
