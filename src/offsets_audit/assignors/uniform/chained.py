"""Order-exact chaining: each step's output as the Java maps Kafka's uniform builders return, so that the next
step's current assignment iterates as a live coordinator's does (modelled with ``java_hashmap``)."""

from __future__ import annotations

from typing import Mapping

from offsets_audit.assignors.common import (
    HOMOGENEOUS,
    GroupSpec,
    JavaException,
    MemberSpec,
    assignment_result,
    carried_order,
    error_result,
    parse_group_spec,
    uuid_hash,
)
from offsets_audit.assignors.java_hashmap import JavaHashMap, JavaHashSet, integer_hash
from offsets_audit.assignors.uniform.heterogeneous import assign_heterogeneous
from offsets_audit.assignors.uniform.heterogeneous_before_4_0 import assign_heterogeneous_before_4_0
from offsets_audit.assignors.uniform.homogeneous import assign_homogeneous


def assign_chained(case_input: Mapping, carried: Mapping | None = None) -> tuple[dict, dict]:
    """The golden ``expected`` layout of :func:`assign` on ``case_input``, plus each member's new assignment in
    Java iteration order (member id -> {topic id -> partitions}, both orders as Kafka's output maps iterate).

    Pass the second value of the previous step as ``carried`` to feed that step's output back in the way the
    golden generator (and a live coordinator) does: the current assignment map iterates like a default
    ``HashMap`` filled in the carried topic order, each set a ``new HashSet<>`` of the carried partitions. A
    member whose input assignment is not the carried one (topics deleted since are dropped from the carried
    order) or that is not carried at all uses its input order, as :func:`assign` does.
    """
    group = parse_group_spec(case_input)
    if not group.members:
        return {"error": None, "members": {}}, {}
    old_maps = {member_id: _current_map(member, carried) for member_id, member in group.members.items()}
    try:
        if group.subscription_type == HOMOGENEOUS:
            current = {member_id: [(topic_id, partitions.keys()) for topic_id, partitions in old.items()]
                       for member_id, old in old_maps.items()}
            additions: dict = {}
            target = assign_homogeneous(group, current, additions,
                                        before_4_0=bool(case_input.get("before_4_0")))
            final = _homogeneous_output_maps(old_maps, target, additions)
        elif case_input.get("before_4_0"):
            # Kafka 3.x's heterogeneous builder never iterates a current assignment's maps, so the carried order
            # cannot change its result: the record-order run is the answer, with no output order to carry.
            return assignment_result(assign_heterogeneous_before_4_0(group)), {}
        else:
            journal: list = []
            target = assign_heterogeneous(group, journal)
            final = _heterogeneous_output_maps(group, old_maps, journal) if target else {}
    except JavaException as exc:
        return error_result(exc), {}
    java_order = {member_id: {topic_id: partitions.keys() for topic_id, partitions in final[member_id].items()}
                  for member_id in target}
    return assignment_result(target), java_order


def _current_map(member: MemberSpec, carried: Mapping | None) -> JavaHashMap:
    """The member's current assignment as the ``HashMap<Uuid, HashSet<Integer>>`` the assignor iterates."""
    ordered = carried_order(member.member_id, member.current_assignment, carried)
    if ordered is None:
        ordered = member.current_assignment
    current = JavaHashMap(uuid_hash)
    for topic_id, partitions in ordered.items():
        current.put(topic_id, JavaHashSet.copy_of(partitions, integer_hash))
    return current


def _deep_copy(assignment: JavaHashMap) -> JavaHashMap:
    """``AssignorHelpers.deepCopyAssignment``: ``new HashMap<>(size)`` of ``new HashSet<>(partitions)``."""
    copy = JavaHashMap(uuid_hash, len(assignment))
    for topic_id, partitions in assignment.items():
        copy.put(topic_id, JavaHashSet.copy_of(partitions.keys(), integer_hash))
    return copy


def _homogeneous_output_maps(old_maps: dict, target: dict, additions: dict) -> dict:
    """The maps ``UniformHomogeneousAssignmentBuilder`` returns: the input map when a member is untouched,
    else its deep copy minus revoked partitions, plus ``computeIfAbsent(topic, new HashSet<>()).add(p)``."""
    final = {}
    for member_id, new in target.items():
        old = old_maps[member_id]
        added = additions.get(member_id, ())
        removed = [(topic_id, p) for topic_id, partitions in old.items()
                   for p in partitions.keys() if p not in new.get(topic_id, ())]
        if not removed and not added:
            final[member_id] = old
            continue
        copy = _deep_copy(old)
        for topic_id, partition in removed:
            partitions = copy[topic_id]
            partitions.remove(partition)
            if partitions.is_empty():
                copy.remove(topic_id)
        for topic_id, partition in added:
            copy.compute_if_absent(topic_id, lambda: JavaHashSet(integer_hash)).add(partition)
        final[member_id] = copy
    return final


def _heterogeneous_output_maps(group: GroupSpec, old_maps: dict, journal: list) -> dict:
    """The maps ``UniformHeterogeneousAssignmentBuilder`` returns, replaying its map operations in order:
    revocation of unsubscribed topics, then every ``assignPartition`` (copy on first write, remove, and
    ``computeIfAbsent`` with a set sized for ``ceil(partitions / subscribers)``)."""
    member_ids = group.member_ids
    maps: list = []
    copied: list = []
    subscribers: dict = {}
    for member_id in member_ids:
        old = old_maps[member_id]
        subscribed = set(group.members[member_id].subscribed_topic_ids)
        for topic_id in subscribed:
            subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        unsubscribed = [topic_id for topic_id in old.keys() if topic_id not in subscribed]
        if unsubscribed:
            old = _deep_copy(old)
            for topic_id in unsubscribed:
                old.remove(topic_id)
        maps.append(old)
        copied.append(bool(unsubscribed))

    def writable(index: int) -> JavaHashMap:
        if not copied[index]:
            maps[index] = _deep_copy(maps[index])
            copied[index] = True
        return maps[index]

    for topic_id, partition, from_index, to_index in journal:
        if from_index != -1:
            assignment = writable(from_index)
            partitions = assignment.get(topic_id)
            if partitions is not None:
                partitions.remove(partition)
                if partitions.is_empty():
                    assignment.remove(topic_id)
        count = subscribers[topic_id]
        per_subscriber = (group.num_partitions(topic_id) + count - 1) // count
        capacity = int(per_subscriber / 0.75 + 1)
        writable(to_index).compute_if_absent(topic_id, lambda: JavaHashSet(integer_hash, capacity)).add(partition)
    return dict(zip(member_ids, maps))
