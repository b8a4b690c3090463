"""Shared vocabulary of the replay: record families, member states and small helpers.

The group coordinator (``GroupCoordinatorShard.replay``) dispatches each record on its type; the family
of a record decides which kind of group it belongs to. These tables are the facts that dispatch uses.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from offsets_audit.codec.offset_commits import OFFSET_COMMIT_RECORD_TYPES
from offsets_audit.codec.record_types import RecordType

from .events import EventKind, TextEnum


R = RecordType
#: record type -> group type it belongs to (offset commits are handled by offsets.py).
OFFSET_RECORD_TYPES = OFFSET_COMMIT_RECORD_TYPES  # the codec's: one spelling of the commit record types
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
#: The consumer-group records whose replay makes ``ConsumerGroup`` recompute its stored subscription type
#: (``updateMember`` / ``removeMember``): a member's metadata and its current assignment, values and tombstones.
SUBSCRIPTION_TYPE_RECORD_TYPES = frozenset({R.CONSUMER_GROUP_MEMBER_METADATA, R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT})
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

class GroupState(TextEnum):
    """A group's state as Kafka spells it (``ConsumerGroup.ConsumerGroupState``, ``StreamsGroup.StreamsGroupState``,
    ``ShareGroup.ShareGroupState`` and ``ClassicGroupState`` toString): the replay derives it and the audit
    re-derives it from the events; both speak these values. A group loaded from the log is never in a classic
    group's transient states (``PreparingRebalance``, ``CompletingRebalance``)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    NOT_READY = "NotReady"
    DEAD = "Dead"


class MemberState(TextEnum):
    """A member's state as Kafka names it (``modern.consumer.MemberState``, ``streams.MemberState``)."""

    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"
    UNREVOKED_TASKS = "UNREVOKED_TASKS"
    UNRELEASED_TASKS = "UNRELEASED_TASKS"
    UNKNOWN = "UNKNOWN"


#: Kafka's ``modern.MemberState`` (consumer and share groups), by the int8 stored in the record.
MODERN_MEMBER_STATES = {0: MemberState.STABLE, 1: MemberState.UNREVOKED_PARTITIONS,
                        2: MemberState.UNRELEASED_PARTITIONS, 127: MemberState.UNKNOWN}
#: Kafka's ``streams.MemberState``, by the int8 stored in the record.
STREAMS_MEMBER_STATES = {1: MemberState.STABLE, 2: MemberState.UNREVOKED_TASKS, 3: MemberState.UNRELEASED_TASKS,
                         127: MemberState.UNKNOWN}

#: Member epoch written when a member leaves (``LEAVE_GROUP_MEMBER_EPOCH``).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: Member epoch of a static member that left temporarily (``LEAVE_GROUP_STATIC_MEMBER_EPOCH``).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: The group epoch of a freshly created modern group: ``ModernGroup``'s constructor sets 1 (the epoch of
#: ``TargetAssignmentMetadata.INITIAL``), so a group whose first records are a member's (a regular-expression
#: subscriber waiting for its resolution) is Stable at epoch 1 before any ``*GroupMetadata`` record.
INITIAL_GROUP_EPOCH = 1
#: ``TargetAssignmentMetadata.INITIAL`` of a freshly created modern group.
INITIAL_ASSIGNMENT_EPOCH = 1
INITIAL_ASSIGNMENT_TIMESTAMP = 0


#: Record types whose key names the group ``group`` (the pre-KIP-848 keys); every later key says ``groupId``.
LEGACY_KEY_RECORD_TYPES = OFFSET_RECORD_TYPES | CLASSIC_RECORD_TYPES


def group_id_of(record_type: int, key: dict) -> str | None:
    """Group id in a record key: ``group`` for offset commits and GroupMetadata, else ``groupId``."""
    return key.get("group") if record_type in LEGACY_KEY_RECORD_TYPES else key.get("groupId")


def modern_group_state(members: Mapping[Any, Any], group_epoch: int, assignment_epoch: int,
                       is_reconciled: Callable[[Any], bool] | None = None, *,
                       any_unreconciled: Callable[[], bool] | None = None) -> GroupState:
    """``ConsumerGroup.maybeUpdateGroupState``: Empty / Assigning / Reconciling / Stable.

    One derivation for the replay (members from records) and the audit's ``GroupView`` (members from events),
    so the two always name the same state. Whether some member is not reconciled: ``is_reconciled`` asked of
    each, or ``any_unreconciled`` answers for all (a caller that keeps them as its members change).
    """
    if not members:
        return GroupState.EMPTY
    if group_epoch > assignment_epoch:
        return GroupState.ASSIGNING
    if any_unreconciled is not None:
        unreconciled = any_unreconciled()
    else:
        assert is_reconciled is not None
        unreconciled = any(not is_reconciled(m) for m in members.values())
    return GroupState.RECONCILING if unreconciled else GroupState.STABLE


def partitions_with_epochs(topic_partitions: list[dict] | None, default_epoch: int) -> dict[str, dict[int, int]]:
    """Topic id -> {partition: assignment epoch}, as ``Utils.assignmentFromTopicPartitions`` builds it.

    When the ``assignmentEpochs`` array is missing or its size differs from ``partitions``, every
    partition gets ``max(member_epoch, 0)`` (old records, or a static member that left with epoch -2).
    """
    return _partitions_with_epochs(topic_partitions, "topicId", default_epoch)


def partitions_plain(topic_partitions: list[dict] | None) -> dict[str, list[int]]:
    """Topic id -> partitions in record order, duplicates dropped (target assignment records carry no epochs).

    The order is kept because Kafka rebuilds the map from the record (``Assignment.fromRecord``: a HashMap
    filled in record order, ``new HashSet<>(partitions)``) and the assignors' tie-breaks follow that order.
    """
    out: dict[str, dict[int, None]] = {}
    for tp in topic_partitions or ():
        out.setdefault(tp["topicId"], {}).update(dict.fromkeys(tp.get("partitions") or ()))
    return {t: list(p) for t, p in out.items()}


def tasks_plain(task_ids: list[dict] | None) -> dict[str, list[int]]:
    """Subtopology id -> sorted partitions of a streams task list."""
    out: dict[str, set[int]] = {}
    for t in task_ids or ():
        out.setdefault(t["subtopologyId"], set()).update(t.get("partitions") or ())
    return {s: sorted(p) for s, p in out.items()}


def tasks_with_epochs(task_ids: list[dict] | None, default_epoch: int) -> dict[str, dict[int, int]]:
    """Subtopology id -> {partition: assignment epoch} (``TasksTupleWithEpochs.fromCurrentAssignmentRecord``)."""
    return _partitions_with_epochs(task_ids, "subtopologyId", default_epoch)


def _partitions_with_epochs(entries: list[dict] | None, id_field: str, default_epoch: int) -> dict[str, dict[int, int]]:
    """Topic or subtopology id (``id_field``) -> {partition: assignment epoch}; see ``partitions_with_epochs``."""
    fallback = max(default_epoch, 0)
    out: dict[str, dict[int, int]] = {}
    for entry in entries or ():
        parts = list(entry.get("partitions") or ())
        epochs = entry.get("assignmentEpochs")
        target = out.setdefault(entry[id_field], {})
        if epochs is not None and len(epochs) == len(parts):
            target.update(zip(parts, epochs))
        else:
            target.update((p, fallback) for p in parts)
    return out


#: Types ``jsonable`` hands back as they are (checked by exact type first: most values in a row are these).
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def jsonable(obj: Any) -> Any:
    """Dicts with int keys / bytes / sets turned into JSON-friendly values (for ``to_dict`` and events).

    Always a new container for a dict, list, tuple or set (callers may change the result); anything else
    comes back as it is. The replay calls this per event and per target row, so the common scalars are
    recognised by exact type before the ``isinstance`` checks that also catch subclasses."""
    cls = type(obj)
    if cls in _JSON_SCALARS:
        return obj
    if cls is dict:
        return {k if type(k) is str else str(k): v if type(v) in _JSON_SCALARS else jsonable(v)
                for k, v in obj.items()}
    if cls is list:
        return [v if type(v) in _JSON_SCALARS else jsonable(v) for v in obj]
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


def member_identity(member: ModernMember) -> dict:
    """Who a member is and where it runs: the :data:`IDENTITY_FIELDS` its kind has."""
    return {f: getattr(member, f) for f in member_fields(type(member), IDENTITY_FIELDS)}


def metadata_change_events(member: ModernMember, before: dict) -> list[tuple]:
    """``member_metadata_changed`` when a member-metadata record (types 5/10/19) changed a known member
    (``before``: its :meth:`ModernMember.metadata` ahead of the record): the coordinator writes one whenever
    the member differs, and whether the group epoch moves depends on which fields changed
    (``GroupMetadataManager.hasMemberSubscriptionChanged``)."""
    changed = [f for f, old in before.items() if old != getattr(member, f)]
    if not changed:
        return []
    return [(EventKind.MEMBER_METADATA_CHANGED, member.member_id, {
        "changed": changed, "old": {f: before[f] for f in changed}, "new": {f: getattr(member, f) for f in changed},
        "instance_id": member.instance_id, **member_identity(member)})]


def member_fields(member_class: type[ModernMember], names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The field names of a member class in declaration order (the ``to_dict`` key order), or those of
    ``names`` it has, in the order of ``names``. Computed once per class: the replay asks per record."""
    found = _MEMBER_FIELDS.get((member_class, names))
    if found is None:
        declared = tuple(f.name for f in fields(member_class))
        found = _MEMBER_FIELDS[member_class, names] = declared if names is None else tuple(
            n for n in names if n in declared)
    return found


_MEMBER_FIELDS: dict[tuple[type, tuple[str, ...] | None], tuple[str, ...]] = {}


@dataclass(slots=True, eq=False)
class ModernMember:
    """A member of a consumer, share or streams group: the fields Kafka's ``modern.ModernGroupMember`` shares.

    Each group kind extends it with its own fields (``ConsumerMember``, ``ShareMember``, ``StreamsMember``)
    and says how its two member records set them. A member is updated in place from each record, the way
    ``ConsumerGroupMember.Builder.updateWith`` builds the next member from the previous one and the record
    (in place rather than a new value per record: the replay applies millions of them). Kafka overloads
    ``updateWith`` by the value's type; a decoded value here is a plain dict, so each of the two member
    records has its method (:meth:`update_with_metadata`, :meth:`update_with_assignment`). The declaration
    order of the fields is the key order of a member in the group's ``to_dict``.
    """

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState | None = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1

    #: The member states by the int8 a current-assignment record stores.
    member_states: ClassVar[dict[int, MemberState]] = MODERN_MEMBER_STATES
    #: Fields a current-assignment record sets besides the epochs and the state (partitions or tasks).
    assignment_fields: ClassVar[tuple[str, ...]] = ()

    @property
    def uses_classic_protocol(self) -> bool:
        """``ConsumerGroupMember.useClassicProtocol``: joined through the classic protocol (consumer groups only)."""
        return False

    def update_with_metadata(self, value: dict) -> None:
        """``Builder.updateWith(<kind>GroupMemberMetadataValue)``: the fields a member-metadata record
        (types 5/10/19) sets; each kind names its own."""
        raise NotImplementedError

    def update_with_assignment(self, value: dict) -> None:
        """``Builder.updateWith(<kind>GroupCurrentMemberAssignmentValue)`` (types 8/14/22): epochs, state
        and the :attr:`assignment_fields` (partitions or tasks, with their assignment epochs)."""
        epoch = self.member_epoch = value.get("memberEpoch", 0)
        self.previous_member_epoch = value.get("previousMemberEpoch", 0)
        self.state = self.member_states.get(value.get("state", 0), MemberState.UNKNOWN)
        self.set_assignment(value, epoch)

    def set_assignment(self, value: dict | None, member_epoch: int) -> None:
        """The :attr:`assignment_fields` from a current-assignment value; ``None``: owns nothing."""
        raise NotImplementedError

    def fence(self) -> None:
        """A current-assignment tombstone: epochs ``LEAVE_GROUP_MEMBER_EPOCH``, nothing owned (as
        ``GroupMetadataManager.replay`` rebuilds the member from its previous self)."""
        self.member_epoch = self.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
        self.set_assignment(None, LEAVE_GROUP_MEMBER_EPOCH)

    def epochs(self) -> tuple:
        """Epoch, previous epoch and state: what a ``member_epoch_advanced`` event reports a change of."""
        return self.member_epoch, self.previous_member_epoch, self.state

    def assignment(self) -> tuple:
        """The :attr:`assignment_fields` values (each record sets new objects, so old and new compare)."""
        return tuple(getattr(self, f) for f in self.assignment_fields)

    def metadata(self) -> dict:
        """The :data:`METADATA_FIELDS` this kind has, by name (what ``member_metadata_changed`` compares)."""
        return {f: getattr(self, f) for f in member_fields(type(self), METADATA_FIELDS)}

    def to_dict(self) -> dict:
        """The fields by name, in declaration order (values shared, not copied)."""
        return {f: getattr(self, f) for f in member_fields(type(self))}


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
    #: The members' type (each kind's fields and how its records set them).
    member_class: type[ModernMember] = ModernMember
    #: Member fields a ``member_joined`` event names besides the member's identity.
    joined_detail_fields: tuple[str, ...] = ()
    #: Member fields a ``member_fenced_by_tombstone`` event names.
    fenced_detail_fields: tuple[str, ...] = ()
    #: Whether a group tombstone requires the members' target assignments deleted first.
    deletion_checks_targets = True

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = INITIAL_GROUP_EPOCH
        #: Whether a ``*GroupMetadata`` record has set the epoch (the first one's bump reports ``old`` 0).
        self.epoch_recorded = False
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_ASSIGNMENT_EPOCH
        self.assignment_timestamp = INITIAL_ASSIGNMENT_TIMESTAMP
        self.members: dict[str, ModernMember] = {}
        self.target_assignment: dict[str, Any] = {}
        self.topic_metadata: list[dict] | None = None

    # -- helpers shared by the concrete groups --------------------------------------------------

    def new_member(self, member_id: str) -> ModernMember:
        return self.member_class(member_id)

    def is_reconciled(self, member: ModernMember) -> bool:
        return member.state == MemberState.STABLE and member.member_epoch == self.assignment_epoch

    @property
    def state(self) -> GroupState:
        """``ConsumerGroup.maybeUpdateGroupState``: Empty / Assigning / Reconciling / Stable."""
        return modern_group_state(self.members, self.group_epoch, self.assignment_epoch, self.is_reconciled)

    def set_group_metadata(self, value: dict) -> list[tuple]:
        old = self.group_epoch if getattr(self, "epoch_recorded", True) else 0
        old_hash = self.metadata_hash
        self.epoch_recorded = True
        self.group_epoch = value.get("epoch", 0)
        self.metadata_hash = value.get("metadataHash", 0)
        if old != self.group_epoch:
            # The hashes let the audit tell a topic-metadata change from a membership change (audit/causes.py).
            return [(EventKind.GROUP_EPOCH_BUMPED, None, {"old": old, "new": self.group_epoch,
                                                  "old_metadata_hash": old_hash, "metadata_hash": self.metadata_hash})]
        return []

    def deletion_events(self) -> list[tuple]:
        """Group tombstone: Kafka requires members, targets (not for streams groups, whose check does not look
        at them) and target metadata to be deleted first.

        Compaction can reorder those tombstones (KAFKA-17306), so the group is deleted anyway and the
        out-of-order case is reported as a ``replay_anomaly``.
        """
        problems = []
        if self.members:
            problems.append(f"{len(self.members)} members remain")
        if self.deletion_checks_targets and self.target_assignment:
            problems.append(f"{len(self.target_assignment)} target assignments remain")
        if self.assignment_epoch != -1:
            problems.append("target assignment metadata was not deleted first")
        events: list[tuple] = []
        if problems:
            events.append((EventKind.REPLAY_ANOMALY, None, {
                "reason": "group tombstone before its member/target tombstones", "problems": problems}))
        events.append((EventKind.GROUP_DELETED, None, {}))
        return events

    def _group_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        if value is None:
            return self.deletion_events()
        return self.set_group_metadata(value)

    def _partition_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        """The deprecated partition-metadata records (types 4, 9, 18), kept as topic metadata."""
        self.topic_metadata = None if value is None else value.get("topics")
        return []

    def member_for_metadata(self, member_id: str) -> tuple[ModernMember, bool]:
        """The member a member-metadata record (types 5/10/19) updates, created when it joins now."""
        member = self.members.get(member_id)
        if member is not None:
            return member, False
        member = self.members[member_id] = self.new_member(member_id)
        return member, True

    # -- a member updated from a record, one path per record family (``ConsumerGroupMember.Builder.updateWith``)

    def joined_details(self, member: ModernMember) -> dict:
        """The ``member_joined`` details of a member its first metadata record created: who it is and the
        :attr:`joined_detail_fields` of its kind."""
        return {**member_identity(member), **{f: getattr(member, f) for f in self.joined_detail_fields}}

    def _member_metadata(self, key: dict, value: dict | None) -> list[tuple]:
        """Member metadata (types 5/10/19): a tombstone removes the member, a value joins or updates it."""
        member_id = key["memberId"]
        if value is None:
            return self.remove_member(member_id)
        member, joined = self.member_for_metadata(member_id)
        if joined:
            member.update_with_metadata(value)
            return [(EventKind.MEMBER_JOINED, member_id, self.joined_details(member))]
        before = member.metadata()
        member.update_with_metadata(value)
        return metadata_change_events(member, before)

    def _current_assignment(self, key: dict, value: dict | None) -> list[tuple]:
        """Current member assignment (types 8/14/22): epochs, state and assignment; a tombstone fences the member
        (its epochs become ``LEAVE_GROUP_MEMBER_EPOCH`` and it owns nothing)."""
        member_id = key["memberId"]
        member = self.members.get(member_id)
        if value is None:
            if member is None:
                return []
            member.fence()
            return [(EventKind.MEMBER_FENCED_BY_TOMBSTONE, member_id,
                     {f: getattr(member, f) for f in self.fenced_detail_fields})]
        if member is None:
            member = self.members[member_id] = self.new_member(member_id)
        old_epochs, old_assignment = member.epochs(), member.assignment()
        member.update_with_assignment(value)
        return self.member_change_events(member, old_epochs, old_assignment)

    @staticmethod
    def member_change_events(member: ModernMember, old_epochs: tuple, old_assignment: tuple) -> list[tuple]:
        """The events a current-assignment record (types 8/14/22) causes: ``member_epoch_advanced`` when
        the member's epoch, previous epoch or state changed, ``member_assignment_changed`` when any of its
        assignment fields (partitions or tasks, and those pending revocation) changed."""
        events: list[tuple] = []
        member_id = member.member_id
        if old_epochs != member.epochs():
            events.append((EventKind.MEMBER_EPOCH_ADVANCED, member_id, {
                "member_epoch": member.member_epoch,
                "previous_member_epoch": member.previous_member_epoch,
                "member_state": member.state,
                "old_member_epoch": old_epochs[0],
            }))
        if old_assignment != member.assignment():
            # The fold's ``_event`` makes the details JSON-friendly (new containers: the member's stay its own).
            events.append((EventKind.MEMBER_ASSIGNMENT_CHANGED, member_id,
                           {f: getattr(member, f) for f in member.assignment_fields}))
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
        if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            problems.append("current assignment tombstone missing")
        if member_id in self.target_assignment:
            problems.append("target assignment tombstone missing")
        del self.members[member_id]
        events: list[tuple] = [(EventKind.MEMBER_LEFT, member_id, {"instance_id": member.instance_id,
                                                           **member_identity(member)})]
        if problems:
            events.append((EventKind.REPLAY_ANOMALY, member_id, {"reason": "member tombstone out of order", "problems": problems}))
        return events

    def member_view(self, member: ModernMember) -> dict:
        """A member as ``to_dict`` shows it: its fields and its target assignment (None when it has none)."""
        out = member.to_dict()
        out["target_assignment"] = self.target_assignment.get(member.member_id)
        return out

    def base_dict(self) -> dict:
        # The group's columns shared by every group kind's rows.
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
