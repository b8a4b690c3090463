"""The simulator's coordinator for modern groups (KIP-848 consumer, KIP-932 share, KIP-1071 streams): what they share.

``SimulatedModernGroup`` mirrors the heartbeat path of ``GroupMetadataManager``: a join, a subscription change or a
metadata-hash change bumps the group epoch; a new target assignment is computed only when the group epoch is ahead
of the assignment epoch and the KIP-1263 assignment interval has passed since the last one (the first one is
immediate); then ``CurrentAssignmentBuilder`` (:func:`reconcile`) reconciles the heartbeating member (STABLE /
UNREVOKED_PARTITIONS / UNRELEASED_PARTITIONS, per-partition assignment epochs). One module per group kind builds on
it: ``simulate.consumer``, ``simulate.share``, ``simulate.streams``; classic groups are ``simulate.classic``.

Target assignments come from Kafka's own assignors (``offsets_audit.assignors.run``: ``uniform`` or ``range`` for
consumer groups as the members' ``serverAssignor`` says, ``simple`` for share groups, ``sticky`` for streams
groups), fed what ``TargetAssignmentBuilder`` feeds them: the members in the iteration order of the group's
``TimelineHashMap`` followed by the member the heartbeat adds, each member's current target in record order.

Record order inside one append follows the golden histories (real coordinator output). The classes are named
``Simulated*`` so that they are not mistaken for the replay's groups (``replay.consumer.ConsumerGroup``...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import offsets_audit.simulate.records as R
from offsets_audit.assignors.inputs import subscription_iteration_order, timeline_grow, timeline_order
from offsets_audit.assignors.java_order import hashmap_order
from offsets_audit.assignors.metadata_hash import compute_metadata_hash
from offsets_audit.codec.record_types import RecordType


# modern.MemberState ids
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
# streams.MemberState ids
STREAMS_STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = 1, 2, 3
#: memberEpoch of a static member that left temporarily (ConsumerGroupHeartbeat with epoch -2).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: A new modern group starts at group epoch 1 in memory, so its first metadata record says 2.
INITIAL_GROUP_EPOCH = 1


@dataclass
class Topic:
    topic_id: str
    name: str
    partitions: int


@dataclass
class Member:
    """A modern (KIP-848 / share / streams) member as the coordinator keeps it."""

    member_id: str
    client_id: str
    subscribed_topics: tuple = ()
    instance_id: str | None = None
    rack_id: str | None = None
    process_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: dict = field(default_factory=dict)            # topic id / subtopology -> {partition: epoch}
    pending_revocation: dict = field(default_factory=dict)  # same shape
    standby: dict = field(default_factory=dict)             # streams: subtopology -> set
    standby_pending: dict = field(default_factory=dict)     # streams: standby tasks pending revocation
    server_assignor: str | None = None                      # consumer groups: ConsumerGroupHeartbeat serverAssignor

    def snapshot(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state,
                tuple(sorted((t, tuple(sorted(p.items()))) for t, p in self.assigned.items() if p)),
                tuple(sorted((t, tuple(sorted(p.items()))) for t, p in self.pending_revocation.items() if p)),
                tuple(sorted((t, tuple(sorted(p))) for t, p in self.standby.items() if p)),
                tuple(sorted((t, tuple(sorted(p))) for t, p in self.standby_pending.items() if p)))

    def owned(self):
        """(topic, partition) pairs the member still holds: assigned plus pending revocation."""
        for topic, parts in self.assigned.items():
            for p in parts:
                yield topic, p
        for topic, parts in self.pending_revocation.items():
            for p in parts:
                yield topic, p


def reconcile(member: Member, target_epoch: int, target: dict, held_by_others: set, acked: bool,
              states=(STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS)) -> None:
    """``CurrentAssignmentBuilder``: move ``member`` one step towards ``target`` at ``target_epoch``.

    Partitions no longer in the target are revoked first (state UNREVOKED, member epoch kept) until the member
    acknowledges; then the member moves to the target epoch, gets the target partitions nobody else holds (new
    ones carry the target epoch as assignment epoch, kept ones keep theirs) and stays UNRELEASED while some are
    still held by others.
    """
    stable, unrevoked, unreleased = states
    if member.state == unrevoked:
        if not acked:
            return
        member.pending_revocation = {}
    elif member.member_epoch == target_epoch and member.state == stable:
        return
    kept: dict = {}
    revoke: dict = {}
    for topic, parts in member.assigned.items():
        wanted = target.get(topic, ())
        for p, epoch in parts.items():
            (kept if p in wanted else revoke).setdefault(topic, {})[p] = epoch
    if revoke:
        member.previous_member_epoch = member.member_epoch
        member.assigned = kept
        member.pending_revocation = revoke
        member.state = unrevoked
        return
    missing = False
    for topic, wanted in target.items():
        have = kept.setdefault(topic, {})
        for p in wanted:
            if p in have:
                continue
            if (topic, p) in held_by_others:
                missing = True
            else:
                have[p] = target_epoch
    member.previous_member_epoch = member.member_epoch
    member.member_epoch = target_epoch
    member.assigned = {t: p for t, p in kept.items() if p}
    member.pending_revocation = {}
    member.state = unreleased if missing else stable


def in_record_order(assignment: dict) -> dict:
    """A target as its records list it (topic or subtopology ids sorted, partitions ascending): the order in
    which the coordinator's in-memory assignment is handed to the assignor as the current assignment."""
    return {t: sorted(p) for t, p in sorted(assignment.items()) if p}


class AssignorFailed(RuntimeError):
    """Kafka's assignor rejected what the simulator fed it: a simulator bug, never silently worked around."""


def run_assignor(group_id: str, name: str, case_input: dict) -> dict:
    """``offsets_audit.assignors.run(name, case_input)``'s ``members``; an error result raises."""
    from offsets_audit.assignors import run

    out = run(name, case_input)
    if out.get("error") is not None:
        raise AssignorFailed(f"group {group_id}: assignor {name!r} failed on the simulated input: "
                             f"{out['error']}: {out.get('message')}")
    return out["members"]


class SimulatedModernGroup:
    """Epoch bookkeeping shared by consumer, share and streams groups."""

    kind = "consumer"
    assignor = "uniform"
    # Whether a joining member is in the group's member table when its own heartbeat computes the target: a share
    # group's heartbeat puts the new member into the table before the assignor runs, and its records put it again
    # after (that put checks the load at the new size); a consumer or streams group's heartbeat adds it on top of
    # the table, its records replayed after the assignor ran.
    joiner_in_table = False

    def __init__(self, group_id: str, topics: dict, interval_ms: int):
        self.group_id = group_id
        self.topics = topics                       # topic id -> Topic (the cluster's metadata image)
        self.interval_ms = interval_ms
        self.group_epoch = INITIAL_GROUP_EPOCH
        self.assignment_epoch = INITIAL_GROUP_EPOCH if self.kind == "streams" else 0
        self.assignment_ms = 0
        self.metadata_hash = 0
        self.members: dict = {}
        self.target: dict = {}
        self.created = False
        self.deleted = False
        self.force_early_assignment = False
        self.pending_faults: set = set()
        # the group's ``members`` TimelineHashMap: keys in insertion order and a capacity that never shrinks
        self.table: list = []
        self.table_capacity = 2

    def wrong_assignment(self, new_target: dict) -> dict | None:
        """Fault: move one partition from the fullest member to the emptiest one, unbalancing the target."""
        ids = sorted(new_target, key=lambda m: (-sum(len(p) for p in new_target[m].values()), m))
        if len(ids) < 2:
            return None
        donor, receiver = ids[0], ids[-1]
        for topic in sorted(new_target[donor]):
            parts = new_target[donor][topic]
            if parts and self.topics[topic].name in self.members[receiver].subscribed_topics:
                p = min(parts)
                parts.discard(p)
                new_target[receiver].setdefault(topic, set()).add(p)
                self.pending_faults.discard("wrong_assignment")
                return {"kind": "wrong_assignment", "member_id": receiver, "topic": self.topics[topic].name,
                        "topic_partition": p, "detail": f"partition moved from {donor} to {receiver}"}
        return None

    # -- the member table ---------------------------------------------------------------------------------------
    def table_add(self, member_id: str) -> None:
        """A member record replayed: the key enters the ``TimelineHashMap`` (which doubles past 0.75 load)."""
        if member_id not in self.table:
            self.table_capacity = timeline_grow(self.table_capacity, len(self.table))
            self.table.append(member_id)

    def table_remove(self, member_id: str) -> None:
        if member_id in self.table:
            self.table.remove(member_id)

    def assignor_member_order(self) -> list:
        """``TargetAssignmentBuilder``'s member iteration: the ``TimelineHashMap`` of the members already replayed,
        then the member this heartbeat adds (its records are replayed after the assignor ran)."""
        present = set(self.table)
        return timeline_order(self.table, self.table_capacity) + hashmap_order(
            [m for m in self.members if m not in present])

    def partition_case(self, order: list, assignable: dict | None = None) -> dict:
        """The consumer / share assignor input (the golden layout, ``tests/golden/README.md``) as the coordinator
        builds it."""
        by_name = {t.name: t for t in self.topics.values()}
        subscriptions = [tuple(self.members[m].subscribed_topics) for m in order]
        names = set().union(*map(set, subscriptions)) if subscriptions else set()
        homogeneous = all(set(s) == names for s in subscriptions)
        members = []
        for member_id, subscribed in zip(order, subscriptions):
            m = self.members[member_id]
            members.append({
                "member_id": member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "subscribed_topic_names": list(subscribed),
                # the ids as the coordinator's TopicIds view iterates them: over the member's names set
                "subscribed_topic_ids": [by_name[n].topic_id for n in subscription_iteration_order(
                    {"subscribed_topic_names": subscribed}, None) if n in by_name],
                "current_assignment": in_record_order(self.target.get(member_id, {})),
            })
        topics = [{"id": by_name[n].topic_id, "name": n, "partitions": by_name[n].partitions, "partition_racks": None}
                  for n in sorted(names) if n in by_name]
        return {"subscription_type": "HOMOGENEOUS" if homogeneous else "HETEROGENEOUS", "topics": topics,
                "members": members, "assignable_partitions": assignable, "subscribed_topic_order": "topic_ids"}

    # -- helpers ----------------------------------------------------------------------------------------------
    def subscribed_names(self) -> set:
        names = set()
        for m in self.members.values():
            names.update(m.subscribed_topics)
        return names

    def compute_hash(self) -> int:
        by_name = {t.name: {"topic_id": t.topic_id, "name": t.name, "partitions": t.partitions}
                   for t in self.topics.values()}
        return compute_metadata_hash(self.subscribed_names(), by_name.values())

    def held_by_others(self, member_id: str) -> set:
        held = set()
        for other in self.members.values():
            if other.member_id != member_id:
                held.update(other.owned())
        return held

    def settled(self, member: Member) -> bool:
        return (member.member_epoch == self.assignment_epoch and member.state in (STABLE, STREAMS_STABLE)
                and self.group_epoch == self.assignment_epoch)

    def assignment_due(self, now: int) -> bool:
        if self.group_epoch <= self.assignment_epoch:
            return False
        if self.force_early_assignment:
            return True
        return self.assignment_ms == 0 or now >= self.assignment_ms + self.interval_ms

    # -- record builders overridden per kind ------------------------------------------------------------------
    # Each kind writes its own record types with its own fields, as Kafka's GroupCoordinatorRecordHelpers has one
    # helper per kind; the shared parts live in simulate.records.
    def member_record(self, member):
        return R.consumer_member_metadata(self.group_id, member)

    def metadata_record(self):
        return R.consumer_group_metadata(self.group_id, self.group_epoch, self.metadata_hash)

    def target_member_record(self, member_id):
        return R.consumer_target_member(self.group_id, member_id, self.target.get(member_id, {}))

    def target_metadata_record(self):
        return R.consumer_target_metadata(self.group_id, self.assignment_epoch, self.assignment_ms)

    def current_record(self, member):
        return R.consumer_current_assignment(self.group_id, member)

    member_record_types = (RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                           RecordType.CONSUMER_GROUP_MEMBER_METADATA)
    group_record_types: tuple[RecordType, ...] = (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                                                 RecordType.CONSUMER_GROUP_METADATA)

    def preferred_assignor(self) -> str:
        """``ConsumerGroup.computePreferredServerAssignor``: the ``serverAssignor`` most members name, else the
        broker's first ``group.consumer.assignors`` entry (``uniform``)."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not counts:
            return self.assignor
        best = max(counts.values())
        return sorted(name for name, c in counts.items() if c == best)[0]

    def compute_target(self) -> dict:
        order = self.assignor_member_order()
        members = run_assignor(self.group_id, self.preferred_assignor(), self.partition_case(order))
        return {m: {t: set(p) for t, p in members.get(m, {}).items() if p} for m in order}

    def reconcile_member(self, member: Member, acked: bool) -> None:
        reconcile(member, self.assignment_epoch, self.target.get(member.member_id, {}),
                  self.held_by_others(member.member_id), acked)

    # -- coordinator actions ----------------------------------------------------------------------------------
    def heartbeat(self, now: int, member_id: str, join: Member | None = None,
                  subscription: tuple | None = None, acked: bool = True) -> list:
        """One heartbeat: returns the records of its ``CoordinatorResult`` (possibly none)."""
        out = []
        bump = False
        if join is not None:
            self.members[join.member_id] = join
            out.append(self.member_record(join))
            bump = True
            self.created = True
        elif subscription is not None:
            member = self.members[member_id]
            member.subscribed_topics = tuple(subscription)
            out.append(self.member_record(member))
            bump = True
        new_hash = self.compute_hash()
        if new_hash != self.metadata_hash:
            self.metadata_hash = new_hash
            bump = True
        if bump:
            self.group_epoch += 1
            out.append(self.metadata_record())
        if join is not None and self.joiner_in_table:
            self.table_add(join.member_id)
        out.extend(self.maybe_assign(now))
        if join is not None and self.joiner_in_table:  # its records, replayed after the assignor, put it again
            self.table_capacity = timeline_grow(self.table_capacity, len(self.table))
        member = self.members[member_id]
        before = member.snapshot()
        self.reconcile_member(member, acked)
        if member.snapshot() != before or join is not None:
            out.append(self.current_record(member))
        if join is not None:
            self.table_add(join.member_id)
        return out

    def maybe_assign(self, now: int) -> list:
        if not self.assignment_due(now):
            return []
        early = self.force_early_assignment and self.assignment_ms and now < self.assignment_ms + self.interval_ms
        self.force_early_assignment = False
        new_target = self.compute_target()
        wrong = self.wrong_assignment(new_target) if "wrong_assignment" in self.pending_faults else None
        out = []
        for member_id in hashmap_order(list(new_target)):
            if new_target[member_id] != self.target.get(member_id):
                record = self.target_member_record_for(member_id, new_target)
                if wrong is not None and member_id == wrong["member_id"]:
                    record.fault = wrong
                out.append(record)
        self.target = new_target
        self.assignment_epoch = self.group_epoch
        self.assignment_ms = now
        meta = self.target_metadata_record()
        if early:
            meta.fault = {"kind": "early_assignment",
                          "detail": f"target assignment computed before the {self.interval_ms} ms interval passed"}
        out.append(meta)
        return out

    def target_member_record_for(self, member_id, new_target):
        saved = self.target
        self.target = new_target
        try:
            return self.target_member_record(member_id)
        finally:
            self.target = saved

    def remove_member(self, now: int, member_id: str) -> list:
        """Leave (epoch -1) or session timeout: member tombstones, then the group epoch bump."""
        self.members.pop(member_id)
        self.target.pop(member_id, None)
        self.table_remove(member_id)
        out = R.member_tombstones(self.group_id, member_id, self.member_record_types)
        self.metadata_hash = self.compute_hash()
        self.group_epoch += 1
        out.append(self.metadata_record())
        return out

    def delete_group(self) -> list:
        """DeleteGroups of an empty group: tombstones of every group-level record."""
        self.deleted = True
        return R.group_tombstones(self.group_id, self.group_record_types)

    def state(self) -> dict:
        members = {}
        for m in self.members.values():
            entry = {"member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
                     "state": m.state, "instance_id": m.instance_id,
                     "assigned": {t: sorted(p) for t, p in sorted(m.assigned.items()) if p},
                     "pending_revocation": {t: sorted(p) for t, p in sorted(m.pending_revocation.items()) if p}}
            if self.kind == "streams":
                entry["standby"] = {t: sorted(p) for t, p in sorted(m.standby.items()) if p}
                entry["standby_pending_revocation"] = {t: sorted(p) for t, p in sorted(m.standby_pending.items()) if p}
            members[m.member_id] = entry
        return {
            "type": self.kind, "exists": not self.deleted, "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch, "assignment_timestamp": self.assignment_ms,
            "members": members,
        }
