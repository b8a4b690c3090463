"""The uniform builders over numpy arrays, used by ``uniform.run`` for large groups; same results and tie-breaks as
the reference builders in ``homogeneous`` and ``heterogeneous``.

One numpy array holds the partition owners; the heterogeneous hand-out of unassigned partitions is computed per
topic as level-by-level filling of the subscribers sorted by (size, index), members with the same subscription
share one subscriber array, and only topics whose subscribers differ by more than one partition run the
sequential balancing loop.

The quota and balancing loops repeat the reference builders': those stay a line-by-line mirror of Kafka's Java
(the golden tests pin both), these work on arrays.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from offsets_audit.assignors.common import GroupSpec, PartitionAssignorException, uuid_hash, uuid_sort_key
from offsets_audit.assignors.java_order import hashmap_order
from offsets_audit.assignors.uniform.heterogeneous import MAX_ITERATION_COUNT, Balancer, balance_topic
from offsets_audit.assignors.uniform.orders import integer_set_order, subscribed_topic_order

try:  # the compiled kernel (setup.py); absent without a C compiler or when imported from a --py-files zip
    import offsets_audit.assignors.uniform._kernel as _KERNEL  # built by setup.py
except ImportError:  # pragma: no cover - depends on the install
    _KERNEL = None


class _Partitions:
    """Every partition of the subscribed topics as one owner array (member index or -1), topic after topic."""

    __slots__ = ("topic_ids", "index", "offsets", "counts", "owners")

    @classmethod
    def of(cls, group: GroupSpec, topic_ids: list) -> _Partitions | None:
        """The layout of ``topic_ids``; None when one is missing from the metadata (the reference builder decides)."""
        counts = [group.num_partitions(t) for t in topic_ids]
        if -1 in counts:
            return None
        return cls(topic_ids, counts)

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
        if _KERNEL is not None:
            sizes = np.zeros(len(members), dtype=np.int64)
            claimed = _KERNEL.claim(self.owners, np.asarray(self.offsets, dtype=np.int64), self.index,
                                    [member.current_assignment for member in members],
                                    [subscribed(index) for index in range(len(members))], sizes)
            if claimed is not None:
                return sizes if claimed else None
            self.owners.fill(-1)  # input the kernel does not model (e.g. partitions given as a tuple): numpy below
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
        """The golden layout: member id -> topic id -> sorted partitions, every member present (topics in layout
        order); one pass in the compiled kernel when it is built, else numpy."""
        if _KERNEL is not None:
            offsets = np.asarray(self.offsets, dtype=np.int64)
            return {"error": None, "members": _KERNEL.result(self.owners, offsets, list(self.topic_ids), member_ids)}
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
        # Runs per (owner, topic).
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


def fast_homogeneous(group: GroupSpec) -> dict | None:
    """``UniformHomogeneousAssignmentBuilder`` over an owner array; same tie-breaks as ``assign_homogeneous``."""
    member_ids = group.member_ids
    members = [group.members[m] for m in member_ids]
    topic_ids = subscribed_topic_order(members[0].subscribed_topic_ids)
    if not topic_ids:
        return {"error": None, "members": {}}
    # The layout and claim steps as in fast_heterogeneous: only the subscribed topics differ.
    layout = _Partitions.of(group, topic_ids)
    if layout is None:
        return None
    subscribed = layout.index
    subscribed_keys = subscribed.keys()
    sizes = layout.claim_current(members, lambda _: subscribed_keys)
    if sizes is None:
        return None
    held_counts = sizes.tolist()
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
        if held_counts[member_index] <= quota:
            # Keeps everything it holds on subscribed topics: the walk below would only count it down.
            quota -= held_counts[member_index]
        elif current:
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
        # As in homogeneous.assign_homogeneous, the line-by-line Java mirror (see the module doc).
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


def fast_heterogeneous(group: GroupSpec) -> dict | None:
    """``UniformHeterogeneousAssignmentBuilder`` over an owner array; same tie-breaks as
    ``assign_heterogeneous``. Members with the same subscription share one subscriber computation."""
    member_ids = group.member_ids
    members = [group.members[m] for m in member_ids]
    classes: dict[tuple, tuple[int, list[int]]] = {}
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
    layout = _Partitions.of(group, topic_ids)
    if layout is None:
        return None
    counts = layout.counts
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
                        moved = balance_topic(t, counts[t], topic_owners, subs, balancer, assign_partition)
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
    """Python ints over the numpy sizes array, for the sequential ``Balancer``."""

    __slots__ = ("sizes",)

    def __init__(self, sizes: np.ndarray):
        self.sizes = sizes

    def __getitem__(self, index: int) -> int:
        return int(self.sizes[index])


class _ArrayBalancer(Balancer):
    """``Balancer`` whose ``initialize`` takes a numpy subscriber array (ascending member indexes) and sorts it
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
