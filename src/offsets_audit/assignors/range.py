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

from itertools import chain

import numpy as np

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


def _num_partitions_or_fail(group: GroupSpec, topic_id: str) -> int:
    num_partitions = group.num_partitions(topic_id)
    if num_partitions == -1:
        raise PartitionAssignorException("Member is subscribed to a non-existent topic")
    return num_partitions


def assign(group: GroupSpec) -> dict:
    """member id -> {topic id -> partitions}; raises ``PartitionAssignorException`` like Kafka.

    Vectorised: the k-th subscriber (0-based, in sorted member order) of a topic with ``n`` partitions and ``s``
    subscribers gets ``[k*q + min(k, r), ...)`` of length ``q + (k < r)``, where ``q, r = divmod(n, s)``; that is
    exactly what Kafka's per-topic cursor hands out, so no per-member state is needed.
    """
    if not group.members:
        return {}
    member_ids = sorted_member_ids(group)
    if group.subscription_type == HOMOGENEOUS:
        topic_ids = list(dict.fromkeys(group.members[member_ids[0]].subscribed_topic_ids))
        subscriptions = [topic_ids] * len(member_ids)
    else:
        subscriptions = [list(dict.fromkeys(group.members[m].subscribed_topic_ids)) for m in member_ids]

    if group.subscription_type == HOMOGENEOUS:
        topic_index = {topic_id: i for i, topic_id in enumerate(topic_ids)}
    else:
        topic_index = {topic_id: i for i, topic_id in enumerate(dict.fromkeys(chain.from_iterable(subscriptions)))}
    if not topic_index:
        return {member_id: {} for member_id in member_ids}
    # Kafka checks the topics while counting subscribers, failing on the first missing one.
    num_partitions = np.array([_num_partitions_or_fail(group, t) for t in topic_index], dtype=np.int64)

    counts = np.fromiter((len(topics) for topics in subscriptions), dtype=np.int64, count=len(subscriptions))
    if group.subscription_type == HOMOGENEOUS:
        pair_topic = np.tile(np.arange(len(topic_index), dtype=np.int64), len(member_ids))
    else:
        pair_topic = np.fromiter(map(topic_index.__getitem__, chain.from_iterable(subscriptions)),
                                 dtype=np.int64, count=int(counts.sum()))
    pair_member = np.repeat(np.arange(len(member_ids), dtype=np.int64), counts)

    # Rank of each (member, topic) pair among the topic's subscribers, in member order.
    order = np.argsort(pair_topic, kind="stable")
    subscribers = np.bincount(pair_topic, minlength=len(topic_index))
    group_start = np.concatenate(([0], np.cumsum(subscribers)[:-1]))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order)) - np.repeat(group_start, subscribers)

    n = num_partitions[pair_topic]
    s = subscribers[pair_topic]
    quota, extra = np.divmod(n, s)
    start = rank * quota + np.minimum(rank, extra)
    end = np.minimum(start + quota + (rank < extra), n)

    assignments: dict = {member_id: {} for member_id in member_ids}
    topic_list = list(topic_index)
    keep = np.flatnonzero(start < end)
    for m, t, a, b in zip(pair_member[keep].tolist(), pair_topic[keep].tolist(),
                          start[keep].tolist(), end[keep].tolist()):
        assignments[member_ids[m]][topic_list[t]] = range(a, b)
    return assignments
