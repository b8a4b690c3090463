"""The simulator's KIP-932 share group: same epochs as a consumer group, members get their target at once
(``SimpleAssignor``), and share-partition state initialization records."""

from __future__ import annotations

import offsets_audit.simulate.records as R
from offsets_audit.codec.record_types import RecordType
from offsets_audit.simulate.modern import STABLE, SimulatedModernGroup, run_assignor


class SimulatedShareGroup(SimulatedModernGroup):
    """KIP-932 share group: members take their target assignment at once (no revocation protocol)."""

    kind = "share"
    assignor = "simple"
    joiner_in_table = True
    # The record types this kind's tombstones cover.
    member_record_types = (RecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                           RecordType.SHARE_GROUP_MEMBER_METADATA)
    group_record_types = (RecordType.SHARE_GROUP_STATE_PARTITION_METADATA, RecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                          RecordType.SHARE_GROUP_METADATA)

    def __init__(self, group_id, topics, interval_ms):
        super().__init__(group_id, topics, interval_ms)
        self.initialized: dict = {}   # topic id -> partitions whose share state exists

    # Record builders: this kind's record types (one helper per kind, as in SimulatedModernGroup).
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
