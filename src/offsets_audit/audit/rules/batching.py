"""Assignment batching (KIP-1263, ``group.<type>.assignment.interval.ms``).

Kafka computes the next target assignment only when ``now >= AssignmentTimestamp + interval`` (or when
the previous timestamp is 0, or the interval is 0: ``GroupMetadataManager.canComputeNextTargetAssignment``),
and stores the time the computation finished as the new ``AssignmentTimestamp``. A metadata record
that repeats the previous timestamp is not a new computation (the streams refinement step only bumps
the epoch). The first assignment of a new group is computed at once and carries the real time; when
the last member leaves (or all are fenced) Kafka writes the new epoch with timestamp 0, as for a new
group, so the next assignment is not delayed.

The interval a group ran with is a group config (``consumer.assignment.interval.ms``), not a record. It is judged
against ``group_configs.assignment_interval``: a captured snapshot (``broker.group_configs``) or the config's
``broker.group_overrides`` make it known, and a gap below it is an ``assignment_interval_violated`` error. Without
them a group config may override the broker default unseen, so a group whose assignments come faster than that
default gets one ``assignment_interval_overridden`` info finding (its smallest gap) instead of an error per
assignment. Every finding names the configuration it was judged against and where that came from.
"""
from __future__ import annotations

from offsets_audit.group_configs import IntervalBasis, assignment_interval

from ..model import Event, EventKind, kafka_version_at_least
from .base import GroupView, RuleFamily


class BatchingRules(RuleFamily):
    family = "batching"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._basis: dict[tuple, IntervalBasis | None] = {}
        #: (gap, previous event, event, basis) of the smallest gap below an interval that is not known
        self._fastest: tuple | None = None
        self._fast_count = 0

    def _interval(self, view: GroupView) -> IntervalBasis | None:
        key = (view.group_id, view.group_type)
        if key not in self._basis:
            self._basis[key] = assignment_interval(self.ctx.settings.broker, view.group_id, view.group_type)
        return self._basis[key]

    def on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event != EventKind.TARGET_ASSIGNMENT_COMPUTED:
            return
        ts = int(ev.get("assignment_timestamp", 0))
        epoch = int(ev.get("assignment_epoch", 0))
        previous = view.last_assignment
        previous_ts = view.assignment_timestamp if previous is not None else 0
        basis = self._interval(view)
        interval = basis.interval_ms if basis is not None else None
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

        if (previous is not None and previous_ts and ts != previous_ts and basis is not None and interval
                and ts < previous_ts + interval - self.ctx.threshold("assignment_interval_violated", "tolerance_ms")):
            if not basis.known:
                gap = ts - previous_ts
                self._fast_count += 1
                if self._fastest is None or gap < self._fastest[0]:
                    self._fastest = (gap, previous, ev, basis, view.assignment_epoch, epoch)
            else:
                self.ctx.emit("assignment_interval_violated", view, ev.timestamp,
                              f"target assignment at epoch {epoch} computed {ts - previous_ts} ms after the previous "
                              f"one (epoch {view.assignment_epoch}); the assignment interval is {interval} ms "
                              f"(judged against {basis.source})",
                              [previous.where, ev.where],
                              {"assignment_epoch": epoch, "assignment_timestamp": ts,
                               "previous_assignment_epoch": view.assignment_epoch,
                               "previous_assignment_timestamp": previous_ts, "gap_ms": ts - previous_ts,
                               "assignment_interval_ms": interval, "judged_against": basis.source})

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

    def finish(self, view: GroupView) -> None:
        if self._fastest is None:
            return
        gap, previous, ev, basis, previous_epoch, epoch = self._fastest
        self.ctx.emit("assignment_interval_overridden", view, ev.timestamp,
                      f"interval appears overridden (smallest gap {gap} ms): {self._fast_count} target "
                      f"assignment(s) came sooner than {basis.interval_ms} ms after the previous one, the smallest "
                      f"between epochs {previous_epoch} and {epoch}; judged against {basis.source}. Capture the "
                      "group configs (offsets-audit capture-group-configs) to check them",
                      [previous.where, ev.where],
                      {"smallest_gap_ms": gap, "assignments_sooner": self._fast_count,
                       "assignment_epoch": epoch, "previous_assignment_epoch": previous_epoch,
                       "assumed_interval_ms": basis.interval_ms, "judged_against": basis.source})
