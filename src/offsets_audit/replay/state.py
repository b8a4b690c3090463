"""Shared vocabulary of the replay: record families, member states and small helpers.

The group coordinator (``GroupCoordinatorShard.replay``) dispatches each record on its type; the family
of a record decides which kind of group it belongs to. These tables are the facts that dispatch uses.
"""
from __future__ import annotations

from typing import Any

from offsets_audit.codec.record_types import RecordType


R = RecordType
#: record type -> group type it belongs to (offset commits are handled by offsets.py).
OFFSET_RECORD_TYPES = frozenset({R.LEGACY_OFFSET_COMMIT, R.OFFSET_COMMIT})
CLASSIC_RECORD_TYPES = frozenset({R.GROUP_METADATA})
CONSUMER_RECORD_TYPES = frozenset({
    R.CONSUMER_GROUP_METADATA, R.CONSUMER_GROUP_PARTITION_METADATA, R.CONSUMER_GROUP_MEMBER_METADATA,
    R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, R.CONSUMER_GROUP_REGULAR_EXPRESSION})
SHARE_RECORD_TYPES = frozenset({
    R.SHARE_GROUP_PARTITION_METADATA, R.SHARE_GROUP_MEMBER_METADATA, R.SHARE_GROUP_METADATA,
    R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, R.SHARE_GROUP_STATE_PARTITION_METADATA})
STREAMS_RECORD_TYPES = frozenset({
    R.STREAMS_GROUP_METADATA, R.STREAMS_GROUP_PARTITION_METADATA, R.STREAMS_GROUP_MEMBER_METADATA,
    R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
    R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, R.STREAMS_GROUP_TOPOLOGY})
#: Target-assignment records: members (7/13/21) accumulate until the metadata record (6/12/20) completes one
#: target assignment (``GroupFold`` turns that into a ``target_assignment_computed`` event and row).
TARGET_MEMBER_RECORD_TYPES = frozenset({R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                        R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                        R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER})
TARGET_METADATA_RECORD_TYPES = frozenset({R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                                          R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                                          R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA})
del R

GROUP_TYPE_BY_RECORD_TYPE: dict[int, str] = {}
for _types, _name in (
    (CLASSIC_RECORD_TYPES, "classic"),
    (CONSUMER_RECORD_TYPES, "consumer"),
    (SHARE_RECORD_TYPES, "share"),
    (STREAMS_RECORD_TYPES, "streams"),
):
    for _t in _types:
        GROUP_TYPE_BY_RECORD_TYPE[_t] = _name

#: Kafka's ``modern.MemberState`` (consumer and share groups), by the int8 stored in the record.
MODERN_MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}
#: Kafka's ``streams.MemberState``, by the int8 stored in the record.
STREAMS_MEMBER_STATES = {1: "STABLE", 2: "UNREVOKED_TASKS", 3: "UNRELEASED_TASKS", 127: "UNKNOWN"}

#: Member epoch written when a member leaves (``LEAVE_GROUP_MEMBER_EPOCH``).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: Member epoch of a static member that left temporarily (``LEAVE_GROUP_STATIC_MEMBER_EPOCH``).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ``TargetAssignmentMetadata.INITIAL`` of a freshly created modern group.
INITIAL_ASSIGNMENT_EPOCH = 1
INITIAL_ASSIGNMENT_TIMESTAMP = 0


#: Record types whose key names the group ``group`` (the pre-KIP-848 keys); every later key says ``groupId``.
LEGACY_KEY_RECORD_TYPES = OFFSET_RECORD_TYPES | CLASSIC_RECORD_TYPES


def group_id_of(record_type: int, key: dict) -> str | None:
    """Group id in a record key: ``group`` for offset commits and GroupMetadata, else ``groupId``."""
    return key.get("group") if record_type in LEGACY_KEY_RECORD_TYPES else key.get("groupId")


def partitions_with_epochs(topic_partitions: list[dict] | None, default_epoch: int) -> dict[str, dict[int, int]]:
    """Topic id -> {partition: assignment epoch}, as ``Utils.assignmentFromTopicPartitions`` builds it.

    When the ``assignmentEpochs`` array is missing or its size differs from ``partitions``, every
    partition gets ``max(member_epoch, 0)`` (old records, or a static member that left with epoch -2).
    """
    fallback = max(default_epoch, 0)
    out: dict[str, dict[int, int]] = {}
    for tp in topic_partitions or ():
        parts = list(tp.get("partitions") or ())
        epochs = tp.get("assignmentEpochs")
        target = out.setdefault(tp.get("topicId"), {})
        if epochs is not None and len(epochs) == len(parts):
            target.update(zip(parts, epochs))
        else:
            target.update((p, fallback) for p in parts)
    return out


def partitions_plain(topic_partitions: list[dict] | None) -> dict[str, list[int]]:
    """Topic id -> partitions in record order, duplicates dropped (target assignment records carry no epochs).

    The order is kept because Kafka rebuilds the map from the record (``Assignment.fromRecord``: a HashMap
    filled in record order, ``new HashSet<>(partitions)``) and the assignors' tie-breaks follow that order.
    """
    out: dict[str, dict[int, None]] = {}
    for tp in topic_partitions or ():
        out.setdefault(tp.get("topicId"), {}).update(dict.fromkeys(tp.get("partitions") or ()))
    return {t: list(p) for t, p in out.items()}


def tasks_plain(task_ids: list[dict] | None) -> dict[str, list[int]]:
    """Subtopology id -> sorted partitions of a streams task list."""
    out: dict[str, set[int]] = {}
    for t in task_ids or ():
        out.setdefault(t.get("subtopologyId"), set()).update(t.get("partitions") or ())
    return {s: sorted(p) for s, p in out.items()}


def tasks_with_epochs(task_ids: list[dict] | None, default_epoch: int) -> dict[str, dict[int, int]]:
    """Subtopology id -> {partition: assignment epoch} (``TasksTupleWithEpochs.fromCurrentAssignmentRecord``)."""
    fallback = max(default_epoch, 0)
    out: dict[str, dict[int, int]] = {}
    for t in task_ids or ():
        parts = list(t.get("partitions") or ())
        epochs = t.get("assignmentEpochs")
        target = out.setdefault(t.get("subtopologyId"), {})
        if epochs is not None and len(epochs) == len(parts):
            target.update(zip(parts, epochs))
        else:
            target.update((p, fallback) for p in parts)
    return out


def jsonable(obj: Any) -> Any:
    """Dicts with int keys / bytes / sets turned into JSON-friendly values (for ``to_dict`` and events)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(jsonable(v) for v in obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        import base64

        return base64.b64encode(bytes(obj)).decode("ascii")
    return obj


#: Member fields the audit names a member by (who it is and where it runs); see audit/causes.py.
IDENTITY_FIELDS = ("client_id", "client_host", "rack_id", "process_id")
#: Member-metadata fields whose change the audit reports (``member_metadata_changed``).
METADATA_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                   "subscribed_topic_regex", "server_assignor", "rebalance_timeout_ms", "process_id",
                   "topology_epoch", "client_tags", "user_endpoint")


def member_identity(member: dict) -> dict:
    return {f: member.get(f) for f in IDENTITY_FIELDS if f in member}


def metadata_change_events(member: dict, before: dict, joined: bool) -> list[tuple]:
    """``member_metadata_changed`` when a member-metadata record (types 5/10/19) changed a known member:
    the coordinator writes one whenever the member differs, and whether the group epoch moves depends on
    which fields changed (``GroupMetadataManager.hasMemberSubscriptionChanged``)."""
    if joined:
        return []
    changed = [f for f in METADATA_FIELDS if f in member and before.get(f) != member.get(f)]
    if not changed:
        return []
    return [("member_metadata_changed", member["member_id"], {
        "changed": changed, "old": {f: before.get(f) for f in changed}, "new": {f: member.get(f) for f in changed},
        "instance_id": member.get("instance_id"), **member_identity(member)})]


class Anomaly(Exception):
    """A record the coordinator would refuse while loading (it raises IllegalStateException there).

    The replay never stops on such data: the fold turns it into a ``replay_anomaly`` event and carries
    on with the most forgiving reading (KAFKA-17306: compaction may reorder tombstones).
    """

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


class ModernGroup:
    """What Kafka's ``modern.ModernGroup`` keeps for consumer, share and streams groups (KIP-848).

    Group state is derived from the fields on demand, which gives the same answer as Kafka's
    ``maybeUpdateGroupState`` because Kafka re-derives it after every mutation a record can make.
    """

    group_type = "modern"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_ASSIGNMENT_EPOCH
        self.assignment_timestamp = INITIAL_ASSIGNMENT_TIMESTAMP
        self.members: dict[str, dict] = {}
        self.target_assignment: dict[str, Any] = {}
        self.topic_metadata: list[dict] | None = None

    # -- helpers shared by the concrete groups --------------------------------------------------

    def new_member(self, member_id: str) -> dict:
        return {
            "member_id": member_id,
            "member_epoch": 0,
            "previous_member_epoch": -1,
            "state": "STABLE",
            "instance_id": None,
            "rack_id": None,
            "client_id": "",
            "client_host": "",
            "rebalance_timeout_ms": -1,
        }

    def is_reconciled(self, member: dict) -> bool:
        return member.get("state") == "STABLE" and member.get("member_epoch") == self.assignment_epoch

    @property
    def state(self) -> str:
        """``ConsumerGroup.maybeUpdateGroupState``: Empty / Assigning / Reconciling / Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not self.is_reconciled(m) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def set_group_metadata(self, value: dict) -> list[tuple]:
        old, old_hash = self.group_epoch, self.metadata_hash
        self.group_epoch = value.get("epoch", 0)
        self.metadata_hash = value.get("metadataHash", 0)
        if old != self.group_epoch:
            # The hashes let the audit tell a topic-metadata change from a membership change (audit/causes.py).
            return [("group_epoch_bumped", None, {"old": old, "new": self.group_epoch,
                                                  "old_metadata_hash": old_hash, "metadata_hash": self.metadata_hash})]
        return []

    def deletion_events(self) -> list[tuple]:
        """Group tombstone: Kafka requires members, targets and target metadata to be deleted first.

        Compaction can reorder those tombstones (KAFKA-17306), so the group is deleted anyway and the
        out-of-order case is reported as a ``replay_anomaly``.
        """
        problems = []
        if self.members:
            problems.append(f"{len(self.members)} members remain")
        if self.target_assignment:
            problems.append(f"{len(self.target_assignment)} target assignments remain")
        if self.assignment_epoch != -1:
            problems.append("target assignment metadata was not deleted first")
        events: list[tuple] = []
        if problems:
            events.append(("replay_anomaly", None, {
                "reason": "group tombstone before its member/target tombstones", "problems": problems}))
        events.append(("group_deleted", None, {}))
        return events

    def _group_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        if value is None:
            return self.deletion_events()
        return self.set_group_metadata(value)

    def _partition_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        """The deprecated partition-metadata records (types 4, 9, 18), kept as topic metadata."""
        self.topic_metadata = None if value is None else value.get("topics")
        return []

    def member_for_metadata(self, member_id: str) -> tuple[dict, bool]:
        """The member a member-metadata record (types 5/10/19) updates, created when it joins now."""
        member = self.members.get(member_id)
        if member is not None:
            return member, False
        member = self.members[member_id] = self.new_member(member_id)
        return member, True

    @staticmethod
    def member_epochs(member: dict) -> tuple:
        return member["member_epoch"], member["previous_member_epoch"], member["state"]

    def member_change_events(self, member: dict, old_epochs: tuple, old_assignment: tuple,
                             fields: tuple[str, ...]) -> list[tuple]:
        """The events a current-assignment record (types 8/14/22) causes: ``member_epoch_advanced`` when
        the member's epoch, previous epoch or state changed, ``member_assignment_changed`` when any of the
        assignment ``fields`` (partitions or tasks, and those pending revocation) changed."""
        events: list[tuple] = []
        member_id = member["member_id"]
        if old_epochs != self.member_epochs(member):
            events.append(("member_epoch_advanced", member_id, {
                "member_epoch": member["member_epoch"],
                "previous_member_epoch": member["previous_member_epoch"],
                "member_state": member["state"],
                "old_member_epoch": old_epochs[0],
            }))
        if old_assignment != tuple(member[f] for f in fields):
            events.append(("member_assignment_changed", member_id, {f: jsonable(member[f]) for f in fields}))
        return events

    def target_of(self, value: dict):
        """A member's target as its target-assignment member record (types 7/13) holds it; streams (21)
        overrides this with its tasks."""
        return partitions_plain(value.get("topicPartitions"))

    def _target_member(self, key: dict, value: dict | None) -> list[tuple]:
        member_id = key["memberId"]
        if value is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = self.target_of(value)
        return []

    def _target_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        self.set_target_metadata(value)
        return []

    def set_target_metadata(self, value: dict | None) -> None:
        if value is None:
            self.assignment_epoch, self.assignment_timestamp = -1, 0
            if self.target_assignment:
                raise Anomaly(
                    "target assignment metadata tombstone while member targets remain",
                    remaining=sorted(self.target_assignment),
                )
        else:
            self.assignment_epoch = value.get("assignmentEpoch", 0)
            self.assignment_timestamp = value.get("assignmentTimestamp", 0)

    def remove_member(self, member_id: str) -> list[tuple]:
        """Member metadata tombstone (``removeMember``); Kafka requires the epoch -1 and no target first."""
        member = self.members.get(member_id)
        if member is None:
            return []
        problems = []
        if member.get("member_epoch") != LEAVE_GROUP_MEMBER_EPOCH:
            problems.append("current assignment tombstone missing")
        if member_id in self.target_assignment:
            problems.append("target assignment tombstone missing")
        del self.members[member_id]
        events: list[tuple] = [("member_left", member_id, {"instance_id": member.get("instance_id"),
                                                           **member_identity(member)})]
        if problems:
            events.append(("replay_anomaly", member_id, {"reason": "member tombstone out of order", "problems": problems}))
        return events

    def base_dict(self) -> dict:
        return {
            "group_id": self.group_id,
            "group_type": self.group_type,
            "state": self.state,
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch,
            "assignment_timestamp": self.assignment_timestamp,
            "topic_metadata": self.topic_metadata,
        }
