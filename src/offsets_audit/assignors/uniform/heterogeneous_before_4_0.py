"""Kafka 3.x's ``UniformHeterogeneousAssignmentBuilder``: members subscribe to different topics.

Kafka 4.0 replaced this builder with another algorithm (:mod:`.heterogeneous`); a 3.x coordinator runs this one:

1. members keep what they own of the topics they still subscribe to;
2. every partition left is handed out, in a fixed partition order, to the subscriber holding the fewest partitions
   (ties: the smaller member id) among those that can take more;
3. while some member holds two more than another subscriber of one of its topics, partitions move, again in that
   order, to the least loaded subscriber, undoing an earlier opposite move between the same two members where
   there is one (the sticky assignor's partition movements).

The partition order sorts by the topic's partitions per subscriber (largest first), then by its subscriber count,
then by partition number; partitions tied on all three keep the iteration order of the ``HashSet`` they were
taken from, so that set's Java layout is modelled (:class:`~offsets_audit.assignors.java_hashmap.JavaHashSet`).
The same layout decides which partition an undone move takes back. A partition moved twice in one call makes
Kafka 3.x's builder throw (its movement bookkeeping rejects the second move), and so does this one.
"""

from __future__ import annotations

from offsets_audit.assignors.common import GroupSpec, PartitionAssignorException, java_string_key, uuid_hash
from offsets_audit.assignors.java_hashmap import JavaHashSet
from offsets_audit.assignors.java_order import hashmap_order

_MASK32 = 0xFFFFFFFF


def topic_id_partition_hash(key: tuple) -> int:
    """``TopicIdPartition.hashCode()`` (``Objects.hash(topicId, partitionId)``) of a ``(topic id, partition)``."""
    topic_id, partition = key
    return (31 * (31 + uuid_hash(topic_id)) + partition) & _MASK32


class _Builder:
    """One call's state, named after the Java fields it mirrors."""

    def __init__(self, group: GroupSpec) -> None:
        self.group = group
        self.member_ids = group.member_ids
        self.subscriptions = {m: list(dict.fromkeys(group.members[m].subscribed_topic_ids)) for m in self.member_ids}
        self.subscribed_sets = {m: set(topics) for m, topics in self.subscriptions.items()}
        inserted: list = []
        self.members_per_topic: dict = {}
        for member_id in self.member_ids:
            for topic_id in self.subscriptions[member_id]:
                if group.num_partitions(topic_id) == -1:
                    raise PartitionAssignorException(
                        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
                if topic_id not in self.members_per_topic:
                    inserted.append(topic_id)
                self.members_per_topic.setdefault(topic_id, []).append(member_id)
        # HashSet<Uuid> subscribedTopicIds, as iterated.
        self.subscribed_topic_ids = hashmap_order(inserted, [uuid_hash(t) for t in inserted])
        self.target: dict = {m: {} for m in self.member_ids}
        self.owner: dict = {}
        self.size = dict.fromkeys(self.member_ids, 0)
        self.max_size = {m: sum(group.num_partitions(t) for t in self.subscriptions[m]) for m in self.member_ids}
        self.unassigned = self.topic_id_partitions()
        # TreeSet<String> sortedMembersByAssignmentSize: membership here, order from (size, member id) on demand.
        self.sorted_members = {m for m in self.member_ids if self.size[m] < self.max_size[m]}
        # PartitionMovements: topic -> (from, to) -> HashSet of partitions; partition -> (from, to).
        self.movements_by_topic: dict = {}
        self.movements_by_partition: dict = {}

    # -- helpers -----------------------------------------------------------------------------------------
    def topic_id_partitions(self) -> JavaHashSet:
        """``topicIdPartitions``: a new ``HashSet`` of every partition of every subscribed topic."""
        result = JavaHashSet(topic_id_partition_hash)
        for topic_id in self.subscribed_topic_ids:
            for partition in range(self.group.num_partitions(topic_id)):
                result.add((topic_id, partition))
        return result

    def _member_key(self, member_id: str) -> tuple:
        return self.size[member_id], java_string_key(member_id)

    def sorted_by_size(self, member_ids) -> list:
        """``sortMembersByAssignmentSize``: the members that can take more, fewest partitions first."""
        return sorted((m for m in member_ids if self.size[m] < self.max_size[m]), key=self._member_key)

    def sort_partitions(self, partitions) -> list:
        """``sortTopicIdPartitions``: stable, as ``List.sort`` is."""
        def key(tp):
            subscribers = len(self.members_per_topic[tp[0]])
            return -(self.group.num_partitions(tp[0]) / subscribers), subscribers, tp[1]
        return sorted(partitions, key=key)

    def add(self, tp: tuple, member_id: str) -> None:
        """``AssignmentManager.addPartitionToTargetAssignment``."""
        self.target[member_id].setdefault(tp[0], set()).add(tp[1])
        self.owner[tp] = member_id
        self.sorted_members.discard(member_id)
        self.size[member_id] += 1
        if self.size[member_id] < self.max_size[member_id]:
            self.sorted_members.add(member_id)
        self.unassigned.remove(tp)

    def remove(self, tp: tuple, member_id: str) -> None:
        """``AssignmentManager.removePartitionFromTargetAssignment``."""
        partitions = self.target[member_id].get(tp[0])
        if partitions is not None:
            partitions.discard(tp[1])
            if not partitions:
                del self.target[member_id][tp[0]]
        if self.owner.get(tp) == member_id:
            del self.owner[tp]
        self.sorted_members.discard(member_id)
        if self.size[member_id] > 0:
            self.size[member_id] -= 1
        if self.size[member_id] < self.max_size[member_id]:
            self.sorted_members.add(member_id)

    # -- the three steps --------------------------------------------------------------------------------
    def build(self) -> dict:
        if not self.subscribed_topic_ids:
            return {}
        for member_id in self.member_ids:
            subscribed = self.subscribed_sets[member_id]
            for topic_id, partitions in self.group.members[member_id].current_assignment.items():
                if topic_id in subscribed:
                    for partition in partitions:
                        self.add((topic_id, partition), member_id)
        for tp in self.sort_partitions(self.unassigned.keys()):
            candidates = self.sorted_by_size(self.members_per_topic[tp[0]])
            if candidates:
                self.add(tp, candidates[0])
        self.balance()
        return self.target

    def can_member_participate(self, member_id: str) -> bool:
        if self.size[member_id] < self.max_size[member_id]:
            return True
        return any(len(self.members_per_topic[t]) >= 2 for t in self.target[member_id])

    def is_balanced(self) -> bool:
        ordered = sorted(self.sorted_members, key=self._member_key)
        if self.size[ordered[0]] >= self.size[ordered[-1]] - 1:
            return True
        for member_id in ordered:
            count = self.size[member_id]
            if count == self.max_size[member_id]:
                continue
            for topic_id in self.subscriptions[member_id]:
                owned = self.target[member_id].get(topic_id, ())
                for partition in range(self.group.num_partitions(topic_id)):
                    if partition not in owned:
                        other = self.owner.get((topic_id, partition))
                        if count + 1 < (self.size[other] if other is not None else 0):
                            return False
        return True

    def balance(self) -> None:
        if not self.unassigned.is_empty():
            raise PartitionAssignorException("Some partitions were left unassigned")
        for tp in self.topic_id_partitions().keys():
            self.unassigned.add(tp)
        for topic_id in self.subscribed_topic_ids:
            if len(self.members_per_topic[topic_id]) < 2:
                for partition in range(self.group.num_partitions(topic_id)):
                    self.unassigned.remove((topic_id, partition))
        for member_id in self.member_ids:
            if not self.can_member_participate(member_id):
                self.sorted_members.discard(member_id)
        if not self.unassigned.is_empty():
            self.perform_reassignments()

    def perform_reassignments(self) -> None:
        modified = True
        while modified:
            modified = False
            occurred = False
            for tp in self.sort_partitions(self.unassigned.keys()):
                if occurred and self.is_balanced():
                    return
                occurred = False
                subscribers = self.members_per_topic[tp[0]]
                if len(subscribers) <= 1:
                    raise PartitionAssignorException(
                        f"Expected more than one potential member for topicIdPartition '{_show(tp)}'")
                current = self.owner.get(tp)
                if current is None:
                    raise PartitionAssignorException(
                        f"Expected topicIdPartition '{_show(tp)}' to be assigned to a member")
                for other in subscribers:
                    if self.size[current] > self.size[other] + 1:
                        self.reassign(tp)
                        modified = occurred = True
                        break

    def reassign(self, tp: tuple) -> None:
        new_owner = next((m for m in sorted(self.sorted_members, key=self._member_key)
                          if tp[0] in self.subscribed_sets[m]), None)
        if new_owner is None:
            raise PartitionAssignorException(f"No suitable new owner was found for the partition{_show(tp)}")
        moved = self.actual_partition_to_move(tp, self.owner[tp], new_owner)
        old_owner = self.owner[moved]   # a partition moved back is owned by the member it went to
        self.move(moved, old_owner, new_owner)
        self.remove(moved, old_owner)
        self.add(moved, new_owner)

    # -- PartitionMovements -----------------------------------------------------------------------------
    def actual_partition_to_move(self, tp: tuple, old_owner: str, new_owner: str) -> tuple:
        moves = self.movements_by_topic.get(tp[0])
        if moves is None:
            return tp
        earlier = self.movements_by_partition.get(tp)
        if earlier is not None:
            if old_owner != earlier[1]:
                raise PartitionAssignorException(f"Old owner does not match expected value for partition: {_show(tp)}")
            old_owner = earlier[0]
        reverse = moves.get((new_owner, old_owner))
        if reverse is None:
            return tp
        return reverse.keys()[0]

    def _forget(self, tp: tuple) -> tuple:
        pair = self.movements_by_partition.pop(tp)
        moves = self.movements_by_topic[tp[0]]
        moves[pair].remove(tp)
        if moves[pair].is_empty():
            del moves[pair]
        if not moves:
            del self.movements_by_topic[tp[0]]
        return pair

    def _record(self, tp: tuple, pair: tuple) -> None:
        self.movements_by_partition[tp] = pair
        moves = self.movements_by_topic.setdefault(tp[0], {})
        if pair not in moves:
            moves[pair] = JavaHashSet(topic_id_partition_hash)
        moves[pair].add(tp)

    def move(self, tp: tuple, old_owner: str, new_owner: str) -> None:
        if tp in self.movements_by_partition:
            earlier = self._forget(tp)
            if earlier[1] == old_owner:
                # Kafka 3.x's check is inverted: it rejects the consistent case, so any second move throws.
                raise PartitionAssignorException(
                    "Mismatch in partition movement record with respect to partition ownership during a rebalance")
            if earlier[0] != new_owner:
                self._record(tp, (earlier[0], new_owner))
        else:
            self._record(tp, (old_owner, new_owner))


def _show(tp: tuple) -> str:
    """``TopicIdPartition.toString()``: ``topicId:partition``."""
    return f"{tp[0]}:{tp[1]}"


def assign_heterogeneous_before_4_0(group: GroupSpec) -> dict:
    """``UniformHeterogeneousAssignmentBuilder.build`` of Kafka 3.x: member id -> {topic id -> partitions}, every
    member listed; raises ``PartitionAssignorException`` where Kafka 3.x's builder throws."""
    return _Builder(group).build()
