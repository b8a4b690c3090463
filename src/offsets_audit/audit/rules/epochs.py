"""Epoch invariants of modern groups (KIP-848, KIP-1071, KIP-1263).

Kafka's coordinator only ever moves a group epoch forward; the target assignment answers a group
epoch (so it can never be ahead of it); a member reaches at most the target assignment epoch; the
previous epoch it stores is the epoch it had before; every assigned partition carries the epoch at
which it was assigned (``assignmentEpochs``), never later than the member's own epoch.

Groups converted from classic (and back) keep the classic generation as their epoch, so the new-group rules
skip them (``GroupView.converted``: the old group's tombstones and the new group's records in one batch).
"""
from __future__ import annotations

from ..model import Event, kafka_version_at_least
from .base import LEAVE_EPOCHS, GroupView, RuleFamily


class EpochRules(RuleFamily):
    family = "epochs"

    def on_event(self, ev: Event, view: GroupView) -> None:
        handler = getattr(self, "_" + (ev.event or ""), None)
        if handler is not None:
            handler(ev, view)

    def _group_epoch_bumped(self, ev: Event, view: GroupView) -> None:
        old = ev.get("old", view.group_epoch)
        new = ev.get("new", 0)
        if view.exists and old and new < old:
            self.ctx.emit("group_epoch_decreased", view, ev.timestamp,
                          f"group epoch went from {old} to {new} without a group deletion in between",
                          [view.bumps[old].where if old in view.bumps else None, ev.where],
                          {"old_group_epoch": old, "new_group_epoch": new})
        if view.created_in_log and not view.converted and not old and view.assignment_count == 0:
            expected = self._first_group_epochs(view)
            if new not in expected:
                self.ctx.emit("new_group_epoch_unexpected", view, ev.timestamp,
                              f"first group epoch of a new group is {new}; {self._version_text()} writes "
                              f"{' or '.join(map(str, expected))} (KIP-1263: epoch 1 is the empty initial assignment)",
                              [ev.where], {"group_epoch": new, "expected": expected[0] if len(expected) == 1 else expected,
                                           "kafka_version": self.ctx.kafka_version or "unknown"})

    def _target_assignment_computed(self, ev: Event, view: GroupView) -> None:
        epoch = int(ev.get("assignment_epoch", 0))
        group_epoch = int(ev.get("group_epoch", view.group_epoch))
        if epoch > group_epoch:
            self.ctx.emit("assignment_epoch_ahead_of_group_epoch", view, ev.timestamp,
                          f"target assignment epoch {epoch} is ahead of group epoch {group_epoch}",
                          [ev.where, view.bumps[group_epoch].where if group_epoch in view.bumps else None],
                          {"assignment_epoch": epoch, "group_epoch": group_epoch})
        if (view.created_in_log and not view.converted and view.assignment_count == 0
                and self._first_group_epochs(view) == (2,) and epoch < 2):
            self.ctx.emit("new_group_epoch_unexpected", view, ev.timestamp,
                          f"first computed target assignment of a new group has epoch {epoch}; "
                          f"{self._version_text()} keeps epoch 1 for the empty initial assignment and computes the "
                          "first at epoch >= 2",
                          [ev.where], {"assignment_epoch": epoch, "expected_at_least": 2,
                                       "kafka_version": self.ctx.kafka_version})

    def _first_group_epochs(self, view: GroupView) -> tuple:
        """First group epoch(s) a new modern group gets: 2 from Kafka 4.3 (KIP-1263), 1 before; either when the
        brokers' version is not configured (``broker.kafka_version`` null). Streams groups (KIP-1071) start at 2
        on every release where they are generally available (4.2 writes 2 too); 4.1's early-access streams
        groups may start at either."""
        version = self.ctx.kafka_version
        if not version:
            return (1, 2)
        if view.group_type == "streams":
            return (2,) if kafka_version_at_least(version, 4, 2) else (1, 2)
        return (2,) if kafka_version_at_least(version, 4, 3) else (1,)

    def _version_text(self) -> str:
        version = self.ctx.kafka_version
        return f"Kafka {version} (broker.kafka_version)" if version else "Kafka (version unknown: broker.kafka_version is not set)"

    def _member_epoch_advanced(self, ev: Event, view: GroupView) -> None:
        member_epoch = int(ev.get("member_epoch", 0))
        previous = int(ev.get("previous_member_epoch", -1))
        old = ev.details.get("old_member_epoch")
        if member_epoch in LEAVE_EPOCHS:
            return
        if member_epoch > view.assignment_epoch and (view.assignment_count or view.created_in_log):
            self.ctx.emit("member_epoch_ahead_of_assignment_epoch", view, ev.timestamp,
                          f"member {ev.member_id} is at epoch {member_epoch} but the target assignment is at "
                          f"epoch {view.assignment_epoch}",
                          [ev.where, view.last_assignment.where if view.last_assignment else None],
                          {"member_id": ev.member_id, "member_epoch": member_epoch,
                           "assignment_epoch": view.assignment_epoch})
        problem = None
        if previous > member_epoch:
            problem = f"previous epoch {previous} is above its epoch {member_epoch}"
        elif (old is not None and old not in LEAVE_EPOCHS and old > 0 and member_epoch != old
              and previous != old and ev.member_id in view.members):
            problem = f"moved from epoch {old} to {member_epoch} but stored previous epoch {previous}"
        if problem:
            member = view.members.get(ev.member_id)
            self.ctx.emit("previous_member_epoch_inconsistent", view, ev.timestamp,
                          f"member {ev.member_id}: {problem}",
                          [member.evidence if member else None, ev.where],
                          {"member_id": ev.member_id, "member_epoch": member_epoch,
                           "previous_member_epoch": previous, "old_member_epoch": old})

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        # A verdict on a member reads that member alone and is reported once (its key): the members no event of
        # the batch changed were judged at an earlier batch end as they are now.
        for m in view.changed_members():
            if m.member_epoch in LEAVE_EPOCHS:
                continue
            if not (m.pending or m.tasks or m.tasks_pending) and (
                    not m.assigned or max(m.assigned.values()) <= m.member_epoch):
                continue  # the common case (a consumer member, nothing ahead), told without copying what it holds
            held = dict(m.assigned)
            held.update(m.pending)
            for role, tasks in list(m.tasks.items()) + list(m.tasks_pending.items()):
                held.update({(f"{role}:{k[0]}", k[1]): e for k, e in tasks.items()})
            ahead = sorted((tp, e) for tp, e in held.items() if e > m.member_epoch)
            key = ("epoch_ahead", m.member_id, m.member_epoch)
            if ahead:
                self.ctx.emit("partition_epoch_ahead_of_member_epoch", view, last.timestamp,
                              f"member {m.member_id} at epoch {m.member_epoch} holds {len(ahead)} partition(s) "
                              f"assigned at a later epoch, e.g. {ahead[0][0][0]}-{ahead[0][0][1]} at "
                              f"{ahead[0][1]}",
                              [m.evidence], {"member_id": m.member_id, "member_epoch": m.member_epoch,
                                             "partitions": [[t, p, e] for (t, p), e in ahead[:50]]}, key=key)
