"""The simulator's KIP-1071 streams group: topology record (stateful subtopologies with changelog topics) and the
streams ``CurrentAssignmentBuilder`` rules for active and standby tasks (one task never twice on one process)."""

from __future__ import annotations

import offsets_audit.simulate.records as R
from offsets_audit.assignors.java_order import hashmap_order
from offsets_audit.codec.record_types import RecordType
from offsets_audit.simulate.modern import (
    STREAMS_STABLE,
    UNRELEASED_TASKS,
    UNREVOKED_TASKS,
    Member,
    SimulatedModernGroup,
    in_record_order,
    run_assignor,
)


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


class SimulatedStreamsGroup(SimulatedModernGroup):
    """KIP-1071 streams group: a topology of subtopologies, tasks = partitions of their source topics.

    A stateful subtopology has a changelog topic (``<group>-store-<subtopology>-changelog``, created with the
    source's partition count); its tasks get ``num_standby_replicas`` standby tasks from the ``sticky`` assignor.
    """

    kind = "streams"
    assignor = "sticky"
    # The record types this kind's tombstones cover.
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
        """The ``sticky`` input (the golden streams layout, ``tests/golden/README.md``); task offsets come from
        heartbeats and the simulated clients report none."""
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
