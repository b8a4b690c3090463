"""Kafka's server-side ``UniformAssignor`` ("uniform", KIP-848 default), re-implemented bit-exact.

Two builders, chosen by the group's subscription type:

* homogeneous (``UniformHomogeneousAssignmentBuilder``): every member gets ``total // members`` partitions and
  ``total % members`` of them one more. Members keep what they own up to their quota (stickiness), in member
  iteration order; the extra slots go to members that already fill them, or to the last members that must take
  one. Freed and never-assigned partitions are then handed out in order.
* heterogeneous (``UniformHeterogeneousAssignmentBuilder``): partitions of topics a member no longer subscribes to
  are revoked, unassigned partitions go to the least loaded subscriber topic by topic (topics ordered by
  partitions per subscriber), then partitions move from the most to the least loaded subscribers of each topic
  until no move improves balance (at most 16 rounds over the topics).

Tie-breaks follow Kafka's iteration orders: the member ``HashMap`` (``GroupSpec.member_ids``), the ``HashSet`` of
subscribed topic ids and each member's current assignment ``HashMap<Uuid, HashSet<Integer>>``, reproduced with
``java_order``. This snapshot of the assignor is not rack-aware.

The homogeneous builder keeps a member's partitions topic by topic in its current assignment's iteration order,
so when two of its topics share a bucket of that map, which one is kept depends on the order they were inserted.
:func:`assign` (and ``assignors.run("uniform", ...)``) takes the order of ``current_assignment`` in the input as
that insertion order: the order of the topics in the ``ConsumerGroupTargetAssignmentMember`` record, which is
how a coordinator that loaded the group from ``__consumer_offsets`` rebuilds the map (``Assignment.fromRecord``:
a default ``HashMap`` and ``new HashSet<>(partitions)``), so the replay must carry the record's topic and
partition order. A live coordinator instead passes the previous run's output maps; :func:`assign_chained`
returns those maps' Java iteration order (modelled with ``java_hashmap``: deep copies, removals,
``computeIfAbsent`` at a bucket head) so consecutive runs can be chained exactly, as the golden scenarios were.
Those orders were checked against Kafka's own two builders compiled on OpenJDK 17 (every golden case and 800
random, partly chained, groups: identical topic and partition iteration order).

Two implementations give the same results: the reference builders (:func:`assign_homogeneous`,
:func:`assign_heterogeneous`), written against the Java step by step, and the vectorised path :func:`run` uses
for groups of :data:`VECTORISE_FROM_PARTITIONS` partitions or more. The latter keeps one numpy array of partition
owners; the heterogeneous hand-out of unassigned partitions is computed per topic as level-by-level filling of
the subscribers sorted by (size, index), members with the same subscription share one subscriber array, and
only topics whose subscribers differ by more than one partition run the sequential balancing loop.
"""

from __future__ import annotations

import gc
from itertools import chain
from typing import Mapping

import numpy as np

from offsets_audit.assignors.common import (
    HOMOGENEOUS,
    GroupSpec,
    JavaException,
    MemberSpec,
    PartitionAssignorException,
    assignment_result,
    error_result,
    hashset_copy_capacity,
    parse_group_spec,
    uuid_hash,
    uuid_hashset_order,
    uuid_sort_key,
)
from offsets_audit.assignors.java_hashmap import JavaHashMap, JavaHashSet, integer_hash
from offsets_audit.assignors.java_order import final_capacity, hashmap_order, spread

NAME = "uniform"

MAX_ITERATION_COUNT = 16

# Below this many partitions in the metadata, numpy's per-call overhead outweighs what it saves and run() uses
# the reference builders (both give the same result).
VECTORISE_FROM_PARTITIONS = 1000


def assign(group: GroupSpec) -> dict:
    """member id -> {topic id -> partitions}; raises ``PartitionAssignorException`` like Kafka."""
    if not group.members:
        return {}
    if group.subscription_type == HOMOGENEOUS:
        return assign_homogeneous(group)
    return assign_heterogeneous(group)


# ---------------------------------------------------------------------------------------------------------------
# Java iteration orders of the inputs

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


# ---------------------------------------------------------------------------------------------------------------
# Homogeneous

def current_iteration_order(assignment: dict) -> list:
    """``[(topic id, partitions)]`` in the order Kafka iterates a current assignment rebuilt from a record:
    a default ``HashMap`` filled in the given topic order, each value ``new HashSet<>(partitions)``."""
    return [(topic_id, integer_set_order(assignment[topic_id])) for topic_id in assignment_topic_order(assignment)]


def assign_homogeneous(group: GroupSpec, current: dict | None = None, additions: dict | None = None) -> dict:
    """``UniformHomogeneousAssignmentBuilder.build``.

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
        if quota > 0 and has_extra and member_count - member_index > remaining_extra:
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


# ---------------------------------------------------------------------------------------------------------------
# Heterogeneous

class _Balancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``: least/most loaded member ranges."""

    __slots__ = ("sizes", "sorted_members", "least_end", "least_count", "next_least",
                 "most_start", "most_end", "most_count", "next_most")

    def __init__(self, sizes: list):
        self.sizes = sizes
        self.sorted_members: list = []

    def initialize(self, members: list) -> int:
        sizes = self.sizes
        # Subscriber lists are in ascending member index, so a stable sort by size gives (size, index) order.
        ordered = sorted(members, key=sizes.__getitem__)
        self.sorted_members = ordered
        self.least_end = 0
        self.least_count = sizes[ordered[0]] - 1
        self.next_least = 0
        self.most_start = len(ordered)
        self.most_end = len(ordered)
        self.most_count = sizes[ordered[-1]] + 1
        self.next_most = len(ordered) - 1
        return sizes[ordered[-1]] - sizes[ordered[0]]

    def next_least_loaded(self) -> int:
        ordered = self.sorted_members
        if self.next_least >= self.least_end:
            self.least_count += 1
            sizes = self.sizes
            end = self.least_end
            while end < len(ordered) and sizes[ordered[end]] == self.least_count:
                end += 1
            self.least_end = end
            self.next_least = 0
        member = ordered[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        ordered = self.sorted_members
        sizes = self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = sizes[ordered[self.most_start - 1]]
            else:
                self.most_count -= 1
            start = self.most_start
            while start > 0 and sizes[ordered[start - 1]] == self.most_count:
                start -= 1
            self.most_start = start
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = ordered[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        ordered = self.sorted_members
        position = self.next_most + 1
        member = ordered[position]
        ordered[position] = ordered[self.most_end - 1]
        ordered[self.most_end - 1] = member
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


def assign_heterogeneous(group: GroupSpec, journal: list | None = None) -> dict:
    """``UniformHeterogeneousAssignmentBuilder.build``.

    When ``journal`` is a list, it receives ``(topic id, partition, from member index or -1, to member index)``
    for every ``assignPartition`` call, in order (member indexes follow ``group.member_ids``).
    """
    member_ids = group.member_ids
    members = [group.members[m] for m in member_ids]
    num_partitions: dict = {}
    subscribers: dict = {}
    for index, member in enumerate(members):
        for topic_id in dict.fromkeys(member.subscribed_topic_ids):
            count = num_partitions.get(topic_id)
            if count is None:
                count = group.num_partitions(topic_id)
                if count == -1:
                    raise PartitionAssignorException(
                        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
                num_partitions[topic_id] = count
            subscribers.setdefault(topic_id, []).append(index)
    if not num_partitions:
        return {}

    def topic_order_key(topic_id):
        subscriber_count = len(subscribers[topic_id])
        return (-(num_partitions[topic_id] / subscriber_count), subscriber_count, uuid_sort_key(topic_id))

    owners = {topic_id: [-1] * count for topic_id, count in num_partitions.items()}
    sizes = [0] * len(members)
    target: list = []
    for index, member in enumerate(members):
        subscribed = set(member.subscribed_topic_ids)
        new: dict = {}
        for topic_id in assignment_topic_order(member.current_assignment):
            partitions = member.current_assignment[topic_id]
            if topic_id not in subscribed:
                continue
            partition_set = set(partitions)
            sizes[index] += len(partition_set)
            topic_owners = owners[topic_id]
            for partition in partition_set:
                if not 0 <= partition < len(topic_owners):
                    from offsets_audit.assignors.common import ArrayIndexOutOfBoundsException

                    raise ArrayIndexOutOfBoundsException.for_index(partition, len(topic_owners))
                topic_owners[partition] = index
            new[topic_id] = partition_set
        target.append(new)

    def assign_partition(topic_id, partition, member_index):
        old_index = owners[topic_id][partition]
        if journal is not None:
            journal.append((topic_id, partition, old_index, member_index))
        if old_index != -1:
            held = target[old_index].get(topic_id)
            if held is not None:
                held.discard(partition)
                if not held:
                    del target[old_index][topic_id]
            sizes[old_index] -= 1
        target[member_index].setdefault(topic_id, set()).add(partition)
        owners[topic_id][partition] = member_index
        sizes[member_index] += 1

    # Assign the unassigned partitions, topic by topic, to the least loaded subscribers.
    unassigned = {}
    for topic_id, topic_owners in owners.items():
        free = [p for p, owner in enumerate(topic_owners) if owner == -1]
        if free:
            unassigned[topic_id] = free
    balancer = _Balancer(sizes)
    for topic_id in sorted(unassigned, key=topic_order_key):
        balancer.initialize(subscribers[topic_id])
        for partition in unassigned[topic_id]:
            assign_partition(topic_id, partition, balancer.next_least_loaded())

    # Move partitions from the most to the least loaded subscribers until balanced.
    movable = sorted((t for t in num_partitions if len(subscribers[t]) >= 2), key=topic_order_key)
    if movable:
        last_rebalanced = -1
        done = False
        for _ in range(MAX_ITERATION_COUNT):
            for topic_index, topic_id in enumerate(movable):
                if topic_index == last_rebalanced:
                    done = True
                    break
                moved = _balance_topic(topic_id, num_partitions[topic_id], owners[topic_id], subscribers[topic_id],
                                       balancer, assign_partition)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = topic_index
            if done:
                break

    return {member_id: target[index] for index, member_id in enumerate(member_ids)}


def _balance_topic(topic_id, num_partitions, topic_owners, topic_subscribers, balancer, assign_partition) -> int:
    """``UniformHeterogeneousAssignmentBuilder.balanceTopic``: returns the number of partitions moved."""
    moved = 0
    if balancer.initialize(topic_subscribers) <= 1:
        return moved
    partitions = sorted(range(num_partitions), key=lambda p: (topic_owners[p], p))
    start: dict = {}
    end: dict = {}
    for i, partition in enumerate(partitions):
        owner = topic_owners[partition]
        start.setdefault(owner, i)
        end[owner] = i + 1
    while not balancer.is_balanced():
        while True:
            most = balancer.next_most_loaded()
            if most == -1:
                break
            if most not in end or end[most] - start[most] <= 0:
                balancer.exclude_most_loaded()
                continue
            break
        if most == -1:
            break
        partition = partitions[end[most] - 1]
        end[most] -= 1
        least = balancer.next_least_loaded()
        if balancer.is_balanced():
            break
        assign_partition(topic_id, partition, least)
        moved += 1
    return moved


# ---------------------------------------------------------------------------------------------------------------
# Order-exact chaining: each step's output as the Java maps Kafka built

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
            target = assign_homogeneous(group, current, additions)
            final = _homogeneous_output_maps(old_maps, target, additions)
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
    ordered = _carried_order(member, carried) if carried else None
    if ordered is None:
        ordered = member.current_assignment
    current = JavaHashMap(uuid_hash)
    for topic_id, partitions in ordered.items():
        current.put(topic_id, JavaHashSet.copy_of(partitions, integer_hash))
    return current


def _carried_order(member: MemberSpec, carried: Mapping) -> dict | None:
    """The carried Java-ordered assignment of this member restricted to its input topics, if every input topic
    holds the carried partitions. A static member restarted under a new id is found by content (if unique)."""
    wanted = {topic_id: sorted(set(partitions)) for topic_id, partitions in member.current_assignment.items()}

    def restricted(previous: Mapping) -> dict | None:
        if any(topic_id not in previous or sorted(previous[topic_id]) != partitions
               for topic_id, partitions in wanted.items()):
            return None
        return {topic_id: previous[topic_id] for topic_id in previous if topic_id in wanted}

    previous = carried.get(member.member_id)
    if previous is not None:
        return restricted(previous)
    if not wanted:
        return None
    matches = [a for a in (restricted(p) for p in carried.values()) if a is not None and len(a) == len(wanted)]
    return matches[0] if len(matches) == 1 else None


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


# ---------------------------------------------------------------------------------------------------------------
# Vectorised path used by run(): the same builders over numpy arrays

def run(case_input: Mapping) -> dict:
    """``assignors.run("uniform", case_input)``: the golden ``expected`` layout, computed on numpy arrays of
    partition owners. Inputs the arrays cannot represent exactly (a partition claimed twice or out of range,
    a subscription to a missing topic) take the reference path :func:`assign`, which mirrors Kafka's maps.

    The cyclic garbage collector is paused for the call (it creates no cycles): on a large group the tens of
    thousands of result lists otherwise trigger full collections over the whole input, which cost more than the
    assignment itself.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _run(case_input)
    finally:
        if paused:
            gc.enable()


def _run(case_input: Mapping) -> dict:
    group = parse_group_spec(case_input)
    if not group.members:
        return {"error": None, "members": {}}
    if sum(topic.num_partitions for topic in group.topics.values()) < VECTORISE_FROM_PARTITIONS:
        return assignment_result(assign(group))
    fast = _fast_homogeneous(group) if group.subscription_type == HOMOGENEOUS else _fast_heterogeneous(group)
    if fast is not None:
        return fast
    return assignment_result(assign(group))


class _Partitions:
    """Every partition of the subscribed topics as one owner array (member index or -1), topic after topic."""

    __slots__ = ("topic_ids", "index", "offsets", "counts", "owners")

    def __init__(self, topic_ids: list, counts: list):
        self.topic_ids = topic_ids
        self.index = {topic_id: i for i, topic_id in enumerate(topic_ids)}
        self.counts = counts
        self.offsets = [0] * (len(counts) + 1)
        for i, count in enumerate(counts):
            self.offsets[i + 1] = self.offsets[i] + count
        self.owners = np.full(self.offsets[-1], -1, dtype=np.int64)

    def claim_current(self, members: list, subscribed) -> np.ndarray | None:
        """Owners from the members' current assignments (topics each subscribes to); None if some partition is
        claimed twice or out of range. Returns the members' assignment sizes."""
        index = self.index
        topics: list = []
        lengths: list = []
        partitions: list = []
        held: list = []
        for member_index, member in enumerate(members):
            current = member.current_assignment
            before = len(partitions)
            if current:
                member_subscribed = subscribed(member_index)
                if current.keys() <= member_subscribed:
                    topics.extend(map(index.__getitem__, current))
                    lengths.extend(map(len, current.values()))
                    partitions.extend(chain.from_iterable(current.values()))
                else:
                    for topic_id, topic_partitions in current.items():
                        if topic_id in member_subscribed:
                            topics.append(index[topic_id])
                            lengths.append(len(topic_partitions))
                            partitions.extend(topic_partitions)
            held.append(len(partitions) - before)
        sizes = np.array(held, dtype=np.int64)
        if partitions:
            topic = np.repeat(np.array(topics, dtype=np.int64), lengths)
            partition = np.array(partitions, dtype=np.int64)
            if partition.min() < 0 or np.any(partition >= np.asarray(self.counts, dtype=np.int64)[topic]):
                return None
            self.owners[np.asarray(self.offsets[:-1], dtype=np.int64)[topic] + partition] = np.repeat(
                np.arange(len(members), dtype=np.int64), sizes)
            if np.count_nonzero(self.owners >= 0) != len(partitions):
                return None
        return sizes

    def result(self, member_ids: list) -> dict:
        """The golden layout: member id -> topic id -> sorted partitions, every member present."""
        owners = self.owners
        held = np.flatnonzero(owners >= 0)
        members: dict = {member_id: {} for member_id in member_ids}
        if not len(held):
            return {"error": None, "members": members}
        owner = owners[held]
        order = np.lexsort((held, owner))
        held, owner = held[order], owner[order]
        topic = np.searchsorted(np.asarray(self.offsets), held, side="right") - 1
        partition = held - np.asarray(self.offsets, dtype=np.int64)[topic]
        breaks = np.flatnonzero((owner[1:] != owner[:-1]) | (topic[1:] != topic[:-1])) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(held)])).tolist()
        partition_list = partition.tolist()
        lists = list(map(partition_list.__getitem__, map(slice, starts, ends)))
        names = np.asarray(self.topic_ids, dtype=object)[topic[starts]].tolist()
        segment_owner = owner[starts]
        member_breaks = (np.flatnonzero(segment_owner[1:] != segment_owner[:-1]) + 1).tolist()
        member_starts = [0] + member_breaks
        member_ends = member_breaks + [len(starts)]
        for member_index, start, end in zip(segment_owner[member_starts].tolist(), member_starts, member_ends):
            members[member_ids[member_index]] = dict(zip(names[start:end], lists[start:end]))
        return {"error": None, "members": members}


def _fast_homogeneous(group: GroupSpec) -> dict | None:
    """``UniformHomogeneousAssignmentBuilder`` over an owner array; same tie-breaks as ``assign_homogeneous``."""
    member_ids = group.member_ids
    members = [group.members[m] for m in member_ids]
    topic_ids = subscribed_topic_order(members[0].subscribed_topic_ids)
    if not topic_ids:
        return {"error": None, "members": {}}
    counts = [group.num_partitions(t) for t in topic_ids]
    if -1 in counts:
        return None
    layout = _Partitions(topic_ids, counts)
    subscribed = layout.index
    subscribed_keys = subscribed.keys()
    if layout.claim_current(members, lambda _: subscribed_keys) is None:
        return None
    owners = layout.owners
    offsets = layout.offsets
    total = offsets[-1]
    unassigned = [np.flatnonzero(owners < 0)]
    member_count = len(members)
    minimum_quota = total // member_count
    remaining_extra = total % member_count
    unfilled: list = []
    hashes: dict = {}
    for member_index, member in enumerate(members):
        quota = minimum_quota
        has_extra = False
        if remaining_extra > 0:
            quota += 1
            has_extra = True
        current = member.current_assignment
        if current:
            for topic_id in _topic_order(current, hashes):
                if topic_id not in subscribed:
                    continue
                partitions = current[topic_id]
                held = len(partitions)
                if held <= quota:
                    quota -= held
                    continue
                ordered = integer_set_order(partitions)
                base = offsets[subscribed[topic_id]]
                revoked = np.array(ordered[quota:], dtype=np.int64) + base
                owners[revoked] = -1
                unassigned.append(revoked)
                quota = 0
        if quota > 0 and has_extra and member_count - member_index > remaining_extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_index, quota))
        if has_extra:
            remaining_extra -= 1
    queue = np.concatenate(unassigned) if len(unassigned) > 1 else unassigned[0]
    if unfilled:
        indexes = np.array([m for m, _ in unfilled], dtype=np.int64)
        quotas = np.array([q for _, q in unfilled], dtype=np.int64)
        takers = np.repeat(indexes, quotas)[:len(queue)]
        owners[queue[:len(takers)]] = takers
        position = len(takers)
    else:
        position = 0
    if position < len(queue):
        raise PartitionAssignorException("Partitions were left unassigned")
    return layout.result(member_ids)


def _topic_order(assignment: dict, hashes: dict) -> list:
    """``assignment_topic_order`` with the topic hash codes cached across members."""
    if len(assignment) == 1:
        return list(assignment)
    codes = []
    for topic_id in assignment:
        code = hashes.get(topic_id)
        if code is None:
            code = hashes[topic_id] = uuid_hash(topic_id)
        codes.append(code)
    return hashmap_order(list(assignment), codes)


def _fast_heterogeneous(group: GroupSpec) -> dict | None:
    """``UniformHeterogeneousAssignmentBuilder`` over an owner array; same tie-breaks as
    ``assign_heterogeneous``. Members with the same subscription share one subscriber computation."""
    member_ids = group.member_ids
    members = [group.members[m] for m in member_ids]
    classes: dict = {}
    member_class: list = []
    for index, member in enumerate(members):
        key = tuple(member.subscribed_topic_ids)  # the input's own list (parse_group_spec shares it)
        found = classes.get(key)
        if found is None:
            found = classes[key] = (len(classes), [])
        found[1].append(index)
        member_class.append(found[0])
    topic_ids: list = []
    topic_classes: dict = {}
    class_topics: list = []
    for key, (class_id, _) in classes.items():
        unique = list(dict.fromkeys(key))
        class_topics.append(frozenset(unique))
        for topic_id in unique:
            holders = topic_classes.get(topic_id)
            if holders is None:
                holders = topic_classes[topic_id] = []
                topic_ids.append(topic_id)
            holders.append(class_id)
    if not topic_ids:
        return {"error": None, "members": {}}
    counts = [group.num_partitions(t) for t in topic_ids]
    if -1 in counts:
        return None
    layout = _Partitions(topic_ids, counts)
    sizes = layout.claim_current(members, lambda index: class_topics[member_class[index]])
    if sizes is None:
        return None

    class_members = [np.array(indexes, dtype=np.int64) for _, indexes in classes.values()]
    by_pattern: dict = {}
    subscribers: list = []
    for topic_id in topic_ids:
        pattern = tuple(topic_classes[topic_id])
        subs = by_pattern.get(pattern)
        if subs is None:
            subs = (class_members[pattern[0]] if len(pattern) == 1
                    else np.sort(np.concatenate([class_members[c] for c in pattern])))
            by_pattern[pattern] = subs
        subscribers.append(subs)

    order_keys = [(-(count / len(subs)), len(subs), uuid_sort_key(topic_id))
                  for topic_id, count, subs in zip(topic_ids, counts, subscribers)]
    topic_order_key = order_keys.__getitem__

    owners = layout.owners
    offsets = layout.offsets
    free = np.flatnonzero(owners < 0)
    if len(free):
        free_topic = np.searchsorted(np.asarray(offsets), free, side="right") - 1
        cut = np.flatnonzero(np.diff(free_topic)) + 1
        starts = np.concatenate(([0], cut)).tolist()
        ends = np.concatenate((cut, [len(free)])).tolist()
        free_topics = free_topic[starts].tolist()
        spans = {t: (start, end) for t, start, end in zip(free_topics, starts, ends)}
        for t in sorted(free_topics, key=topic_order_key):
            start, end = spans[t]
            owners[free[start:end]] = _least_loaded_sequence(subscribers[t], sizes, end - start)

    movable = sorted((t for t in range(len(topic_ids)) if len(subscribers[t]) >= 2), key=topic_order_key)
    if movable:
        sizes_view = _SizesView(sizes)

        def assign_partition(t, partition, member_index):
            position = offsets[t] + partition
            sizes[owners[position]] -= 1
            owners[position] = member_index
            sizes[member_index] += 1

        last_rebalanced = -1
        done = False
        balancer = _ArrayBalancer(sizes_view)
        # Subscriber sets (shared by topics with the same subscribing classes) known to be within one partition
        # of balance; any move invalidates them.
        balanced: set = set()
        for _ in range(MAX_ITERATION_COUNT):
            for topic_index, t in enumerate(movable):
                if topic_index == last_rebalanced:
                    done = True
                    break
                subs = subscribers[t]
                moved = 0
                if id(subs) not in balanced:
                    loads = sizes[subs]
                    if int(loads.max()) - int(loads.min()) > 1:
                        topic_owners = owners[offsets[t]:offsets[t + 1]].tolist()
                        moved = _balance_topic(t, counts[t], topic_owners, subs, balancer, assign_partition)
                        if moved:
                            balanced.clear()
                    else:
                        balanced.add(id(subs))
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = topic_index
            if done:
                break
    return layout.result(member_ids)


class _SizesView:
    """Python ints over the numpy sizes array, for the sequential ``_Balancer``."""

    __slots__ = ("sizes",)

    def __init__(self, sizes: np.ndarray):
        self.sizes = sizes

    def __getitem__(self, index: int) -> int:
        return int(self.sizes[index])


class _ArrayBalancer(_Balancer):
    """``_Balancer`` whose ``initialize`` takes a numpy subscriber array (ascending member indexes) and sorts it
    by size with numpy; a stable sort keeps the member index as the tie-break, as ``memberComparator`` does."""

    __slots__ = ()

    def initialize(self, members) -> int:
        loads = self.sizes.sizes[members]
        order = np.argsort(loads, kind="stable")
        ordered = members[order].tolist()
        low = int(loads[order[0]])
        high = int(loads[order[-1]])
        self.sorted_members = ordered
        self.least_end = 0
        self.least_count = low - 1
        self.next_least = 0
        self.most_start = len(ordered)
        self.most_end = len(ordered)
        self.most_count = high + 1
        self.next_most = len(ordered) - 1
        return high - low


def _least_loaded_sequence(subscribers: np.ndarray, sizes: np.ndarray, count: int) -> np.ndarray:
    """The members ``MemberAssignmentBalancer.nextLeastLoadedMember`` returns ``count`` times in a row after
    ``initialize(subscribers)``, applying each assignment to ``sizes``.

    Subscribers sorted by (size, index) are filled level by level: each pass hands one partition to every
    member whose starting size is at most the current level, in sorted order."""
    loads = sizes[subscribers]
    order = np.argsort(loads, kind="stable")
    ordered = subscribers[order]
    sorted_loads = loads[order]
    level = int(sorted_loads[0])
    picks: list = []
    remaining = count
    while remaining > 0:
        end = int(np.searchsorted(sorted_loads, level, side="right"))
        take = end if end < remaining else remaining
        chosen = ordered[:take]
        sizes[chosen] += 1
        picks.append(chosen)
        remaining -= take
        level += 1
    return picks[0] if len(picks) == 1 else np.concatenate(picks)
