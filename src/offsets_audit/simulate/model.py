"""The simulator's group coordinator: per-group state machines that emit the records Kafka would write.

* ``ConsumerGroup`` mirrors the KIP-848 heartbeat path of ``GroupMetadataManager``: a join, a subscription change
  or a metadata-hash change bumps the group epoch; a new target assignment is computed only when the group epoch is
  ahead of the assignment epoch and the KIP-1263 assignment interval has passed since the last one (the first one is
  immediate); then ``CurrentAssignmentBuilder`` reconciles the heartbeating member (STABLE /
  UNREVOKED_PARTITIONS / UNRELEASED_PARTITIONS, per-partition assignment epochs).
* ``ShareGroup`` (KIP-932): same epochs, members get their target at once.
* ``StreamsGroup`` (KIP-1071): topology record (stateful subtopologies with changelog topics), the streams
  ``CurrentAssignmentBuilder`` rules for active and standby tasks (one task never twice on one process).

Target assignments come from Kafka's own assignors (``offsets_audit.assignors.run``: ``uniform`` or ``range`` for
consumer groups as the members' ``serverAssignor`` says, ``simple`` for share groups, ``sticky`` for streams
groups), fed what ``TargetAssignmentBuilder`` feeds them: the members in the iteration order of the group's
``TimelineHashMap`` followed by the member the heartbeat adds, each member's current target in record order.
* ``ClassicGroup``: JoinGroup/SyncGroup generations stored as ``GroupMetadataValue`` with the embedded consumer
  protocol subscription/assignment, client-side range/roundrobin assignment.

Record order inside one append follows the golden histories (real coordinator output).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collections import Counter

from offsets_audit.assignors.inputs import timeline_grow, timeline_order
from offsets_audit.assignors.java_order import hashmap_order
from offsets_audit.assignors.metadata_hash import compute_metadata_hash
import offsets_audit.simulate.records as R
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


def reconcile_streams(member: Member, target_epoch: int, target_active: dict, target_standby: dict,
                      active_process: dict, standby_processes: dict, acked: bool) -> None:
    """Streams ``CurrentAssignmentBuilder``: move ``member`` one step towards its target tasks.

    ``active_process`` maps a task to the process of the *other* member holding it active (assigned or pending
    revocation), ``standby_processes`` a task to the processes of the other members holding it as a standby.
    An active task is granted once nobody else runs it and no other member of this process holds it as a
    standby; a standby task once no other member of this process holds it in any role. The member's own task
    changes role in place: a demoted active task becomes a standby at once (the active part still waits for
    the revocation ack), a promoted standby stays a standby until the active task is granted.
    """
    if member.state == UNREVOKED_TASKS:
        if not acked:
            return
        member.pending_revocation = {}
        member.standby_pending = {}
    elif member.member_epoch == target_epoch and member.state == STREAMS_STABLE:
        return
    process = member.process_id
    cur_active, cur_standby = member.assigned, member.standby
    kept_a: dict = {}
    revoke_a: dict = {}
    grant_a: dict = {}
    unreleased = False
    for sub, parts in cur_active.items():
        wanted = target_active.get(sub, ())
        for p, epoch in parts.items():
            (kept_a if p in wanted else revoke_a).setdefault(sub, {})[p] = epoch
    for sub, parts in target_active.items():
        for p in parts:
            if p in kept_a.get(sub, ()):
                continue
            if (sub, p) in active_process or process in standby_processes.get((sub, p), ()):
                unreleased = True
            else:
                grant_a.setdefault(sub, {})[p] = target_epoch
    kept_s: dict = {}
    revoke_s: dict = {}
    grant_s: dict = {}
    for sub, parts in cur_standby.items():
        wanted = target_standby.get(sub, ())
        for p in parts:
            (kept_s if p in wanted else revoke_s).setdefault(sub, set()).add(p)
    for sub, parts in target_standby.items():
        for p in parts:
            if p in kept_s.get(sub, ()):
                continue
            own_active = p in cur_active.get(sub, ())
            if (active_process.get((sub, p)) == process and not own_active) \
                    or process in standby_processes.get((sub, p), ()):
                unreleased = True
            elif own_active:   # demotion: the standby is granted in the same step
                kept_s.setdefault(sub, set()).add(p)
            else:
                grant_s.setdefault(sub, set()).add(p)
    promoted = [(sub, p) for sub, parts in cur_standby.items() for p in parts if p in target_active.get(sub, ())]
    for sub, p in promoted:
        if p in revoke_s.get(sub, ()):
            revoke_s[sub].discard(p)
    revoke_s = {sub: parts for sub, parts in revoke_s.items() if parts}
    to_revoke = bool(revoke_a) or bool(revoke_s)
    for sub, p in promoted:
        if to_revoke or p not in grant_a.get(sub, ()):
            kept_s.setdefault(sub, set()).add(p)
    member.previous_member_epoch = member.member_epoch
    if to_revoke:
        member.state = UNREVOKED_TASKS
        member.assigned = {sub: parts for sub, parts in kept_a.items() if parts}
        member.standby = {sub: parts for sub, parts in kept_s.items() if parts}
        member.pending_revocation = revoke_a
        member.standby_pending = revoke_s
        return
    for sub, parts in grant_a.items():
        kept_a.setdefault(sub, {}).update(parts)
    for sub, parts in grant_s.items():
        kept_s.setdefault(sub, set()).update(parts)
    member.member_epoch = target_epoch
    member.assigned = {sub: parts for sub, parts in kept_a.items() if parts}
    member.standby = {sub: parts for sub, parts in kept_s.items() if parts}
    member.pending_revocation = {}
    member.standby_pending = {}
    member.state = UNRELEASED_TASKS if unreleased else STREAMS_STABLE


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


class ModernGroup:
    """Epoch bookkeeping shared by consumer, share and streams groups."""

    kind = "consumer"
    assignor = "uniform"

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
        """The consumer / share assignor input (golden README section 4) as the coordinator builds it."""
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
                "subscribed_topic_ids": [by_name[n].topic_id for n in subscribed if n in by_name],
                "current_assignment": in_record_order(self.target.get(member_id, {})),
            })
        topics = [{"id": by_name[n].topic_id, "name": n, "partitions": by_name[n].partitions, "partition_racks": None}
                  for n in sorted(names) if n in by_name]
        return {"subscription_type": "HOMOGENEOUS" if homogeneous else "HETEROGENEOUS", "topics": topics,
                "members": members, "assignable_partitions": assignable}

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
    group_record_types = (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, RecordType.CONSUMER_GROUP_METADATA)

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
        out.extend(self.maybe_assign(now))
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


class ConsumerGroup(ModernGroup):
    """KIP-848 consumer group (``ConsumerGroup`` + the consumer heartbeat path of ``GroupMetadataManager``)."""

    kind = "consumer"

    def static_leave(self, now: int, member_id: str) -> list:
        """A static member leaves temporarily: it keeps its assignment under member epoch -2."""
        member = self.members[member_id]
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
        member.assigned = {t: {p: 0 for p in parts} for t, parts in member.assigned.items()}
        return [self.current_record(member)]

    def static_rejoin(self, now: int, old_member_id: str, new: Member) -> list:
        """The static member comes back with a new member id: it takes over the old member's target and
        assignment without a group epoch bump."""
        old = self.members.pop(old_member_id)
        target = self.target.pop(old_member_id, {})
        self.table_remove(old_member_id)
        out = R.member_tombstones(self.group_id, old_member_id, self.member_record_types)
        new.assigned = {t: dict(p) for t, p in old.assigned.items()}
        self.members[new.member_id] = new
        self.table_add(new.member_id)
        self.target[new.member_id] = target
        out.append(self.member_record(new))
        out.append(self.target_member_record(new.member_id))
        out.append(self.current_record(new))
        before = new.snapshot()
        self.reconcile_member(new, True)
        if new.snapshot() != before:
            out.append(self.current_record(new))
        return out


class ShareGroup(ModernGroup):
    """KIP-932 share group: members take their target assignment at once (no revocation protocol)."""

    kind = "share"
    assignor = "simple"
    member_record_types = (RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                           RecordType.SHARE_GROUP_MEMBER_METADATA)
    group_record_types = (RecordType.SHARE_GROUP_STATE_PARTITION_METADATA, RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                          RecordType.SHARE_GROUP_METADATA)

    def __init__(self, group_id, topics, interval_ms):
        super().__init__(group_id, topics, interval_ms)
        self.initialized: dict = {}   # topic id -> partitions whose share state exists

    def member_record(self, member):
        return R.share_member_metadata(self.group_id, member)

    def metadata_record(self):
        return R.share_group_metadata(self.group_id, self.group_epoch, self.metadata_hash)

    def target_member_record(self, member_id):
        return R.share_target_member(self.group_id, member_id, self.target.get(member_id, {}))

    def target_metadata_record(self):
        return R.share_target_metadata(self.group_id, self.assignment_epoch, self.assignment_ms)

    def current_record(self, member):
        return R.share_current_assignment(self.group_id, member)

    def compute_target(self) -> dict:
        """``simple`` over every subscribed topic; only initialized share partitions are assignable."""
        order = self.assignor_member_order()
        assignable = {tid: sorted(parts) for tid, parts in sorted(self.initialized.items())}
        members = run_assignor(self.group_id, self.assignor, self.partition_case(order, assignable))
        return {m: {t: set(p) for t, p in members.get(m, {}).items() if p} for m in order}

    def reconcile_member(self, member, acked):
        target = self.target.get(member.member_id, {})
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.assigned = {t: {p: self.assignment_epoch for p in parts} for t, parts in target.items() if parts}
        member.state = STABLE

    def uninitialized_topics(self) -> list:
        out = []
        for tid, topic in sorted(self.topics.items()):
            if topic.name in self.subscribed_names() and tid not in self.initialized:
                out.append({"topicId": tid, "topicName": topic.name, "partitions": list(range(topic.partitions))})
        return out

    def initialize(self, pending: list) -> list:
        """The share coordinator finished initializing ``pending``: record it and bump the group epoch so the
        next heartbeat assigns the new partitions."""
        for entry in pending:
            self.initialized[entry["topicId"]] = entry["partitions"]
        initialized = [{"topicId": tid, "topicName": self.topics[tid].name, "partitions": parts}
                       for tid, parts in sorted(self.initialized.items())]
        self.group_epoch += 1
        return [R.share_state_partition_metadata(self.group_id, [], initialized), self.metadata_record()]


class StreamsGroup(ModernGroup):
    """KIP-1071 streams group: a topology of subtopologies, tasks = partitions of their source topics.

    A stateful subtopology has a changelog topic (``<group>-store-<subtopology>-changelog``, created with the
    source's partition count); its tasks get ``num_standby_replicas`` standby tasks from the ``sticky`` assignor.
    """

    kind = "streams"
    assignor = "sticky"
    member_record_types = (RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER,
                           RecordType.STREAMS_GROUP_MEMBER_METADATA)
    group_record_types = (RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, RecordType.STREAMS_GROUP_METADATA,
                          RecordType.STREAMS_GROUP_TOPOLOGY)

    def __init__(self, group_id, topics, interval_ms, subtopologies: dict, changelogs: dict | None = None,
                 standby_replicas: int = 1):
        """``subtopologies``: subtopology id -> source topic name; ``changelogs``: subtopology id -> the
        changelog ``Topic`` of a stateful one (added to the metadata image the group sees)."""
        super().__init__(group_id, dict(topics), interval_ms)
        self.subtopologies = subtopologies
        self.changelogs = dict(changelogs or {})
        for topic in self.changelogs.values():
            self.topics[topic.topic_id] = topic
        self.standby_replicas = standby_replicas
        self.topology_epoch = 0
        self.standby_target: dict = {}
        self.created_ms = 0

    def tasks(self) -> dict:
        by_name = {t.name: t for t in self.topics.values()}
        return {sid: by_name[name].partitions for sid, name in self.subtopologies.items()}

    def subscribed_names(self) -> set:
        """``StreamsTopology.requiredTopics``: sources and changelogs (what the metadata hash covers)."""
        if not self.members:
            return set()
        return set(self.subtopologies.values()) | {t.name for t in self.changelogs.values()}

    def member_record(self, member):
        return R.streams_member_metadata(self.group_id, member, self.topology_epoch)

    def metadata_record(self):
        return R.streams_group_metadata(self.group_id, self.group_epoch, self.metadata_hash, self.topology_epoch,
                                        self.standby_replicas)

    def target_member_record(self, member_id):
        return R.streams_target_member(self.group_id, member_id, self.target.get(member_id, {}),
                                       self.standby_target.get(member_id, {}))

    def target_member_record_for(self, member_id, new_target):
        return R.streams_target_member(self.group_id, member_id, new_target[member_id][0], new_target[member_id][1])

    def target_metadata_record(self):
        return R.streams_target_metadata(self.group_id, self.assignment_epoch, self.assignment_ms)

    def current_record(self, member):
        return R.streams_current_assignment(self.group_id, member)

    def topology_record(self):
        subs = []
        for sid, name in sorted(self.subtopologies.items()):
            changelog = self.changelogs.get(sid)
            subs.append({"subtopologyId": sid, "sourceTopics": [name], "sourceTopicRegex": [],
                         "stateChangelogTopics": [] if changelog is None else [
                             {"name": changelog.name, "partitions": 0, "replicationFactor": -1, "topicConfigs": []}],
                         "repartitionSinkTopics": [], "repartitionSourceTopics": [], "copartitionGroups": []})
        return R.streams_topology(self.group_id, self.topology_epoch, subs)

    def assignor_case(self, order: list) -> dict:
        """The ``sticky`` input (golden README section 4, streams layout); task offsets come from heartbeats
        and the simulated clients report none."""
        members = []
        for member_id in order:
            m = self.members[member_id]
            members.append({
                "member_id": member_id, "instance_id": m.instance_id, "rack_id": None, "process_id": m.process_id,
                "client_tags": {}, "active_tasks": in_record_order(self.target.get(member_id, {})),
                "standby_tasks": in_record_order(self.standby_target.get(member_id, {})), "warmup_tasks": {},
                "task_offsets": {}, "task_end_offsets": {},
            })
        subtopologies = [{"subtopology_id": sid, "max_num_input_partitions": n, "stateful": sid in self.changelogs}
                         for sid, n in sorted(self.tasks().items())]
        return {"configs": {"num_standby_replicas": self.standby_replicas, "rack_aware_assignment_tags": []},
                "subtopologies": subtopologies, "members": members}

    def compute_target(self) -> dict:
        """Kafka's streams ``StickyTaskAssignor``: member id -> (active tasks, standby tasks)."""
        order = self.assignor_member_order()
        result = run_assignor(self.group_id, self.assignor, self.assignor_case(order))
        out = {}
        for member_id in order:
            tasks = result.get(member_id) or {}
            out[member_id] = ({s: set(p) for s, p in (tasks.get("active_tasks") or {}).items() if p},
                              {s: set(p) for s, p in (tasks.get("standby_tasks") or {}).items() if p})
        return out

    def maybe_assign(self, now):
        if not self.assignment_due(now):
            return []
        new = self.compute_target()
        out = []
        for member_id in hashmap_order(list(new)):
            old = (self.target.get(member_id), self.standby_target.get(member_id))
            if new[member_id] != old:
                out.append(self.target_member_record_for(member_id, new))
        self.target = {m: a for m, (a, s) in new.items()}
        self.standby_target = {m: s for m, (a, s) in new.items()}
        self.assignment_epoch = self.group_epoch
        self.assignment_ms = now
        out.append(self.target_metadata_record())
        return out

    def assignment_due(self, now):
        # streams.initial.rebalance.delay: the first assignment waits 3 s after the group was created
        if self.assignment_ms == 0 and now < self.created_ms + 3000:
            return False
        return super().assignment_due(now)

    def heartbeat(self, now, member_id, join=None, subscription=None, acked=True):
        out = []
        if join is not None and not self.created:
            self.created_ms = now
            self.members[join.member_id] = join
            self.created = True
            self.metadata_hash = self.compute_hash()
            self.group_epoch += 1
            out += [self.member_record(join), self.topology_record(), self.metadata_record()]
            join.member_epoch, join.state = self.assignment_epoch, STREAMS_STABLE
            out.append(self.current_record(join))
            self.table_add(join.member_id)
            return out
        if join is not None:
            join.state = STREAMS_STABLE
        return super().heartbeat(now, member_id, join, subscription, acked)

    def reconcile_member(self, member, acked):
        active_process: dict = {}
        standby_processes: dict = {}
        for other in self.members.values():
            if other.member_id == member.member_id:
                continue
            for tasks in (other.assigned, other.pending_revocation):
                for sub, parts in tasks.items():
                    for p in parts:
                        active_process[(sub, p)] = other.process_id
            for tasks in (other.standby, other.standby_pending):
                for sub, parts in tasks.items():
                    for p in parts:
                        standby_processes.setdefault((sub, p), set()).add(other.process_id)
        reconcile_streams(member, self.assignment_epoch, self.target.get(member.member_id, {}),
                          self.standby_target.get(member.member_id, {}), active_process, standby_processes, acked)

    def held_by_others(self, member_id):
        held = set()
        for other in self.members.values():
            if other.member_id != member_id:
                held.update(other.owned())
        return held

    def delete_group(self):
        self.deleted = True
        return R.group_tombstones(self.group_id, self.group_record_types)


@dataclass
class ClassicMember:
    member_id: str
    client_id: str
    topics: tuple
    instance_id: str | None = None
    assignment: dict = field(default_factory=dict)   # topic name -> sorted partitions


class ProtocolBytes:
    """Embedded consumer protocol payload, encoded by the writer with ``codec.encode_consumer_protocol``."""

    __slots__ = ("kind", "version", "data")

    def __init__(self, kind: str, version: int, data: dict):
        self.kind, self.version, self.data = kind, version, data

    def __eq__(self, other):
        return isinstance(other, ProtocolBytes) and (self.kind, self.version, self.data) == (
            other.kind, other.version, other.data)


def client_assignment(protocol: str, members: list, topics_by_name: dict) -> dict:
    """The consumer's own ``RangeAssignor`` / ``RoundRobinAssignor`` (classic protocol, run by the leader)."""
    out: dict[str, dict] = {m.member_id: {} for m in members}
    if protocol == "range":
        for name in sorted({t for m in members for t in m.topics}):
            if name not in topics_by_name:
                continue
            subs = sorted(m.member_id for m in members if name in m.topics)
            n = topics_by_name[name].partitions
            per, extra = divmod(n, len(subs))
            start = 0
            for i, mid in enumerate(subs):
                count = per + (1 if i < extra else 0)
                if count:
                    out[mid][name] = list(range(start, start + count))
                start += count
    else:
        ordered = sorted(members, key=lambda m: m.member_id)
        i = 0
        for name in sorted({t for m in members for t in m.topics}):
            if name not in topics_by_name:
                continue
            for p in range(topics_by_name[name].partitions):
                while name not in ordered[i % len(ordered)].topics:
                    i += 1
                out[ordered[i % len(ordered)].member_id].setdefault(name, []).append(p)
                i += 1
    return out


class ClassicGroup:
    """Classic (JoinGroup/SyncGroup) consumer group as ``ClassicGroup`` stores it in ``GroupMetadataValue``."""

    kind = "classic"

    def __init__(self, group_id: str, topics: dict, protocol: str):
        self.group_id = group_id
        self.topics_by_name = {t.name: t for t in topics.values()}
        self.protocol = protocol
        self.generation = 0
        self.leader = None
        self.members: dict = {}
        self.stable = False
        self.deleted = False

    def create(self, now: int) -> list:
        return [R.group_metadata(self.group_id, "", 0, None, None, now, [])]

    def complete_rebalance(self, state_ms: int) -> list:
        """SyncGroup from the leader: the new generation with every member's subscription and assignment."""
        self.generation += 1
        if not self.members:
            self.stable = False
            self.leader = None
            return [R.group_metadata(self.group_id, "consumer", self.generation, None, None, state_ms, [])]
        members = list(self.members.values())
        if self.leader not in self.members:
            self.leader = members[0].member_id
        assignment = client_assignment(self.protocol, members, self.topics_by_name)
        entries = []
        for m in members:
            m.assignment = assignment[m.member_id]
            entries.append({
                "memberId": m.member_id, "groupInstanceId": m.instance_id, "clientId": m.client_id,
                "clientHost": "localhost/127.0.0.1", "rebalanceTimeout": 30000, "sessionTimeout": 45000,
                "subscription": ProtocolBytes("subscription", 3, {
                    "topics": list(m.topics), "userData": None, "ownedPartitions": [], "generationId": -1,
                    "rackId": None}),
                "assignment": ProtocolBytes("assignment", 3, {
                    "assignedPartitions": [{"topic": t, "partitions": p} for t, p in m.assignment.items()],
                    "userData": None}),
            })
        self.stable = True
        return [R.group_metadata(self.group_id, "consumer", self.generation, self.protocol, self.leader,
                                 state_ms, entries)]

    def state(self) -> dict:
        return {"type": "classic", "exists": not self.deleted, "generation": self.generation,
                "protocol": self.protocol if self.members else None, "leader": self.leader,
                "members": {m.member_id: {"assigned": m.assignment} for m in self.members.values()}}
