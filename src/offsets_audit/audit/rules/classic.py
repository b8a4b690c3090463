"""Classic groups (JoinGroup / SyncGroup): what every ``GroupMetadataValue`` must satisfy.

A generation only grows while the group lives; a group with members has picked a protocol that each
member offered (the record keeps only the chosen one, so this is checked where members' offers are
known, e.g. ``classicMemberMetadata.supportedProtocols`` of upgraded members); the leader is a member.
"""
from __future__ import annotations

from collections import deque

from ..model import Event, EventKind
from .base import GroupView, RuleFamily

HOUR_MS = 3_600_000


class ClassicRules(RuleFamily):
    family = "classic"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.window: deque[Event] = deque()
        self.last_generation_event: Event | None = None

    def on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event == EventKind.GROUP_DELETED:
            self.last_generation_event = None
            return
        if ev.event != EventKind.CLASSIC_GENERATION_CHANGED:
            return
        generation = ev.get("generation", 0)
        old = ev.details.get("old_generation")
        if old is None and self.last_generation_event is not None:
            old = self.last_generation_event.get("generation")
        if old is not None and generation < old and view.exists:
            self.ctx.emit("classic_generation_decreased", view, ev.timestamp,
                          f"generation went from {old} to {generation} without a group deletion",
                          [self.last_generation_event.where if self.last_generation_event else None, ev.where],
                          {"old_generation": old, "generation": generation})
        members = list(ev.get("members", []) or [])
        protocol = ev.details.get("protocol")
        if members:
            offered = ev.details.get("supported_protocols") or {}
            missing = sorted(m for m, names in offered.items() if protocol not in (names or ()))
            if not protocol or missing:
                self.ctx.emit("classic_protocol_not_supported", view, ev.timestamp,
                              f"generation {generation} chose protocol {protocol!r}"
                              + (f", not offered by {', '.join(missing)}" if missing else " with members present"),
                              [ev.where], {"generation": generation, "protocol": protocol, "members": members,
                                           "not_offered_by": missing})
            leader = ev.details.get("leader")
            if leader not in members:
                self.ctx.emit("classic_leader_not_member", view, ev.timestamp,
                              f"generation {generation} has leader {leader!r}, not one of its {len(members)} members",
                              [ev.where], {"generation": generation, "leader": leader, "members": members})
        self.last_generation_event = ev
        if ev.timestamp is not None:
            self.window.append(ev)
            while self.window and (self.window[0].timestamp or 0) <= ev.timestamp - HOUR_MS:  # only timed ones
                self.window.popleft()
            limit = self.ctx.threshold("classic_rebalance_rate_high", "max_per_hour")
            if len(self.window) > limit:
                self.ctx.emit("classic_rebalance_rate_high", view, ev.timestamp,
                              f"{len(self.window)} generations within one hour (limit {limit})",
                              [e.where for e in self.window], {"generations_per_hour": len(self.window),
                                                               "limit": limit},
                              key=("storm", self.window[0].where))
