"""The simulator's KIP-848 consumer group: ``ConsumerGroup`` and the consumer heartbeat path of
``GroupMetadataManager`` (static members leave with epoch -2 and come back under a new member id)."""

from __future__ import annotations

import offsets_audit.simulate.records as R
from offsets_audit.simulate.modern import LEAVE_GROUP_STATIC_MEMBER_EPOCH, Member, SimulatedModernGroup


class SimulatedConsumerGroup(SimulatedModernGroup):
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
