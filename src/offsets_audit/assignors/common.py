"""The input model every consumer/share assignor reads: Kafka's ``GroupSpec`` and ``SubscribedTopicDescriber``.

A case is the plain dict layout of ``golden/assignors/*.jsonl`` (``input``): ``subscription_type``, ``topics``
(``id``, ``name``, ``partitions``, ``partition_racks``), ``members`` (``member_id``, ``instance_id``, ``rack_id``,
``subscribed_topic_names``, ``subscribed_topic_ids``, ``current_assignment``) and ``assignable_partitions``.
``parse_group_spec`` turns it into a ``GroupSpec`` that answers the same questions Kafka's ``GroupSpecImpl`` and
``SubscribedTopicDescriberImpl`` answer, in the same iteration order:

* ``GroupSpec.member_ids`` iterates like the coordinator's ``HashMap<String, MemberSubscriptionAndAssignmentImpl>``
  filled in ``members`` order (``TargetAssignmentBuilder.build``), reproduced with ``java_order.hashmap_order``;
* ``num_partitions(topic_id)`` is -1 for a topic missing from the metadata;
* ``is_partition_assigned`` looks a partition up in the inverted current assignment.

Kafka signals failures with Java exceptions; the golden data records them by class simple name and message, so
the same names are used here (``JavaException.java_name``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Mapping

from offsets_audit.assignors.java_order import hashmap_order, java_uuid_hash
from offsets_audit.errors import UserError

HOMOGENEOUS = "HOMOGENEOUS"
HETEROGENEOUS = "HETEROGENEOUS"
_SUBSCRIPTION_TYPES = (HOMOGENEOUS, HETEROGENEOUS)


class JavaException(Exception):
    """An exception Kafka's assignor throws; ``java_name`` is the Java class simple name the golden data records."""

    java_name = "RuntimeException"

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class PartitionAssignorException(JavaException):
    """``org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException``."""

    java_name = "PartitionAssignorException"


class IllegalArgumentException(JavaException):
    java_name = "IllegalArgumentException"


class IllegalStateException(JavaException):
    java_name = "IllegalStateException"


class NoSuchElementException(JavaException):
    java_name = "NoSuchElementException"


class ArrayIndexOutOfBoundsException(JavaException):
    java_name = "ArrayIndexOutOfBoundsException"

    @classmethod
    def for_index(cls, index: int, length: int) -> ArrayIndexOutOfBoundsException:
        """The message the JVM (Java 11+) gives an out-of-range array access."""
        return cls(f"Index {index} out of bounds for length {length}")


def carried_order(member_id: str, current_assignment: Mapping[str, Any],
                  carried: Mapping[str, Mapping[str, list[int]]] | None) -> dict[str, list[int]] | None:
    """The previous run's assignment of this member in Java iteration order, restricted to the topics of its
    input assignment, if every input topic holds exactly the carried partitions (a chained run's order).

    Topics of the carried assignment that the input no longer lists (a topic deleted since, or a set the
    previous run emptied, which the JSON layout drops) are left out; the member's other topics keep their
    carried order. Comparing whole members instead would throw away the order of every topic of a member that
    held a since-deleted topic, and Kafka's tie-breaks then differ wherever two partitions share a bucket.
    A static member that restarted under a new member id keeps its target assignment; it is found by content
    among the carried assignments (if exactly one matches) when its member id is unknown.
    """
    if not carried:
        return None
    wanted = {topic_id: sorted(set(partitions)) for topic_id, partitions in current_assignment.items()}

    def restricted(previous: Mapping[str, list[int]]) -> dict[str, list[int]] | None:
        if any(topic_id not in previous or sorted(previous[topic_id]) != partitions
               for topic_id, partitions in wanted.items()):
            return None
        return {topic_id: previous[topic_id] for topic_id in previous if topic_id in wanted}

    previous = carried.get(member_id)
    if previous is not None:
        return restricted(previous)
    if not wanted:
        return None
    matches = [a for a in (restricted(p) for p in carried.values()) if a is not None and len(a) == len(wanted)]
    return matches[0] if len(matches) == 1 else None


def error_result(exc: JavaException) -> dict:
    """The golden ``expected`` layout of an assignment that threw."""
    return {"error": exc.java_name, "message": exc.message}


# ---------------------------------------------------------------------------------------------------------------
# Kafka Uuid: 16 bytes shown as 22 characters of URL-safe base64 without padding.

def uuid_longs(topic_id: str) -> tuple[int, int]:
    """``Uuid.fromString`` as the signed (mostSignificantBits, leastSignificantBits) pair."""
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (ValueError, TypeError) as exc:
        raise UserError(f"topic id {topic_id!r} is not a Kafka Uuid (22 characters of URL-safe base64)",
                        fix="use the topic id as Kafka prints it (Uuid.toString())") from exc
    if len(raw) != 16:
        raise UserError(f"topic id {topic_id!r} decodes to {len(raw)} bytes, not the 16 of a Kafka Uuid",
                        fix="use the topic id as Kafka prints it (Uuid.toString())")
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)


_UUID_HASHES: dict = {}


def uuid_hash(topic_id: str) -> int:
    """``Uuid.hashCode()`` of a topic id string (memoised: a cluster's topic ids recur in every re-run)."""
    code = _UUID_HASHES.get(topic_id)
    if code is None:
        msb, lsb = uuid_longs(topic_id)
        code = java_uuid_hash(msb, lsb)
        if len(_UUID_HASHES) < 1_000_000:
            _UUID_HASHES[topic_id] = code
    return code


_UUID_LONGS: dict = {}


def uuid_sort_key(topic_id: str) -> tuple[int, int]:
    """Sort key giving ``Uuid.compareTo`` order (signed most significant long, then signed least significant)."""
    longs = _UUID_LONGS.get(topic_id)
    if longs is None:
        longs = uuid_longs(topic_id)
        if len(_UUID_LONGS) < 1_000_000:
            _UUID_LONGS[topic_id] = longs
    return longs


def java_string_key(s: str) -> bytes:
    """Sort key giving ``String.compareTo`` order (UTF-16 code units, which differs from code points)."""
    return s.encode("utf-16-be")


def uuid_hashset_order(topic_ids, initial_capacity: int = 16) -> list[str]:
    """Iteration order of a ``HashSet<Uuid>``/``HashMap<Uuid, ...>`` filled with ``topic_ids`` in order."""
    ids = list(topic_ids)
    return hashmap_order(ids, [uuid_hash(t) for t in ids], initial_capacity)


def hashset_copy_capacity(size: int) -> int:
    """Initial capacity of ``new HashSet<>(collection)``: ``max((int) (size / .75f) + 1, 16)``."""
    return max(int(size / 0.75) + 1, 16)


# ---------------------------------------------------------------------------------------------------------------
# GroupSpec

@dataclass(slots=True)
class TopicMetadata:
    """One topic of the metadata image, as ``SubscribedTopicDescriber`` exposes it."""

    topic_id: str
    name: str
    num_partitions: int
    partition_racks: list | None = None

    def racks_for_partition(self, partition: int) -> frozenset:
        """``SubscribedTopicDescriber.racksForPartition``: empty when there is no rack information."""
        if self.partition_racks is None or not 0 <= partition < len(self.partition_racks):
            return frozenset()
        racks = self.partition_racks[partition]
        return frozenset(racks) if racks else frozenset()


@dataclass(slots=True)
class MemberSpec:
    """``MemberSubscriptionAndAssignmentImpl``: a member's subscription and current target assignment.

    ``subscribed_topic_ids`` and ``current_assignment`` keep the order of the input; assignors that depend on
    Java's set/map order derive it with ``java_order``. The subscription sequences and partition lists are the
    input's own objects (not copies): read them, never mutate them.
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_names: tuple | list
    subscribed_topic_ids: tuple | list
    current_assignment: dict = field(default_factory=dict)


@dataclass(slots=True)
class GroupSpec:
    """``GroupSpecImpl`` plus ``SubscribedTopicDescriberImpl`` over one parsed case."""

    members: dict                       # member id -> MemberSpec, in Java HashMap iteration order
    subscription_type: str
    topics: dict                        # topic id -> TopicMetadata
    assignable_partitions: dict | None = None
    _inverted: dict | None = None

    @property
    def member_ids(self) -> list:
        return list(self.members)

    def num_partitions(self, topic_id: str) -> int:
        topic = self.topics.get(topic_id)
        return -1 if topic is None else topic.num_partitions

    def racks_for_partition(self, topic_id: str, partition: int) -> frozenset:
        topic = self.topics.get(topic_id)
        return frozenset() if topic is None else topic.racks_for_partition(partition)

    def inverted_assignment(self) -> dict:
        """topic id -> set of partitions held by some member's current assignment."""
        if self._inverted is None:
            inverted: dict = {}
            for member in self.members.values():
                for topic_id, partitions in member.current_assignment.items():
                    inverted.setdefault(topic_id, set()).update(partitions)
            self._inverted = inverted
        return self._inverted

    def is_partition_assigned(self, topic_id: str, partition: int) -> bool:
        partitions = self.inverted_assignment().get(topic_id)
        return partitions is not None and partition in partitions

    def is_partition_assignable(self, topic_id: str, partition: int) -> bool:
        if self.assignable_partitions is None:
            return True
        partitions = self.assignable_partitions.get(topic_id)
        return partitions is not None and partition in partitions


def _field(obj: Mapping, key: str, where: str) -> Any:
    try:
        return obj[key]
    except (KeyError, TypeError) as exc:
        raise UserError(f"assignor input {where} has no {key!r}",
                        fix="use the layout of golden/assignors/*.jsonl 'input' (see golden/README.md section 4)") from exc


def _sequence(value) -> tuple | list:
    """A list or tuple as is (shared, read-only), anything else iterable as a tuple."""
    if isinstance(value, (list, tuple)):
        return value
    return tuple(value or ())


def parse_group_spec(case_input: Mapping) -> GroupSpec:
    """Build a ``GroupSpec`` from the golden ``input`` layout; raises ``UserError`` naming a missing field.

    Well-formed input (every re-run of the job) takes a lean pass with no per-field checks; anything it does not
    expect takes the checked pass, which builds the same spec or names the field that is wrong.
    """
    try:
        spec = _parse_well_formed(case_input)
    except (KeyError, TypeError, ValueError, AttributeError):
        spec = None
    return spec if spec is not None else _parse_checked(case_input)


def _parse_well_formed(case_input: Mapping) -> GroupSpec | None:
    """``parse_group_spec`` for input with every field present; ``None`` (or an exception) sends it to the checked
    pass. A 1,000-member case spends a third of a homogeneous uniform re-run here."""
    subscription_type = case_input["subscription_type"]
    if subscription_type not in _SUBSCRIPTION_TYPES:
        return None
    topics: dict = {}
    for topic in case_input["topics"] or ():
        topic_id = topic["id"]
        topics[topic_id] = TopicMetadata(topic_id, topic.get("name", ""), int(topic["partitions"]),
                                         topic.get("partition_racks"))
    by_id: dict = {}
    for member in case_input["members"] or ():
        ids = member["subscribed_topic_ids"]
        names = member.get("subscribed_topic_names")
        if ids.__class__ is not list or (names.__class__ is not list and names.__class__ is not tuple):
            return None
        member_id = member["member_id"]
        by_id[member_id] = MemberSpec(member_id, member.get("instance_id"), member.get("rack_id"), names, ids,
                                      dict(member.get("current_assignment") or {}))
    return _group_spec(by_id, subscription_type, topics, case_input)


def _group_spec(by_id: dict, subscription_type: str, topics: dict, case_input: Mapping) -> GroupSpec:
    """The parsed group, members in the order Kafka's HashMap iterates them (both parse passes end here)."""
    members = {member_id: by_id[member_id] for member_id in hashmap_order(by_id)}
    assignable = case_input.get("assignable_partitions")
    if assignable is not None:
        assignable = {topic_id: set(partitions) for topic_id, partitions in assignable.items()}
    return GroupSpec(members, subscription_type, topics, assignable)


def _parse_checked(case_input: Mapping) -> GroupSpec:
    subscription_type = _field(case_input, "subscription_type", "")
    if subscription_type not in _SUBSCRIPTION_TYPES:
        raise UserError(f"assignor input has subscription_type {subscription_type!r}",
                        fix=f"use one of {', '.join(_SUBSCRIPTION_TYPES)}")
    topics: dict = {}
    for index, topic in enumerate(_field(case_input, "topics", "") or ()):
        where = f"topics[{index}]"
        topic_id = _field(topic, "id", where)
        topics[topic_id] = TopicMetadata(topic_id, topic.get("name", ""), int(_field(topic, "partitions", where)),
                                         topic.get("partition_racks"))
    by_id: dict = {}
    for index, member in enumerate(_field(case_input, "members", "") or ()):
        where = f"members[{index}]"
        member_id = _field(member, "member_id", where)
        # The input's own lists are kept, not copied (assignors only read them): copying a million subscribed
        # names and ids was most of parsing a 1,000-member, 1,000-topic group.
        names = _sequence(member.get("subscribed_topic_names"))
        ids = member.get("subscribed_topic_ids")
        if ids is None:
            by_name = {t.name: t.topic_id for t in topics.values()}
            ids = [by_name[n] for n in names if n in by_name]
        assignment = dict(member.get("current_assignment") or {})
        by_id[member_id] = MemberSpec(member_id, member.get("instance_id"), member.get("rack_id"),
                                      names, _sequence(ids), assignment)
    return _group_spec(by_id, subscription_type, topics, case_input)


def assignment_result(assignments: Mapping) -> dict:
    """The golden ``expected`` layout: member id -> topic id -> sorted partitions (empty topics dropped)."""
    return {
        "error": None,
        "members": {
            member_id: {topic_id: sorted(partitions) for topic_id, partitions in topics.items() if partitions}
            for member_id, topics in assignments.items()
        },
    }
