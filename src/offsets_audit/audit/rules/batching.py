"""Assignment batching (KIP-1263, ``group.<type>.assignment.interval.ms``).

Kafka computes the next target assignment only when ``now >= AssignmentTimestamp + interval`` (or when
the previous timestamp is 0, or the interval is 0: ``GroupMetadataManager.canComputeNextTargetAssignment``),
and stores the time the computation finished as the new ``AssignmentTimestamp``. A metadata record
that repeats the previous timestamp is not a new computation (the streams refinement step only bumps
the epoch). The first assignment of a new group is computed at once and carries the real time; when
the last member leaves (or all are fenced) Kafka writes the new epoch with timestamp 0, as for a new
group, so the next assignment is not delayed.
"""
from __future__ import annotations

from ..model import Event, kafka_version_at_least
from .base import GroupView, RuleFamily


class BatchingRules(RuleFamily):
    family = "batching"

    def on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event != "target_assignment_computed":
            return
        ts = int(ev.get("assignment_timestamp", 0))
        epoch = int(ev.get("assignment_epoch", 0))
        previous = view.last_assignment
        previous_ts = view.assignment_timestamp if previous is not None else 0
        interval = self.ctx.assignment_interval_ms(view.group_id, view.group_type)
        modern_broker = kafka_version_at_least(self.ctx.kafka_version, 4, 3)

        if ts == 0:
            legal = (not modern_broker or view.converted or previous is None or not view.members
                     or (previous is not None and previous_ts == 0 and not view.created_in_log))
            if not legal:
                self.ctx.emit("assignment_timestamp_zero_unexpected", view, ev.timestamp,
                              f"target assignment at epoch {epoch} has AssignmentTimestamp 0 although the group "
                              "already had a timed assignment on a Kafka >= 4.3 broker",
                              [previous.where if previous else None, ev.where],
                              {"assignment_epoch": epoch, "previous_assignment_timestamp": previous_ts})
            return

        if (previous is not None and previous_ts and ts != previous_ts and interval
                and ts < previous_ts + interval - self.ctx.threshold("assignment_interval_violated", "tolerance_ms")):
            self.ctx.emit("assignment_interval_violated", view, ev.timestamp,
                          f"target assignment at epoch {epoch} computed {ts - previous_ts} ms after the previous "
                          f"one (epoch {view.assignment_epoch}); the assignment interval is {interval} ms",
                          [previous.where, ev.where],
                          {"assignment_epoch": epoch, "assignment_timestamp": ts,
                           "previous_assignment_epoch": view.assignment_epoch,
                           "previous_assignment_timestamp": previous_ts, "gap_ms": ts - previous_ts,
                           "assignment_interval_ms": interval})

        bump = view.bumps.get(epoch)
        tolerance = self.ctx.threshold("assignment_timestamp_before_group_epoch_bump", "tolerance_ms")
        if (bump is not None and bump.timestamp is not None and ev.timestamp is not None
                and bump.timestamp != ev.timestamp and ts != previous_ts and ts < bump.timestamp - tolerance):
            self.ctx.emit("assignment_timestamp_before_group_epoch_bump", view, ev.timestamp,
                          f"target assignment for group epoch {epoch} says it was computed at {ts}, "
                          f"{bump.timestamp - ts} ms before that epoch was written",
                          [bump.where, ev.where],
                          {"assignment_epoch": epoch, "assignment_timestamp": ts,
                           "group_epoch_bump_time": bump.timestamp})

        tolerance = self.ctx.threshold("assignment_timestamp_after_record_time", "tolerance_ms")
        if ev.timestamp is not None and ts > ev.timestamp + tolerance:
            self.ctx.emit("assignment_timestamp_after_record_time", view, ev.timestamp,
                          f"AssignmentTimestamp {ts} is {ts - ev.timestamp} ms after the record's own append time",
                          [ev.where], {"assignment_epoch": epoch, "assignment_timestamp": ts,
                                       "record_timestamp": ev.timestamp})
