"""Share group ``SimpleAssignor`` (KIP-932), ported to be order-exact with Kafka's Java code.

Kafka's share-group assignor lets several members share one partition. It keeps as much of the
current target assignment as it can, then:

1. drops partitions of topics nobody subscribes to any more;
2. takes partitions away from members holding more than their desired count;
3. takes members away from partitions shared more than the desired sharing;
4. walks every partition once and hands under-shared partitions to the unfilled members, cycling
   through them.

``desired_sharing = ceil(members / partitions)`` and the desired count of member ``i`` is
``ceil(x * (i + 1)) - ceil(x * i)`` with ``x = desired_sharing * partitions / members`` (doubles).

A *homogeneous* group (everyone subscribes to the same topics, ``SimpleHomogeneousAssignmentBuilder``)
does this once over all partitions of all subscribed topics; a *heterogeneous* one
(``SimpleHeterogeneousAssignmentBuilder``) does it per topic among the members subscribed to it.

Which member wins a tie depends on ``HashMap``/``HashSet`` iteration order, so the port keeps Kafka's
maps as :class:`~offsets_audit.assignors.java_hashmap.JavaHashMap` with the same constructor
capacities and operations. Like Kafka, step 4 can run out of members and raise
``NoSuchElementException`` (iterator over an empty set) on some inputs with restricted assignable
partitions; :func:`assign` reports that as the golden error layout.

Kafka 4.0's early-access ``SimpleAssignor`` was another algorithm: every member gets every partition of each
topic it subscribes to (no sharing limit, no stickiness). A case input rebuilt from a 4.0 broker's log says so
(``early_access_4_0``) and is answered that way (:func:`assign_early_access`).
"""

from __future__ import annotations

import gc
import math
from typing import Any, Callable, Mapping

from offsets_audit.assignors.common import carried_order
from offsets_audit.assignors.java_hashmap import (
    JavaHashMap,
    JavaHashSet,
    capacity_for_mappings,
    integer_hash,
)
from offsets_audit.assignors.java_order import hashmap_order, java_uuid_hash
from offsets_audit.assignors.metadata_hash import uuid_bits

# This assignor's own optional compiled kernel (one compiled module per assignor).
try:  # the compiled kernel (setup.py); absent without a C compiler or when imported from a --py-files zip
    from offsets_audit.assignors import _simple_kernel as _KERNEL  # type: ignore[attr-defined]  # built by setup.py
except ImportError:  # pragma: no cover - depends on the install
    _KERNEL = None

HOMOGENEOUS = "HOMOGENEOUS"


class JavaException(Exception):
    """An exception Kafka's Java code would throw; ``java_class`` is its simple class name."""

    java_class = "RuntimeException"

    def __init__(self, message: str | None = None):
        super().__init__(message)
        self.java_message = "null" if message is None else message


class NoSuchElementException(JavaException):
    java_class = "NoSuchElementException"


class PartitionAssignorException(JavaException):
    java_class = "PartitionAssignorException"


_UUID_HASH_CACHE: dict[str, int] = {}


def uuid_hash(topic_id: str) -> int:
    """``Uuid.hashCode()`` of a topic id string."""
    h = _UUID_HASH_CACHE.get(topic_id)
    if h is None:
        h = _UUID_HASH_CACHE[topic_id] = java_uuid_hash(*uuid_bits(topic_id))
    return h


def topic_id_partition_hash(key: tuple[str, int]) -> int:
    """Hash of ``org.apache.kafka.server.common.TopicIdPartition`` (a record): ``31 * topicId.hashCode() + p``."""
    return 31 * uuid_hash(key[0]) + key[1]


class _CyclingIterator:
    """A Java ``HashSet`` iterator over a snapshot of the set, with ``remove()`` of the current element."""

    __slots__ = ("_members", "_keys", "_pos", "_current")

    def __init__(self, members: JavaHashSet):
        self._members = members
        self._keys = members.keys()
        self._pos = 0
        self._current = None

    def has_next(self) -> bool:
        return self._pos < len(self._keys)

    def next(self) -> Any:
        if self._pos >= len(self._keys):
            raise NoSuchElementException()
        self._current = self._keys[self._pos]
        self._pos += 1
        return self._current

    def remove(self) -> None:
        self._members.remove(self._current)


def _deep_copy_assignment(assignment: JavaHashMap) -> JavaHashMap:
    """``AssignorHelpers.deepCopyAssignment``: ``new HashMap<>(size)`` of ``new HashSet<>(partitions)``."""
    copy = JavaHashMap(uuid_hash, len(assignment))
    for topic_id, partitions in assignment.items():
        copy.put(topic_id, JavaHashSet.copy_of(partitions.keys(), integer_hash))
    return copy


def _desired_counts(desired_sharing: int, num_partitions: int, num_members: int) -> list[int]:
    precise = desired_sharing * num_partitions / float(num_members)
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(num_members)]


def _as_plain(assignment: JavaHashMap) -> dict[str, list[int]]:
    return {topic_id: sorted(partitions.keys()) for topic_id, partitions in assignment.items()}


def _in_java_order(assignment: JavaHashMap) -> dict[str, list[int]]:
    return {topic_id: partitions.keys() for topic_id, partitions in assignment.items()}


class _GroupSpec:
    """The parts of Kafka's ``GroupSpecImpl`` + ``SubscribedTopicDescriber`` the assignor reads."""

    def __init__(self, case_input: Mapping[str, Any], carried: Mapping[str, Mapping[str, list[int]]] | None = None):
        members = {m["member_id"]: m for m in case_input["members"]}
        self.member_ids: list[str] = hashmap_order([m["member_id"] for m in case_input["members"]])
        # MemberSubscription.subscribedTopicIds() iterates like a HashSet<Uuid> filled in input order, or, for an
        # input rebuilt from the log (``subscribed_topic_order: topic_ids``), as listed: the coordinator's TopicIds
        # view over the member's topic names, which the assignor iterates as it is.
        as_listed = case_input.get("subscribed_topic_order") == "topic_ids"
        self.subscriptions: dict[str, list[str]] = {
            member_id: list(dict.fromkeys(members[member_id]["subscribed_topic_ids"])) if as_listed else
            hashmap_order(members[member_id]["subscribed_topic_ids"],
                          [uuid_hash(t) for t in members[member_id]["subscribed_topic_ids"]])
            for member_id in self.member_ids
        }
        self.assignments: dict[str, JavaHashMap] = {}
        for member_id in self.member_ids:
            member = members[member_id]
            ordered = carried_order(member["member_id"], member["current_assignment"], carried) or member["current_assignment"]
            current = JavaHashMap(uuid_hash)
            for topic_id, partitions in ordered.items():
                current.put(topic_id, JavaHashSet.copy_of(partitions, integer_hash))
            self.assignments[member_id] = current
        self.num_partitions: dict[str, int] = {t["id"]: t["partitions"] for t in case_input["topics"]}
        allowed = case_input.get("assignable_partitions")
        self.assignable: dict[str, set[int]] | None = (
            None if allowed is None else {topic_id: set(ps) for topic_id, ps in allowed.items()}
        )
        self.subscription_type: str = case_input["subscription_type"]

    def partition_count(self, topic_id: str) -> int:
        return self.num_partitions.get(topic_id, -1)

    def is_partition_assignable(self, topic_id: str, partition: int) -> bool:
        if self.assignable is None:
            return True
        return partition in self.assignable.get(topic_id, ())

    def target_partitions(self, topic_id: str) -> list[int]:
        count = self.partition_count(topic_id)
        if count == -1:
            raise PartitionAssignorException(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
        return [p for p in range(count) if self.is_partition_assignable(topic_id, p)]


class _AssignmentState:
    """Old (input) and new (copied-on-write) member assignments, indexed by member position."""

    def __init__(self, spec: _GroupSpec):
        self.member_ids = spec.member_ids
        n = len(spec.member_ids)
        self.old = JavaHashMap(integer_hash, capacity_for_mappings(n))
        self.new = JavaHashMap(integer_hash, capacity_for_mappings(n))
        for index, member_id in enumerate(spec.member_ids):
            self.old.put(index, spec.assignments[member_id])

    def writable(self, member_index: int) -> JavaHashMap:
        assignment = self.new.get(member_index)
        if assignment is None:
            assignment = _deep_copy_assignment(self.old.get(member_index))
            self.new.put(member_index, assignment)
        return assignment

    def final(self) -> dict[str, JavaHashMap]:
        """Each member's resulting assignment object (new if changed, else the input one), like
        ``GroupAssignment.members()``."""
        final = {}
        for index, member_id in enumerate(self.member_ids):
            assignment = self.new.get(index)
            final[member_id] = self.old.get(index) if assignment is None else assignment
        return final


def _assign_remaining(partitions: JavaHashMap, unfilled: JavaHashSet, desired_sharing: int,
                      desired_counts: Callable[[int], int], assign_to: Callable[[int, Any], int]) -> None:
    """Step 4 of both builders: one pass over partitions, cycling through the unfilled members.

    ``assign_to(member, partition)`` records the assignment and returns the member's new count. The
    member sets of ``partitions`` are deliberately not updated (as in Kafka), and the iterator is
    re-created on wrap-around -- which raises ``NoSuchElementException`` if the set has emptied.
    """
    if unfilled.is_empty():
        return
    iterator = _CyclingIterator(unfilled)
    assigned_this_round = False
    for partition, members_assigned in partitions.items():
        if len(members_assigned) < desired_sharing:
            to_make = desired_sharing - len(members_assigned)
            while to_make > 0:
                if not iterator.has_next():
                    if not assigned_this_round:
                        break
                    iterator = _CyclingIterator(unfilled)
                    assigned_this_round = False
                member_index = iterator.next()
                if member_index not in members_assigned:
                    count = assign_to(member_index, partition)
                    to_make -= 1
                    assigned_this_round = True
                    if count >= desired_counts(member_index):
                        iterator.remove()
        if unfilled.is_empty():
            break


def _build_homogeneous(spec: _GroupSpec) -> dict[str, JavaHashMap]:
    """``SimpleHomogeneousAssignmentBuilder.build``."""
    subscribed = spec.subscriptions[spec.member_ids[0]]
    subscribed_set = set(subscribed)
    n = len(spec.member_ids)
    targets = [(topic_id, p) for topic_id in subscribed for p in spec.target_partitions(topic_id)]
    num_targets = len(targets)
    desired_sharing = 0 if num_targets == 0 else (n + num_targets - 1) // num_targets
    desired = _desired_counts(desired_sharing, num_targets, n)
    state = _AssignmentState(spec)
    by_partition = JavaHashMap(topic_id_partition_hash, capacity_for_mappings(num_targets))
    by_member = JavaHashMap(integer_hash, capacity_for_mappings(n))
    unfilled = JavaHashSet(integer_hash, capacity_for_mappings(n))
    overfilled = JavaHashSet(integer_hash, capacity_for_mappings(n))
    if not subscribed:
        return {}

    # 1. Keep subscribed partitions, drop whole topics nobody subscribes to.
    for member_index, old_assignment in state.old.items():
        new_assignment = None
        assigned = 0
        for topic_id, partitions in old_assignment.items():
            if topic_id in subscribed_set:
                for p in partitions.keys():
                    key = (topic_id, p)
                    assigned += 1
                    by_partition.compute_if_absent(key, lambda: JavaHashSet(integer_hash)).add(member_index)
                    by_member.compute_if_absent(member_index, lambda: JavaHashSet(topic_id_partition_hash)).add(key)
                    if assigned >= desired[member_index] and new_assignment is None:
                        new_assignment = _deep_copy_assignment(old_assignment)
            else:
                if new_assignment is None:
                    new_assignment = _deep_copy_assignment(old_assignment)
                new_assignment.remove(topic_id)
        if new_assignment is not None:
            state.new.put(member_index, new_assignment)
        if assigned < desired[member_index]:
            unfilled.add(member_index)
        elif assigned > desired[member_index]:
            overfilled.add(member_index)

    # 2. Members holding too many partitions give the first ones (in set order) back.
    for member_index in overfilled.keys():
        member_partitions = by_member.get(member_index)
        if len(member_partitions) > desired[member_index]:
            for key in member_partitions.keys():
                state.new.get(member_index).get(key[0]).remove(key[1])
                by_partition.get(key).remove(member_index)
                member_partitions.remove(key)
                if len(member_partitions) == desired[member_index]:
                    break

    # 3. Partitions shared by too many members lose members (in set order).
    for key, assigned_members in by_partition.items():
        count = len(assigned_members)
        if count > desired_sharing:
            for member_index in assigned_members.keys():
                partitions = state.writable(member_index).get(key[0])
                if partitions is not None and partitions.remove(key[1]):
                    count -= 1
                    assigned_members.remove(member_index)
                    by_member.get(member_index).remove(key)
                    unfilled.add(member_index)
                if count <= desired_sharing:
                    break

    for key in targets:
        by_partition.compute_if_absent(key, lambda: JavaHashSet(integer_hash))

    # 4. Hand under-shared partitions to unfilled members.
    def assign_to(member_index: int, key: tuple[str, int]) -> int:
        state.writable(member_index).compute_if_absent(key[0], lambda: JavaHashSet(integer_hash)).add(key[1])
        member_partitions = by_member.compute_if_absent(member_index, lambda: JavaHashSet(topic_id_partition_hash))
        member_partitions.add(key)
        return len(member_partitions)

    _assign_remaining(by_partition, unfilled, desired_sharing, desired.__getitem__, assign_to)
    return state.final()


def _build_heterogeneous(spec: _GroupSpec) -> dict[str, JavaHashMap]:
    """``SimpleHeterogeneousAssignmentBuilder.build``: the same four steps, per subscribed topic."""
    subscribed = JavaHashSet(uuid_hash)
    for member_id in spec.member_ids:
        for topic_id in spec.subscriptions[member_id]:
            subscribed.add(topic_id)
    n = len(spec.member_ids)
    member_index_of = {member_id: i for i, member_id in enumerate(spec.member_ids)}
    targets_by_topic = {topic_id: spec.target_partitions(topic_id) for topic_id in subscribed.keys()}
    members_by_topic: dict[str, list[int]] = {}
    for member_id in spec.member_ids:
        for topic_id in spec.subscriptions[member_id]:
            members_by_topic.setdefault(topic_id, []).append(member_index_of[member_id])
    state = _AssignmentState(spec)
    if subscribed.is_empty():
        return {}
    for topic_id in subscribed.keys():
        _build_topic(state, n, topic_id, targets_by_topic[topic_id], members_by_topic[topic_id])
    return state.final()


def _build_topic(state: _AssignmentState, num_members: int, topic_id: str, targets: list[int],
                 subscribed_members: list[int]) -> None:
    """``SimpleHeterogeneousAssignmentBuilder.TopicAssignmentPartialBuilder.build`` for one topic."""
    by_partition = JavaHashMap(integer_hash, capacity_for_mappings(len(targets)))
    by_member = JavaHashMap(integer_hash, capacity_for_mappings(len(subscribed_members)))
    num_targets = len(targets)
    desired_sharing = 0 if num_targets == 0 else (len(subscribed_members) + num_targets - 1) // num_targets
    desired = [0] * num_members
    for position, count in enumerate(_desired_counts(desired_sharing, num_targets, len(subscribed_members))):
        desired[subscribed_members[position]] = count

    # 1. Collect the current holders of this topic's partitions (the topic is subscribed by construction).
    for member_index, old_assignment in state.old.items():
        if old_assignment.is_empty():
            continue
        partitions = old_assignment.get(topic_id)
        if partitions is not None:
            for p in partitions.keys():
                by_partition.compute_if_absent(p, lambda: JavaHashSet(integer_hash)).add(member_index)
                by_member.compute_if_absent(member_index, lambda: JavaHashSet(integer_hash)).add(p)

    # 2. Overfilled members (including ones no longer subscribed, desired 0) give partitions back.
    for member_index, assigned in by_member.items():
        if len(assigned) > desired[member_index]:
            for p in assigned.keys():
                if len(assigned) <= desired[member_index]:
                    break
                by_partition.get(p).remove(member_index)
                assigned.remove(p)
                state.writable(member_index).get(topic_id).remove(p)

    # 3. Over-shared partitions lose members.
    for p, assigned_members in by_partition.items():
        count = len(assigned_members)
        if count > desired_sharing:
            for member_index in assigned_members.keys():
                partitions = state.writable(member_index).get(topic_id)
                if partitions is not None and partitions.remove(p):
                    count -= 1
                    assigned_members.remove(member_index)
                    by_member.get(member_index).remove(p)
                if count <= desired_sharing:
                    break

    new_set_capacity = capacity_for_mappings(len(subscribed_members))
    for p in targets:
        by_partition.compute_if_absent(p, lambda: JavaHashSet(integer_hash, new_set_capacity))

    # 4. Unfilled subscribed members take under-shared partitions.
    unfilled = JavaHashSet(integer_hash, capacity_for_mappings(num_members))
    for member_index in subscribed_members:
        assigned = by_member.get(member_index)
        if (0 if assigned is None else len(assigned)) < desired[member_index]:
            unfilled.add(member_index)

    def assign_to(member_index: int, p: int) -> int:
        state.writable(member_index).compute_if_absent(topic_id, lambda: JavaHashSet(integer_hash)).add(p)
        assigned = by_member.compute_if_absent(member_index, lambda: JavaHashSet(integer_hash))
        assigned.add(p)
        return len(assigned)

    _assign_remaining(by_partition, unfilled, desired_sharing, desired.__getitem__, assign_to)


def assign_chained(case_input: Mapping[str, Any], carried: Mapping[str, Mapping[str, list[int]]] | None = None
                   ) -> tuple[dict[str, Any], dict[str, dict[str, list[int]]]]:
    """:func:`assign`, also returning each member's assignment in Java iteration order.

    Kafka's tie-breaks follow the iteration order of the current assignment's ``HashSet``s, which
    depends on how those sets were filled -- history that a sorted JSON list does not carry. The
    golden scenarios feed each step's Java output into the next step (a fresh ``HashMap`` of
    ``new HashSet<>(previousSet)``). Passing the second value returned for the previous step as
    ``carried`` reproduces that exactly; members whose input assignment differs from the carried one
    (or without ``carried``) use their input lists, taken as insertion order.
    """
    if case_input.get("early_access_4_0"):
        result = assign_early_access(case_input)
        return result, dict(result.get("members") or {})
    if _KERNEL is not None:
        compiled = _assign_compiled(case_input, carried, with_order=True)
        if compiled is not None:
            return compiled
    return _assign_reference(case_input, carried)


def assign(case_input: Mapping[str, Any]) -> dict[str, Any]:
    """Run the share-group ``SimpleAssignor`` on a golden-layout input (``tests/golden/README.md``).

    Returns ``{"error": None, "members": {member_id: {topic_id: [sorted partitions]}}}`` or, where
    Kafka throws, ``{"error": "<JavaExceptionSimpleName>", "message": "..."}``.
    """
    if case_input.get("early_access_4_0"):
        return assign_early_access(case_input)
    if _KERNEL is not None:
        compiled = _assign_compiled(case_input, None, with_order=False)
        if compiled is not None:
            return compiled[0]
    return _assign_reference(case_input)[0]


run = assign


def assign_early_access(case_input: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka 4.0's ``SimpleAssignor``: each member gets all partitions of every topic it subscribes to (in a
    homogeneous group, the first member's topics for everyone); a subscribed topic missing from the topic
    metadata is a ``PartitionAssignorException``. Members left out of Kafka's answer get an empty assignment,
    as the coordinator's target assignment builder gives them."""
    spec = _GroupSpec(case_input)
    members: dict[str, dict[str, list[int]]] = {member_id: {} for member_id in spec.member_ids}
    if not spec.member_ids:
        return {"error": None, "members": {}}
    try:
        if spec.subscription_type == HOMOGENEOUS:
            topics = spec.subscriptions[spec.member_ids[0]]
            shared = {t: list(range(_early_access_count(spec, t))) for t in topics}
            members = {member_id: dict(shared) for member_id in spec.member_ids}
        else:
            for member_id in spec.member_ids:
                members[member_id] = {t: list(range(_early_access_count(spec, t)))
                                      for t in spec.subscriptions[member_id]}
    except JavaException as exc:
        return {"error": exc.java_class, "message": exc.java_message}
    return {"error": None, "members": members}


def _early_access_count(spec: _GroupSpec, topic_id: str) -> int:
    count = spec.partition_count(topic_id)
    if count == -1:
        raise PartitionAssignorException(
            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
    return count


def _assign_compiled(case_input: Mapping[str, Any], carried: Mapping[str, Mapping[str, list[int]]] | None,
                     with_order: bool) -> tuple[dict[str, Any], dict[str, dict[str, list[int]]]] | None:
    """The same builders in ``_simple_kernel.c``; ``None`` when the input needs the reference path (a topic id
    that is not a Uuid, a field missing), which then raises or answers exactly as before."""
    as_listed = case_input.get("subscribed_topic_order") == "topic_ids"
    try:
        by_id = {member["member_id"]: member for member in case_input["members"]}
        members = [by_id[member_id] for member_id in _KERNEL.string_hashmap_order(list(by_id))]
        if not members:
            return {"error": None, "members": {}}, {}
        if carried:
            assignments = [carried_order(m["member_id"], m["current_assignment"], carried) or m["current_assignment"] for m in members]
        else:
            assignments = [m["current_assignment"] for m in members]
        topics = case_input["topics"]
        # The cyclic GC is paused while the kernel builds the result (hundreds of thousands of lists and
        # dicts, no cycles): otherwise full collections walk the whole input several times over.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            status, value, java_order = _KERNEL.assign(
                members, assignments, topics if isinstance(topics, list) else list(topics),
                case_input.get("assignable_partitions"), case_input["subscription_type"] == HOMOGENEOUS, with_order,
                as_listed)
        finally:
            if paused:
                gc.enable()
    except (ValueError, OverflowError, KeyError, TypeError, AttributeError):  # incl. _KERNEL.Unsupported
        return None
    if status == "ok":
        return {"error": None, "members": value}, java_order if with_order else {}
    exc: Exception
    if status == "PartitionAssignorException":
        exc = PartitionAssignorException(
            f"Members are subscribed to topic {value} which doesn't exist in the topic metadata.")
    else:
        exc = NoSuchElementException()
    return {"error": exc.java_class, "message": exc.java_message}, {}


def _assign_reference(case_input: Mapping[str, Any], carried: Mapping[str, Mapping[str, list[int]]] | None = None
                      ) -> tuple[dict[str, Any], dict[str, dict[str, list[int]]]]:
    """The pure-Python builders over :class:`JavaHashMap` (the reference the kernel is tested against)."""
    spec = _GroupSpec(case_input, carried)
    if not spec.member_ids:
        return {"error": None, "members": {}}, {}
    try:
        if spec.subscription_type == HOMOGENEOUS:
            final = _build_homogeneous(spec)
        else:
            final = _build_heterogeneous(spec)
    except JavaException as exc:
        return {"error": exc.java_class, "message": exc.java_message}, {}
    members = {member_id: _as_plain(a) for member_id, a in final.items()}
    return {"error": None, "members": members}, {member_id: _in_java_order(a) for member_id, a in final.items()}
