"""The fold of one group's records in log order, shared by the batch and the streaming replay.

A group lives in exactly one ``__consumer_offsets`` partition, so its records arrive in that
partition's offset order. ``GroupFold`` applies them one at a time, the way
``GroupCoordinatorShard.replay`` routes each record to ``GroupMetadataManager``; it never needs the
whole history at once, and ``to_bytes`` / ``from_bytes`` let a streaming state store carry it between
micro-batches.
"""
from __future__ import annotations

import json
import pickle
import zlib
from typing import Any, Callable, Iterable

from .events import EventKind, event_row
from .classic import ClassicGroup
from .consumer import ConsumerGroup
from .share import ShareGroup
from .state import (
    GROUP_TYPE_BY_RECORD_TYPE,
    OFFSET_RECORD_TYPES,
    SUBSCRIPTION_TYPE_RECORD_TYPES,
    TARGET_MEMBER_RECORD_TYPES,
    TARGET_METADATA_RECORD_TYPES,
    Anomaly,
    GroupState,
    ModernGroup,
    jsonable,
)
from .streams import StreamsGroup

GROUP_CLASSES = {"consumer": ConsumerGroup, "share": ShareGroup, "streams": StreamsGroup}

#: Version byte of ``GroupFold.to_bytes``. 2: modern groups' members are member dataclasses; a format-1
#: state (members as dicts with the same keys) is upgraded on load, so a checkpoint survives the upgrade.
_STATE_FORMAT = 2
_UPGRADABLE_STATE_FORMATS = frozenset({1, _STATE_FORMAT})


def default_decode(key: bytes | None, value: bytes | None):
    """``offsets_audit.codec.decode_record`` (imported late so the fold loads without the codec)."""
    from offsets_audit.codec import decode_record

    return decode_record(key, value)


def decode_of(record: dict, decode: Callable | None = None):
    """The decoded record of ``record``: a ready ``decoded`` entry, else the codec on key/value bytes."""
    decoded = record.get("decoded")
    if decoded is not None:
        return decoded
    return (decode or default_decode)(record.get("key"), record.get("value"))


def error_code_of(exc: Exception) -> str:
    return str(getattr(exc, "code", None) or type(exc).__name__)


def undecodable_details(exc: Exception) -> dict:
    """The ``details`` of the ``replay_anomaly`` event of a record the codec could not decode."""
    return {"reason": "undecodable record", "error_code": error_code_of(exc), "error": str(exc)}


def _classic_member_changes(previous: dict[str, dict], members: list[dict]) -> dict[str, str]:
    """Members of both records whose protocol metadata changed, and how: a classic member re-joining with other
    metadata is what makes ``ClassicGroup`` rebalance while its membership stays (``ClassicGroupMember.matches``).
    For the consumer protocol, other topics are ``subscription_changed``, another rack ``rack_changed``, and other
    bytes with the same topics and rack (owned partitions, user data: a cooperative assignor's follow-up join)
    ``member_metadata_changed``; for other protocols any other bytes are ``member_metadata_changed``."""
    out: dict[str, str] = {}
    for m in members:
        old = previous.get(m["member_id"])
        if old is None or old.get("subscription") == m.get("subscription"):
            continue
        before, after = old.get("subscription_decoded"), m.get("subscription_decoded")
        if before is not None and after is not None:
            if sorted(before.get("topics") or ()) != sorted(after.get("topics") or ()):
                out[m["member_id"]] = "subscription_changed"
            elif before.get("rackId") != after.get("rackId"):
                out[m["member_id"]] = "rack_changed"
            else:
                out[m["member_id"]] = "member_metadata_changed"
        else:
            out[m["member_id"]] = "member_metadata_changed"
    return out


class GroupFold:
    """Replay state of one group id (all its incarnations: created, deleted, re-created...)."""

    def __init__(self, group_id: str, decode: Callable | None = None) -> None:
        self.group_id = group_id
        self.group: Any = None
        self.last_group_type: str | None = None
        self.deleted = False
        self.partition: int | None = None
        self.last_offset: int | None = None
        self.last_timestamp: int | None = None
        self.records_applied = 0
        self._decode = decode
        self._targets_changed: set[str] = set()
        #: The target of the last target assignment, as its row holds it (``jsonable``: shared, never changed).
        self._previous_target: dict[str, Any] = {}
        self._target_rows: list[dict] = []
        self._target_json: dict[str, tuple[Any, Any]] = {}
        #: (append of the last consumer member record, the resolutions it saw, those the last member record of an
        #: earlier append saw): what the group's stored subscription type counted (``_member_record_seen``)
        self._type_counted: tuple[int | None, dict, dict | None] | None = None

    # -- serialisation for a state store --------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Compact state (zlib-compressed pickle of plain objects), for a streaming state store."""
        state = dict(self.__dict__)
        state.pop("_decode", None)
        state.pop("_target_json", None)  # a cache, rebuilt on demand
        return bytes([_STATE_FORMAT]) + zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)

    @classmethod
    def from_bytes(cls, data: bytes, decode: Callable | None = None) -> GroupFold:
        if not data or data[0] not in _UPGRADABLE_STATE_FORMATS:
            raise ValueError(f"unknown GroupFold state format {data[:1]!r}; the state store was written by another version")
        fold = cls.__new__(cls)
        fold.__dict__.update(pickle.loads(zlib.decompress(data[1:])))
        fold._decode = decode
        fold._target_json = {}
        # States written before the previous target was kept in its row's form hold a copy of the raw one.
        fold._previous_target = jsonable(fold._previous_target)
        group = fold.group
        if data[0] == 1 and isinstance(group, ModernGroup):
            dict_members: dict[str, Any] = group.members
            group.members = {member_id: group.member_class(**member) for member_id, member in dict_members.items()}
        return fold

    # -- the fold -------------------------------------------------------------------------------

    @property
    def group_type(self) -> str | None:
        return self.group.group_type if self.group is not None else self.last_group_type

    def apply_all(self, records: Iterable[dict]) -> list[dict]:
        events: list[dict] = []
        for r in records:
            events.extend(self.apply(r))
        return events

    def apply(self, record: dict, decoded: Any = None) -> list[dict]:
        """Replay one record of this group; returns the events it caused (maybe none). ``decoded``: the
        record already decoded (else its ``decoded`` entry, else the codec on its key/value bytes)."""
        if record.get("is_control"):
            return []
        self.partition = record.get("partition", self.partition)
        self.records_applied += 1
        if decoded is None:
            try:
                decoded = decode_of(record, self._decode)
            except Exception as exc:  # the codec's DecodeError, or anything it did not foresee
                return [self._event(record, EventKind.REPLAY_ANOMALY, None, undecodable_details(exc))]
        record_type = decoded.record_type
        if record_type not in OFFSET_RECORD_TYPES:
            # last_offset / last_timestamp: the group's last group record (offset commits live in offsets).
            self.last_offset = record.get("offset", self.last_offset)
            self.last_timestamp = record.get("timestamp", self.last_timestamp)
        key = decoded.key or {}
        value = decoded.value
        epoch_before = getattr(self.group, "group_epoch", None)
        try:
            raw = self._replay(record_type, key, value, record)
        except Anomaly as anomaly:
            raw = [(EventKind.REPLAY_ANOMALY, None, {"reason": anomaly.reason, "record_type": record_type, **anomaly.details})]
        if self.group is not None and getattr(self.group, "group_epoch", None) != epoch_before:
            # where the group epoch last moved: a heartbeat that bumps it recomputes the group's subscription type
            self._epoch_moved = (record.get("batch_base_offset"), record.get("offset"))
        if record_type in SUBSCRIPTION_TYPE_RECORD_TYPES and isinstance(self.group, ConsumerGroup):
            self._member_record_seen(record.get("batch_base_offset"), self.group.resolved_regular_expressions)
        for kind, member_id, _ in raw:
            if kind == EventKind.MEMBER_JOINED and member_id is not None:
                joined: dict[str, int | None] | None = getattr(self, "_joined_batch", None)  # (older folds lack it)
                if joined is None:
                    joined = {}
                    self._joined_batch = joined
                joined[member_id] = record.get("batch_base_offset")
                joined_at = getattr(self, "_joined_offset", None)
                if joined_at is None:
                    joined_at = {}
                    self._joined_offset = joined_at
                joined_at[member_id] = record.get("offset")
        return [self._event(record, kind, member_id, details) for kind, member_id, details in raw]

    def _replay(self, record_type: int, key: dict, value: dict | None, record: dict | None = None) -> list[tuple]:
        if record_type in OFFSET_RECORD_TYPES:
            if value is not None and self.group is None:
                return self._create("classic", simple=True)
            return []
        family = GROUP_TYPE_BY_RECORD_TYPE.get(record_type)
        if family is None:
            raise Anomaly("unknown record type", record_type=record_type)
        if family == "classic":
            return self._replay_classic(value)
        group = self.group
        events: list[tuple] = []
        if group is None or group.group_type != family:
            if value is None and group is None:
                return []  # Kafka ignores tombstones of groups it does not know
            if value is None and not (group.group_type == "classic" and group.is_simple):
                return [(EventKind.REPLAY_ANOMALY, None, {
                    "reason": f"{family} tombstone for a {group.group_type} group; ignored",
                    "record_type": record_type})]
            if group is not None and not (group.group_type == "classic" and group.is_simple):
                events.append((EventKind.REPLAY_ANOMALY, None, {
                    "reason": f"{family} record for a non-empty {group.group_type} group; replaced it",
                    "record_type": record_type}))
            events.extend(self._create(family))
        events.extend(self.group.replay(record_type, key, value))
        if record_type in TARGET_MEMBER_RECORD_TYPES:
            self._targets_changed.add(key["memberId"])
        elif record_type in TARGET_METADATA_RECORD_TYPES:
            events.extend(self._target_assignment_computed(record or {}))
        if any(e[0] == EventKind.GROUP_DELETED for e in events):
            self.last_group_type = self.group.group_type
            self.group = None
            self.deleted = True
        return events

    def _create(self, family: str, simple: bool = False) -> list[tuple]:
        old_type = self.group.group_type if self.group is not None else None
        self.group = ClassicGroup(self.group_id) if family == "classic" else GROUP_CLASSES[family](self.group_id)
        self.last_group_type = family
        self.deleted = False
        self._targets_changed = set()
        self._previous_target = {}
        self._target_json = {}
        self._type_counted = None
        if old_type is None:
            return [(EventKind.GROUP_CREATED, None, {"simple": simple})]
        return [(EventKind.GROUP_TYPE_CHANGED, None, {"old_type": old_type, "new_type": family})]

    def _replay_classic(self, value: dict | None) -> list[tuple]:
        """``GroupMetadata``: a value (re)loads the whole classic group, a tombstone removes any group."""
        old = self.group
        if value is None:
            if old is None:
                return []
            self.last_group_type = old.group_type
            self.group = None
            self.deleted = True
            return [(EventKind.GROUP_DELETED, None, {})]
        events: list[tuple] = []
        if old is None:
            events.extend(self._create("classic"))
        elif old.group_type != "classic":
            events.extend(self._create("classic"))
        group = self.group
        old_generation = group.generation if old is group else None
        previous = {m["member_id"]: m for m in group.members} if old is group else {}
        old_members = set(previous)
        group.load(value)
        if old_generation != group.generation:
            events.append((EventKind.CLASSIC_GENERATION_CHANGED, None, {
                "old_generation": old_generation, "generation": group.generation,
                "protocol_type": group.protocol_type, "protocol": group.protocol, "leader": group.leader,
                "members": [m["member_id"] for m in group.members],
                "member_changes": _classic_member_changes(previous, group.members)}))
        new_members = {m["member_id"]: m for m in group.members}
        for member_id in sorted(set(new_members) - old_members):
            m = new_members[member_id]
            events.append((EventKind.MEMBER_JOINED, member_id, {"instance_id": m["instance_id"], "client_id": m["client_id"],
                                                        "client_host": m["client_host"]}))
        for member_id in sorted(old_members - set(new_members)):
            events.append((EventKind.MEMBER_LEFT, member_id, {}))
        return events

    def _member_record_seen(self, batch: int | None, resolved: dict[str, dict]) -> None:
        """A consumer member record was replayed: ``ConsumerGroup.updateMember`` / ``removeMember`` recompute the
        group's stored subscription type, counting the regular expressions resolved at that moment (a resolution
        record alone does not recompute it). Kept: the resolutions this record saw, and those the last member
        record of an earlier append saw (what a heartbeat of this append found stored)."""
        seen = getattr(self, "_type_counted", None)  # (absent from an older fold's state)
        if seen is None or seen[0] != batch:
            self._type_counted = (batch, resolved, None if seen is None else seen[1])
        else:
            self._type_counted = (batch, resolved, seen[2])

    def _counted_regular_expressions(self, batch: int | None) -> dict | None:
        """The resolutions the subscription type of this append's target counted, when they are not the group's
        current ones; None otherwise.

        A heartbeat that bumps the group epoch recomputes the type (``GroupMetadataManager.consumerGroupHeartbeat``
        through ``updateSubscriptionMetadata``); one that only computes a target the epoch already called for
        (a session timeout or a left member bumped it in an earlier append, the assignment interval deferred
        it) hands ``TargetAssignmentBuilder`` the type ``ConsumerGroup`` stored when the last member record
        before it was replayed. A regular expression whose last member left is tombstoned after that member's
        records, so the stored type still counts the topics it resolved to."""
        moved_batch, _ = getattr(self, "_epoch_moved", None) or (None, None)
        seen = getattr(self, "_type_counted", None)
        if batch is None or seen is None or moved_batch == batch:
            return None
        counted = seen[2] if seen[0] == batch else seen[1]
        current = getattr(self.group, "resolved_regular_expressions", None) or {}
        if counted is None or counted is current:
            return None
        topics = {regex: entry.get("topics") for regex, entry in counted.items()}
        if topics == {regex: entry.get("topics") for regex, entry in current.items()}:
            return None
        return counted

    def _target_assignment_computed(self, record: dict) -> list[tuple]:
        """A target-assignment metadata record completes the target assignment whose member records came
        before it (``members_changed``); a metadata tombstone (epoch -1) completes none."""
        group = self.group
        if group is None or group.assignment_epoch == -1:
            return []
        changed = sorted(self._targets_changed)
        self._targets_changed = set()
        row = self._target_row(record, changed)
        self._target_rows.append(row)
        self._previous_target = row["target"]
        return [(EventKind.TARGET_ASSIGNMENT_COMPUTED, None, {
            "assignment_epoch": group.assignment_epoch,
            "assignment_timestamp": group.assignment_timestamp,
            "group_epoch": group.group_epoch,
            "members_changed": changed,
        })]

    def _target_row(self, record: dict, changed: list[str]) -> dict:
        group = self.group
        members = []
        joined = getattr(self, "_joined_batch", None) or {}
        joined_at = getattr(self, "_joined_offset", None) or {}
        moved_batch, moved_at = getattr(self, "_epoch_moved", None) or (None, None)
        batch = record.get("batch_base_offset")
        for m in group.members.values():
            # A field the member's kind does not have is None (a share member has no regex, no process).
            members.append({
                "member_id": m.member_id,
                "member_epoch": m.member_epoch,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "subscribed_topic_names": getattr(m, "subscribed_topic_names", None),
                "subscribed_topic_regex": getattr(m, "subscribed_topic_regex", None),
                "server_assignor": getattr(m, "server_assignor", None),
                "classic_protocol": m.uses_classic_protocol,
                "process_id": getattr(m, "process_id", None),
                "topology_epoch": getattr(m, "topology_epoch", None),
                "client_tags": getattr(m, "client_tags", None),
                # joined in the append that wrote this target (its heartbeat computed it; None: not known)
                "joined_in_batch": None if batch is None else joined.get(m.member_id) == batch,
            })
            if members[-1]["joined_in_batch"]:
                # the group epoch moved after the member joined, in the same append: its heartbeat bumped it
                # (the member's records come before the group's epoch record)
                members[-1]["bumped_after_joining"] = (moved_batch == batch and moved_at is not None
                                                       and (joined_at.get(m.member_id) or 0) < moved_at)
        # The row as ``jsonable`` makes it, column by column; the targets (most of a row, and all of it again in
        # the next row's previous_target) are shared between rows rather than copied.
        return {
            "group_id": self.group_id,
            "group_type": group.group_type,
            "assignment_epoch": group.assignment_epoch,
            "assignment_timestamp": group.assignment_timestamp,
            "partition": record.get("partition"),
            "offset": record.get("offset"),
            "timestamp": record.get("timestamp"),
            "group_epoch": group.group_epoch,
            "metadata_hash": group.metadata_hash,
            "members_changed": changed,
            "members": jsonable(members),
            "target": self._target_as_json(group.target_assignment),
            "previous_target": self._previous_target,
            "topology": jsonable(getattr(group, "topology", None)),
            "resolved_regular_expressions": jsonable(getattr(group, "resolved_regular_expressions", None)),
            "partition_metadata": jsonable(group.topic_metadata),
            "assignment_configs": jsonable(getattr(group, "last_assignment_configs", None)),
            "initialized_topics": jsonable(
                (getattr(group, "state_partition_metadata", None) or {}).get("initializedTopics")),
            "counted_regular_expressions": jsonable(self._counted_regular_expressions(batch)),
        }

    def _target_as_json(self, target_assignment: dict[str, Any]) -> dict[str, Any]:
        """``jsonable(target_assignment)`` with each member's target converted once.

        A member's target is a new object per target-assignment member record and never changed in place
        (``ModernGroup._target_member``), so its JSON form is kept until the member's next record replaces
        it: a target assignment then costs its changed members, not the whole group's partitions again.
        The deep copy this replaces guarded against changes nothing makes."""
        cache = self._target_json
        fresh: dict[str, tuple[Any, Any]] = {}
        out: dict[str, Any] = {}
        for member_id, target in target_assignment.items():
            hit = cache.get(member_id)
            if hit is None or hit[0] is not target:
                hit = (target, jsonable(target))
            fresh[member_id] = hit
            out[member_id if type(member_id) is str else str(member_id)] = hit[1]
        self._target_json = fresh
        return out

    def _event(self, record: dict, kind: EventKind, member_id: str | None, details: dict) -> dict:
        # jsonable builds a new dict, so the handler's details are never changed (nor copied twice).
        details = jsonable(details)
        if member_id is not None:
            details.setdefault("member_id", member_id)
        return event_row(record, self.group_id, self.group_type, kind, member_id, details)

    # -- outputs --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        if self.group is None:
            return {"group_id": self.group_id, "group_type": self.last_group_type, "state": GroupState.DEAD,
                    "exists": False, "members": []}
        out = self.group.to_dict()
        out["exists"] = True
        return out

    def state_row(self) -> dict:
        """One row of the ``group_state`` output (see docs/replay.md)."""
        g = self.group
        return {
            "group_id": self.group_id,
            "group_type": self.group_type,
            "exists": g is not None,
            "state": g.state if g is not None else GroupState.DEAD,
            "group_epoch": getattr(g, "group_epoch", None),
            "assignment_epoch": getattr(g, "assignment_epoch", None),
            "assignment_timestamp": getattr(g, "assignment_timestamp", None),
            "metadata_hash": getattr(g, "metadata_hash", None),
            "topology_epoch": (g.topology or {}).get("epoch") if isinstance(g, StreamsGroup) else None,
            "generation": getattr(g, "generation", None) if isinstance(g, ClassicGroup) else None,
            "protocol_type": getattr(g, "protocol_type", None) if isinstance(g, ClassicGroup) else None,
            "protocol": getattr(g, "protocol", None) if isinstance(g, ClassicGroup) else None,
            "leader": getattr(g, "leader", None) if isinstance(g, ClassicGroup) else None,
            "num_members": len(g.members) if g is not None else 0,
            "partition": self.partition,
            "last_offset": self.last_offset,
            "last_timestamp": self.last_timestamp,
            "state_json": json.dumps(self.to_dict(), sort_keys=True),
        }

    def member_rows(self) -> list[dict]:
        """One row per current member (``members`` output; see docs/replay.md)."""
        g = self.group
        if g is None:
            return []
        rows = []
        members = g.members if isinstance(g, ClassicGroup) else list(g.to_dict()["members"])
        for m in members:
            m = jsonable(m)
            rows.append({
                "group_id": self.group_id,
                "group_type": g.group_type,
                "member_id": m.get("member_id"),
                "member_epoch": m.get("member_epoch"),
                "previous_member_epoch": m.get("previous_member_epoch"),
                "member_state": m.get("state"),
                "instance_id": m.get("instance_id"),
                "rack_id": m.get("rack_id"),
                "client_id": m.get("client_id"),
                "client_host": m.get("client_host"),
                "classic_protocol": bool(m.get("classic_protocol")),
                "process_id": m.get("process_id"),
                "topology_epoch": m.get("topology_epoch"),
                "member_json": json.dumps(m, sort_keys=True),
            })
        return rows

    def target_assignment_rows(self) -> list[dict]:
        """Every target assignment computed so far (rows as described in docs/replay.md)."""
        return list(self._target_rows)

    def pop_target_assignment_rows(self) -> list[dict]:
        """Like ``target_assignment_rows`` but hands them over and forgets them (chunked/streaming use)."""
        rows, self._target_rows = self._target_rows, []
        return rows
