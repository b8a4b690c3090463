"""Kafka's server-side ``RangeAssignor`` ("range", KIP-848), re-implemented bit-exact.

Members are ordered static-first (by ``instance_id``), then by member id, both with ``String.compareTo``. Each
topic's partitions are cut into contiguous ranges, one per subscriber in that order: every subscriber gets
``partitions // subscribers`` and the first ``partitions % subscribers`` of them one more. A subscriber whose range
would be empty gets no entry for the topic. The current assignment is ignored (range is not sticky).

Homogeneous groups take the topic list from the first member in that order; heterogeneous groups count the
subscribers of each topic. A subscribed topic id missing from the metadata fails the whole assignment with
``PartitionAssignorException`` ("Member is subscribed to a non-existent topic").

``run`` hands the per (member, topic) work to the compiled ``_range_kernel`` when it is built (``setup.py``);
without it (no C compiler, the ``--py-files`` zip) plain loops (small groups) or numpy (large ones) give the same
result, several times slower on large groups.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from itertools import chain
from typing import Any, Mapping

import numpy as np

from offsets_audit.assignors.common import (
    HOMOGENEOUS,
    GroupSpec,
    PartitionAssignorException,
    assignment_result,
    error_result,
    java_string_key,
    parse_group_spec,
)
from offsets_audit.assignors.java_order import hashmap_order

# This assignor's own optional compiled kernel (one compiled module per assignor).
try:  # the compiled kernel (setup.py); absent without a C compiler or when imported from a --py-files zip
    from offsets_audit.assignors import _range_kernel as _KERNEL  # type: ignore[attr-defined]  # built by setup.py
except ImportError:  # pragma: no cover - depends on the install
    _KERNEL = None

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


def run(case_input: Mapping[str, Any]) -> dict:
    """:func:`assign` on a golden-layout case, returning the golden ``expected`` layout.

    Range ignores the current assignment, so the common path's copy of every member's assignment into a
    ``GroupSpec`` (most of a 1,000-member run) is skipped: the subscriptions are read straight from the input.
    Inputs the direct path does not cover (ids given only as names, a member id listed twice, a topic listed
    twice in one subscription) take the common path, which answers them exactly as before.
    """
    paused = gc.isenabled()  # no cycles are made; a full collection over a large input costs more than the run
    if paused:
        gc.disable()
    try:
        direct = _run_direct(case_input)
    except PartitionAssignorException as exc:
        return error_result(exc)
    finally:
        if paused:
            gc.enable()
    if direct is not None:
        return direct
    try:
        return assignment_result(assign(parse_group_spec(case_input)))
    except PartitionAssignorException as exc:
        return error_result(exc)


NUMPY_FROM_PAIRS = 2000
"""Below this many (member, topic) pairs plain Python loops beat numpy's per-call overhead."""


def _small(member_ids: list, subscriptions: list, partitions_of: dict, result: dict) -> dict | None:
    """The same ranges with a per-topic cursor, for small groups (the golden cases, most real groups)."""
    subscribers: dict = {}
    for subscribed in subscriptions:
        if len(set(subscribed)) != len(subscribed):
            return None  # a topic twice in one subscription (a Set in Kafka): the common path dedups it
        for topic_id in subscribed:
            subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
    if any(partitions_of.get(topic_id, -1) == -1 for topic_id in subscribers):
        raise PartitionAssignorException("Member is subscribed to a non-existent topic")
    rank: dict = dict.fromkeys(subscribers, 0)
    for member_id, subscribed in zip(member_ids, subscriptions):
        assignment = result[member_id]
        for topic_id in subscribed:
            k = rank[topic_id]
            rank[topic_id] = k + 1
            n = partitions_of[topic_id]
            quota, extra = divmod(n, subscribers[topic_id])
            start = k * quota + min(k, extra)
            end = min(start + quota + (k < extra), n)
            if start < end:
                assignment[topic_id] = list(range(start, end))
    return {"error": None, "members": result}


def _sort_keys(texts: list) -> list:
    """``String.compareTo`` order keys: ASCII ids (nearly all) are their own keys; otherwise every id is keyed by
    its UTF-16 code units (keys of one kind only: a str and a bytes key do not compare)."""
    if all(map(str.isascii, texts)):
        return texts
    return [java_string_key(text) for text in texts]


def _run_direct(case_input: Mapping[str, Any]) -> dict | None:
    try:
        members = case_input["members"] or ()
        subscription_type = case_input["subscription_type"]
        topics = case_input["topics"] or ()
        member_ids = [m["member_id"] for m in members]
        subscriptions = [m["subscribed_topic_ids"] for m in members]
        instance_ids = [m.get("instance_id") for m in members]
    except (KeyError, TypeError, AttributeError):
        return None
    if subscription_type not in (HOMOGENEOUS, "HETEROGENEOUS") or any(s is None for s in subscriptions):
        return None
    if len(set(member_ids)) != len(member_ids):
        return None
    if not members:
        return {"error": None, "members": {}}
    if instance_ids.count(None) == len(instance_ids):  # no static members (most groups)
        order = sorted(range(len(member_ids)), key=_sort_keys(member_ids).__getitem__)
    else:
        static = [i for i, instance_id in enumerate(instance_ids) if instance_id is not None]
        dynamic = [i for i, instance_id in enumerate(instance_ids) if instance_id is None]
        if len({instance_ids[i] for i in static}) != len(static):
            # Equal instance ids keep the HashMap iteration order (a stable sort in Java).
            position = {member_id: k for k, member_id in enumerate(hashmap_order(member_ids))}
            static.sort(key=lambda i: position[member_ids[i]])
        static_keys = dict(zip(static, _sort_keys([instance_ids[i] for i in static])))
        static.sort(key=static_keys.__getitem__)
        dynamic.sort(key=_sort_keys(member_ids).__getitem__)
        order = static + dynamic

    partitions_of: dict = {}
    for topic in topics:
        partitions_of[topic["id"]] = int(topic["partitions"])
    ordered_ids = [member_ids[i] for i in order]
    if subscription_type == HOMOGENEOUS:
        first = subscriptions[order[0]]
        ordered_subscriptions = [first] * len(order)
        pairs = len(first) * len(order)
    else:
        ordered_subscriptions = [subscriptions[i] for i in order]
        pairs = sum(map(len, ordered_subscriptions))
    if _KERNEL is not None:
        status, assignments = _KERNEL.assign(ordered_ids, ordered_subscriptions, partitions_of,
                                             subscription_type == HOMOGENEOUS)
        if status == "ok":
            return {"error": None, "members": assignments}
        if status == "missing":
            raise PartitionAssignorException("Member is subscribed to a non-existent topic")
        # "decline" (a topic twice in one subscription, an odd partition count): the paths below answer it.
    result: dict = {member_id: {} for member_id in ordered_ids}
    if pairs < NUMPY_FROM_PAIRS:
        return _small(ordered_ids, ordered_subscriptions, partitions_of, result)
    if subscription_type == HOMOGENEOUS:
        topic_list = list(dict.fromkeys(subscriptions[order[0]]))
        if not topic_list:
            return {"error": None, "members": result}
        if any(partitions_of.get(t, -1) == -1 for t in topic_list):
            raise PartitionAssignorException("Member is subscribed to a non-existent topic")
        num_partitions = np.fromiter((partitions_of[t] for t in topic_list), dtype=np.int64, count=len(topic_list))
        # Every member subscribes to every topic: the k-th member in order gets a non-empty range of a topic
        # with n partitions exactly when k < min(members, n), so only those pairs are built.
        subscribers = np.full(len(topic_list), len(order), dtype=np.int64)
        receivers = np.minimum(num_partitions, len(order))
        pair_topic = np.repeat(np.arange(len(topic_list), dtype=np.int64), receivers)
        starts = np.concatenate(([0], np.cumsum(receivers)[:-1]))
        rank = np.arange(len(pair_topic), dtype=np.int64) - np.repeat(starts, receivers)
        pair_member = rank
    else:
        topic_index: defaultdict = defaultdict(lambda: len(topic_index))
        ordered_subscriptions = [subscriptions[i] for i in order]
        per_member = np.fromiter(map(len, ordered_subscriptions), dtype=np.int64, count=len(order))
        total = int(per_member.sum())
        # int16 topic numbers let numpy's stable argsort use its radix sort.
        pair_topic = np.fromiter(map(topic_index.__getitem__, chain.from_iterable(ordered_subscriptions)),
                                 dtype=np.int64, count=total)
        topic_list = list(topic_index)
        if not topic_list:
            return {"error": None, "members": result}
        if any(partitions_of.get(t, -1) == -1 for t in topic_list):
            raise PartitionAssignorException("Member is subscribed to a non-existent topic")
        num_partitions = np.fromiter((partitions_of[t] for t in topic_list), dtype=np.int64, count=len(topic_list))
        pair_member = np.repeat(np.arange(len(order), dtype=np.int64), per_member)
        # Rank of each (member, topic) pair among the topic's subscribers, in sorted member order.
        narrow = pair_topic.astype(np.int16) if len(topic_list) < 32768 else pair_topic
        by_topic = np.argsort(narrow, kind="stable")
        sorted_topic = pair_topic[by_topic]
        sorted_member = pair_member[by_topic]
        if np.any((sorted_topic[1:] == sorted_topic[:-1]) & (sorted_member[1:] == sorted_member[:-1])):
            return None  # a topic twice in one subscription (a Set in Kafka): the common path dedups it
        subscribers = np.bincount(pair_topic, minlength=len(topic_list))
        group_start = np.concatenate(([0], np.cumsum(subscribers)[:-1]))
        rank = np.empty_like(by_topic)
        rank[by_topic] = np.arange(len(by_topic)) - np.repeat(group_start, subscribers)

    n = num_partitions[pair_topic]
    quota, extra = np.divmod(n, subscribers[pair_topic])
    start = rank * quota + np.minimum(rank, extra)
    end = np.minimum(start + quota + (rank < extra), n)

    keep = np.flatnonzero(start < end)
    if not len(keep):
        return {"error": None, "members": result}
    # One dict(zip(...)) per member over its pairs (grouped by a stable sort on the member) instead of 50,000
    # single insertions.
    keep = keep[np.argsort(pair_member[keep], kind="stable")]
    member_of = pair_member[keep]
    partitions = list(range(int(num_partitions.max())))
    lists = list(map(partitions.__getitem__, map(slice, start[keep].tolist(), end[keep].tolist())))
    names = np.asarray(topic_list, dtype=object)[pair_topic[keep]].tolist()
    # Runs per member.
    breaks = (np.flatnonzero(member_of[1:] != member_of[:-1]) + 1).tolist()
    firsts = [0] + breaks
    lasts = breaks + [len(keep)]
    for m, first, last in zip(member_of[firsts].tolist(), firsts, lasts):
        result[ordered_ids[m]] = dict(zip(names[first:last], lists[first:last]))
    return {"error": None, "members": result}
