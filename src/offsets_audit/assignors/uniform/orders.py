"""Java iteration orders of the uniform assignor's inputs (``HashSet`` of topic ids, ``HashSet<Integer>`` of
partitions, a current assignment ``HashMap<Uuid, Set<Integer>>``), shared by both builders and the vectorised path."""

from __future__ import annotations

from offsets_audit.assignors.common import hashset_copy_capacity, uuid_hashset_order
from offsets_audit.assignors.java_order import final_capacity, spread


def subscribed_topic_order(topic_ids) -> list:
    """Iteration order of ``new HashSet<>(member.subscribedTopicIds())``."""
    ids = list(dict.fromkeys(topic_ids))
    return uuid_hashset_order(ids, hashset_copy_capacity(len(ids)))


def assignment_topic_order(assignment: dict) -> list:
    """Iteration order of a member's current assignment map (``HashMap<Uuid, Set<Integer>>``)."""
    return uuid_hashset_order(assignment)


def integer_set_order(partitions) -> list:
    """Iteration order of ``new HashSet<Integer>(partitions)`` (``Integer.hashCode`` is the value)."""
    values = list(dict.fromkeys(partitions))
    mask = final_capacity(len(values), hashset_copy_capacity(len(values))) - 1
    return sorted(values, key=lambda p: spread(p) & mask) if values else values
