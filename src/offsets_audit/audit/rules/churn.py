"""Churn: rebalance storms and groups that never settle (KIP-848 group states).

A group epoch bump is a rebalance; many within an hour mean flapping members or metadata. A modern
group is Assigning while its group epoch is ahead of the target assignment, Reconciling while some
member has not reached the target, NotReady (streams) while its topology misses internal topics (Kafka's
``GroupState`` spellings).
Both findings name the dominant causes of the bumps involved and the clients behind them (audit/causes.py).
"""
from __future__ import annotations

from collections import deque

from offsets_audit.replay.state import GroupState

from ..causes import Attribution, dominant
from ..model import Event, EventKind
from .base import CauseTrackingFamily, GroupView, timer_horizon

HOUR_MS = 3_600_000
STUCK_STATES = {GroupState.ASSIGNING: "max_assigning_ms", GroupState.RECONCILING: "max_reconciling_ms",
                GroupState.NOT_READY: "max_not_ready_ms"}


class ChurnRules(CauseTrackingFamily):
    family = "churn"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.window: deque[Event] = deque()
        self.window_causes: deque[Attribution | None] = deque()
        self.storm_open = False
        self.state: GroupState | None = None
        self.state_since: Event | None = None
        self.batch_causes: list[Attribution] = []
        self.state_causes: list[Attribution] = []

    def _on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event != EventKind.GROUP_EPOCH_BUMPED or ev.timestamp is None:
            return
        attribution = None
        if view.group_type in ("consumer", "share", "streams") and int(ev.get("new", 0)) > int(ev.get("old", 0) or 0):
            attribution = self.causes.attribute(ev, view.group_type)
            self.batch_causes.append(attribution)
        self.window.append(ev)
        self.window_causes.append(attribution)
        # only timed bumps enter the window
        while self.window and (self.window[0].timestamp or 0) <= ev.timestamp - HOUR_MS:
            self.window.popleft()
            self.window_causes.popleft()
        limit = self.ctx.threshold("rebalance_storm", "max_per_hour")
        if len(self.window) > limit and not self.storm_open:
            self.storm_open = True
            why, details = explain([a for a in self.window_causes if a is not None])
            causes = details.get("dominant_causes") or [{}]
            if causes[0].get("cause") == "assignor_changed":
                # Kafka re-evaluates the group's preferred server assignor on every heartbeat; members preferring
                # different ones in equal numbers make it find a change each time, so the storm lasts as long
                # as the members disagree and the fix is theirs to make.
                why += ("; the members prefer different server assignors, so their heartbeats keep finding the "
                        "group's assignor changed: give them all one group.remote.assignor")
            self.ctx.emit("rebalance_storm", view, ev.timestamp,
                          f"{len(self.window)} group epoch bumps within one hour (limit {limit}), up to epoch "
                          f"{ev.get('new')}{why}",
                          [self.window[0].where, ev.where],
                          {"bumps_per_hour": len(self.window), "limit": limit,
                           "from_group_epoch": self.window[0].get("new"), "to_group_epoch": ev.get("new"),
                           **details})
        elif len(self.window) <= limit // 2:
            self.storm_open = False

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        # Checked at the group's own batches only (offset commits are no clock here): the state that just ended
        # is measured up to the batch that ended it, so a long episode is found whatever commits came meanwhile.
        state = view.state
        batch, self.batch_causes = self.batch_causes, []
        if state != self.state:
            self._check_stuck(view, last.timestamp, last)
            # The bumps of this batch moved the group into its new state; earlier ones are history.
            self.state, self.state_since, self.state_causes = state, last, batch
            return
        self.state_causes.extend(batch)
        self._check_stuck(view, last.timestamp, last)

    def _check_stuck(self, view: GroupView, now: int | None, last: Event | None) -> None:
        setting = STUCK_STATES.get(self.state) if self.state is not None else None
        since = self.state_since
        if setting is None or since is None or since.timestamp is None or now is None:
            return
        limit = self.ctx.threshold("group_stuck_in_state", setting)
        if now - since.timestamp > limit:
            why, details = explain(self.state_causes, "after bumps caused by")
            self.ctx.emit("group_stuck_in_state", view, now,
                          f"group stayed {self.state} for {now - since.timestamp} ms (limit {limit} ms) "
                          f"at group epoch {view.group_epoch}, assignment epoch {view.assignment_epoch}{why}",
                          [since.where, last.where if last else None],
                          {"state": self.state, "since": since.timestamp, "duration_ms": now - since.timestamp,
                           "limit_ms": limit, "group_epoch": view.group_epoch,
                           "assignment_epoch": view.assignment_epoch, **details},
                          key=("stuck", self.state, since.where))

    def finish(self, view: GroupView) -> None:
        end = self.ctx.end_time_ms or view.last_time
        if end is not None:
            self._check_stuck(view, end, None)

    def clock_horizon(self, view: GroupView, end: int | None) -> int | None:
        setting = STUCK_STATES.get(self.state) if self.state is not None else None
        since = self.state_since
        if setting is None or since is None or since.timestamp is None:
            return None
        return timer_horizon(since.timestamp, self.ctx.threshold("group_stuck_in_state", setting), end)


def explain(attributions: list[Attribution], lead: str = "caused by") -> tuple[str, dict]:
    """Message suffix and details naming the dominant causes and culprits of some bumps."""
    if not attributions:
        return "", {}
    rows = [{"causes": a.causes, "cause_members": a.cause_members} for a in attributions]
    causes, culprits = dominant(rows)
    text = f"; {lead} " + ", ".join(f"{c} ({n})" for c, n in causes)
    if culprits:
        text += "; top culprits " + ", ".join(f"{c} ({n})" for c, n in culprits)
    return text, {"dominant_causes": [{"cause": c, "rebalances": n} for c, n in causes],
                  "top_culprits": [{"client": c, "rebalances": n} for c, n in culprits]}
