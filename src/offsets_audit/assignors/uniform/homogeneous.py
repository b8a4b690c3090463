"""``UniformHomogeneousAssignmentBuilder``: every member subscribes to the same topics.

Every member gets ``total // members`` partitions and ``total % members`` of them one more. Members keep what they
own up to their quota (stickiness), in member iteration order; the extra slots go to members that already fill
them, or to the last members that must take one. Freed and never-assigned partitions are then handed out in order.

Kafka 3.x's builder (``before_4_0``) gives the extra slots to the first members in iteration order whether or not
they own anything, so a member that joins empty can take one while an owner gives up a partition it held.
"""

from __future__ import annotations

from offsets_audit.assignors.common import GroupSpec, PartitionAssignorException
from offsets_audit.assignors.uniform.orders import assignment_topic_order, integer_set_order, subscribed_topic_order


def current_iteration_order(assignment: dict) -> list:
    """``[(topic id, partitions)]`` in the order Kafka iterates a current assignment rebuilt from a record:
    a default ``HashMap`` filled in the given topic order, each value ``new HashSet<>(partitions)``."""
    return [(topic_id, integer_set_order(assignment[topic_id])) for topic_id in assignment_topic_order(assignment)]


def assign_homogeneous(group: GroupSpec, current: dict | None = None, additions: dict | None = None, *,
                       before_4_0: bool = False) -> dict:
    """``UniformHomogeneousAssignmentBuilder.build``.

    ``before_4_0``: the builder of Kafka 3.x, whose extra slots go to the first members in iteration order (the
    later builder lets a member that cannot fill its extra slot from what it owns pass it on).

    ``current`` maps a member id to its current assignment as ``[(topic id, partitions)]`` in Java iteration
    order (default: :func:`current_iteration_order` of the input). When ``additions`` is a dict, it receives
    member id -> ``[(topic id, partition)]`` in the order the builder added them (``assignRemainingPartitions``).
    """
    member_ids = group.member_ids
    first = group.members[member_ids[0]]
    topic_ids = subscribed_topic_order(first.subscribed_topic_ids)
    if not topic_ids:
        return {}
    subscribed = set(topic_ids)

    unassigned: list = []
    total = 0
    inverted = group.inverted_assignment()
    for topic_id in topic_ids:
        num_partitions = group.num_partitions(topic_id)
        if num_partitions == -1:
            raise PartitionAssignorException(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
        taken = inverted.get(topic_id, ())
        unassigned.extend((topic_id, p) for p in range(num_partitions) if p not in taken)
        total += num_partitions

    member_count = len(member_ids)
    minimum_quota = total // member_count
    remaining_extra = total % member_count

    target: dict = {}
    unfilled: list = []
    for member_index, member_id in enumerate(member_ids):
        old = (current_iteration_order(group.members[member_id].current_assignment) if current is None
               else current[member_id])
        new: dict = {}
        quota = minimum_quota
        has_extra = False
        if remaining_extra > 0:
            quota += 1
            has_extra = True
        for topic_id, ordered in old:
            if topic_id not in subscribed:
                continue
            if len(ordered) <= quota:
                quota -= len(ordered)
                kept = ordered
            else:
                kept = ordered[:quota]
                unassigned.extend((topic_id, p) for p in ordered[quota:])
                quota = 0
            if kept:
                new[topic_id] = set(kept)
        # Mirrors Kafka's Java line by line (vectorised.fast_homogeneous has the array form).
        if not before_4_0 and quota > 0 and has_extra and member_count - member_index > remaining_extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            remaining_extra -= 1
        target[member_id] = new

    position = 0
    for member_id, quota in unfilled:
        assignment = target[member_id]
        taken = unassigned[position:position + quota]
        for topic_id, partition in taken:
            assignment.setdefault(topic_id, set()).add(partition)
        if additions is not None:
            additions[member_id] = taken
        position = min(position + quota, len(unassigned))
    if position < len(unassigned):
        raise PartitionAssignorException("Partitions were left unassigned")
    return target
