"""Churn: rebalance storms and groups that never settle (KIP-848 group states).

A group epoch bump is a rebalance; many within an hour mean flapping members or metadata. A modern
group is ASSIGNING while its group epoch is ahead of the target assignment, RECONCILING while some
member has not reached the target, NOT_READY (streams) while its topology misses internal topics.
"""
from __future__ import annotations

from collections import deque

from ..model import Event
from .base import GroupView, RuleFamily

HOUR_MS = 3_600_000
STUCK_STATES = {"ASSIGNING": "max_assigning_ms", "RECONCILING": "max_reconciling_ms",
                "NOT_READY": "max_not_ready_ms"}


class ChurnRules(RuleFamily):
    family = "churn"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.window: deque[Event] = deque()
        self.storm_open = False
        self.state: str | None = None
        self.state_since: Event | None = None

    def on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event != "group_epoch_bumped" or ev.timestamp is None:
            return
        self.window.append(ev)
        while self.window and self.window[0].timestamp <= ev.timestamp - HOUR_MS:
            self.window.popleft()
        limit = self.ctx.threshold("rebalance_storm", "max_per_hour")
        if len(self.window) > limit and not self.storm_open:
            self.storm_open = True
            self.ctx.emit("rebalance_storm", view, ev.timestamp,
                          f"{len(self.window)} group epoch bumps within one hour (limit {limit}), up to epoch "
                          f"{ev.get('new')}",
                          [self.window[0].where, ev.where],
                          {"bumps_per_hour": len(self.window), "limit": limit,
                           "from_group_epoch": self.window[0].get("new"), "to_group_epoch": ev.get("new")})
        elif len(self.window) <= limit // 2:
            self.storm_open = False

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        # Checked at the group's own batches only (offset commits are no clock here): the state that just ended
        # is measured up to the batch that ended it, so a long episode is found whatever commits came meanwhile.
        state = view.state
        if state != self.state:
            self._check_stuck(view, last.timestamp, last)
            self.state, self.state_since = state, last
            return
        self._check_stuck(view, last.timestamp, last)

    def _check_stuck(self, view: GroupView, now: int | None, last: Event | None) -> None:
        setting = STUCK_STATES.get(self.state or "")
        since = self.state_since
        if setting is None or since is None or since.timestamp is None or now is None:
            return
        limit = self.ctx.threshold("group_stuck_in_state", setting)
        if now - since.timestamp > limit:
            self.ctx.emit("group_stuck_in_state", view, now,
                          f"group stayed {self.state} for {now - since.timestamp} ms (limit {limit} ms) "
                          f"at group epoch {view.group_epoch}, assignment epoch {view.assignment_epoch}",
                          [since.where, last.where if last else None],
                          {"state": self.state, "since": since.timestamp, "duration_ms": now - since.timestamp,
                           "limit_ms": limit, "group_epoch": view.group_epoch,
                           "assignment_epoch": view.assignment_epoch},
                          key=("stuck", self.state, since.where))

    def finish(self, view: GroupView) -> None:
        end = self.ctx.config.get("_end_time_ms") or view.last_time
        if end is not None:
            self._check_stuck(view, end, None)
