"""Kafka's server-side ``RangeAssignor`` ("range", KIP-848), re-implemented bit-exact.

Members are ordered static-first (by ``instance_id``), then by member id, both with ``String.compareTo``. Each
topic's partitions are cut into contiguous ranges, one per subscriber in that order: every subscriber gets
``partitions // subscribers`` and the first ``partitions % subscribers`` of them one more. A subscriber whose range
would be empty gets no entry for the topic. The current assignment is ignored (range is not sticky).

Homogeneous groups take the topic list from the first member in that order; heterogeneous groups count the
subscribers of each topic. A subscribed topic id missing from the metadata fails the whole assignment with
``PartitionAssignorException`` ("Member is subscribed to a non-existent topic").
"""

from __future__ import annotations

from offsets_audit.assignors.common import (
    HOMOGENEOUS,
    GroupSpec,
    PartitionAssignorException,
    java_string_key,
)

NAME = "range"


def sorted_member_ids(group: GroupSpec) -> list:
    """Static members first, by instance id; then dynamic members by member id (``RangeAssignor.sortMemberIds``)."""
    static = []
    dynamic = []
    for member in group.members.values():
        if member.instance_id is not None:
            static.append((java_string_key(member.instance_id), member.member_id))
        else:
            dynamic.append((java_string_key(member.member_id), member.member_id))
    # List.sort is stable: equal instance ids keep the HashMap iteration order, as in Java.
    static.sort(key=lambda item: item[0])
    dynamic.sort(key=lambda item: item[0])
    return [member_id for _, member_id in static] + [member_id for _, member_id in dynamic]


class _TopicRanges:
    """Per-topic cursor handing out consecutive ranges (``RangeAssignor.TopicMetadata``)."""

    __slots__ = ("num_partitions", "num_members", "min_quota", "extra", "next_start")

    def __init__(self, num_partitions: int, num_members: int):
        self.num_partitions = num_partitions
        self.num_members = num_members
        self.min_quota = -1
        self.extra = -1
        self.next_start = 0

    def next_range(self) -> range:
        if self.min_quota == -1:
            self.min_quota = self.num_partitions // self.num_members
            self.extra = self.num_partitions % self.num_members
        quota = self.min_quota
        if self.extra > 0:
            quota += 1
            self.extra -= 1
        start = self.next_start
        end = min(start + quota, self.num_partitions)
        self.next_start = end
        return range(start, end)


def _num_partitions_or_fail(group: GroupSpec, topic_id: str) -> int:
    num_partitions = group.num_partitions(topic_id)
    if num_partitions == -1:
        raise PartitionAssignorException("Member is subscribed to a non-existent topic")
    return num_partitions


def assign(group: GroupSpec) -> dict:
    """member id -> {topic id -> partitions}; raises ``PartitionAssignorException`` like Kafka."""
    if not group.members:
        return {}
    member_ids = sorted_member_ids(group)
    if group.subscription_type == HOMOGENEOUS:
        num_members = len(member_ids)
        first = group.members[member_ids[0]]
        topics = [(topic_id, _TopicRanges(_num_partitions_or_fail(group, topic_id), num_members))
                  for topic_id in dict.fromkeys(first.subscribed_topic_ids)]
        subscriptions = {member_id: topics for member_id in member_ids}
    else:
        ranges: dict = {}
        for member_id in member_ids:
            for topic_id in dict.fromkeys(group.members[member_id].subscribed_topic_ids):
                cursor = ranges.get(topic_id)
                if cursor is None:
                    cursor = ranges[topic_id] = _TopicRanges(_num_partitions_or_fail(group, topic_id), 0)
                cursor.num_members += 1
        subscriptions = {
            member_id: [(topic_id, ranges[topic_id])
                        for topic_id in dict.fromkeys(group.members[member_id].subscribed_topic_ids)]
            for member_id in member_ids
        }

    assignments: dict = {}
    for member_id in member_ids:
        assignment = {}
        for topic_id, cursor in subscriptions[member_id]:
            partitions = cursor.next_range()
            if partitions:
                assignment[topic_id] = partitions
        assignments[member_id] = assignment
    return assignments
