"""``UniformHeterogeneousAssignmentBuilder``: members subscribe to different topics.

Partitions of topics a member no longer subscribes to are revoked, unassigned partitions go to the least loaded
subscriber topic by topic (topics ordered by partitions per subscriber), then partitions move from the most to the
least loaded subscribers of each topic until no move improves balance (at most :data:`MAX_ITERATION_COUNT`
rounds over the topics).
"""

from __future__ import annotations

from typing import Any

from offsets_audit.assignors.common import GroupSpec, PartitionAssignorException, uuid_sort_key
from offsets_audit.assignors.uniform.orders import assignment_topic_order

MAX_ITERATION_COUNT = 16


class Balancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``: least/most loaded member ranges."""

    __slots__ = ("sizes", "sorted_members", "least_end", "least_count", "next_least",
                 "most_start", "most_end", "most_count", "next_most")

    def __init__(self, sizes: Any):
        # Member index -> assignment size: a list here, a view over a numpy array in the vectorised path.
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
    balancer = Balancer(sizes)
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
                moved = balance_topic(topic_id, num_partitions[topic_id], owners[topic_id], subscribers[topic_id],
                                       balancer, assign_partition)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = topic_index
            if done:
                break

    return {member_id: target[index] for index, member_id in enumerate(member_ids)}


def balance_topic(topic_id, num_partitions, topic_owners, topic_subscribers, balancer, assign_partition) -> int:
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
