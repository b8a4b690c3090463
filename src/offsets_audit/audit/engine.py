"""The pure audit of one group: walk its replay events once, run every rule family, time rebalances.

``audit_group(events, config)`` is what the Spark edge runs per group (``applyInPandas``) and what the
tests call directly with hand-built or replayed events.
"""
from __future__ import annotations

import json
from typing import Iterable

from .latency import RebalanceTracker
from .model import Event, Finding
from .rules import FAMILY_CLASSES
from .rules.base import AuditContext, GroupView
from .rules.offsets import OffsetRules
from .rules.ownership import OwnershipRules
from .rules.registry import rule_settings


#: Events of offset commits and transaction markers (``OffsetMetadataManager``): the offset rule family reads
#: them; they never change the group view nor cut a batch (a batch is the group records of one append).
OFFSET_EVENT_KINDS = frozenset({"offset_committed", "offset_expired_or_deleted", "txn_offset_pending",
                                "txn_offset_committed", "txn_offset_aborted"})
#: Group events after which the view's members, epochs or ownership may differ (``GroupTimeline``).
_CONTEXT_EVENT_KINDS = frozenset({"group_created", "group_type_changed", "group_deleted", "group_epoch_bumped",
                                  "target_assignment_computed", "member_joined", "member_left",
                                  "member_fenced_by_tombstone", "member_epoch_advanced", "member_assignment_changed",
                                  "classic_generation_changed"})
_OWNERSHIP_EVENT_KINDS = frozenset({"group_created", "group_type_changed", "group_deleted", "member_left",
                                    "member_fenced_by_tombstone", "member_assignment_changed"})


class GroupTimeline:
    """What the offset rules need to know of a group at any point of its log, as rows for Spark SQL.

    ``context`` rows: the view after a group event, whenever its type, membership, epochs or members' epochs
    and evidence changed (``offset_committed_backwards`` needs "had members", ``offset_commit_by_non_owner``
    the epochs and members it reports). ``ownership`` rows: a (topic id, partition) became owned (``owned``
    true) or not, once per assignment change. Each row carries the position of the event after which it holds
    (``partition``, ``offset``, ``seq``); it holds until the next row of its kind (and key).
    """

    def __init__(self) -> None:
        self.context: list[dict] = []
        self.ownership: list[dict] = []
        self._signature: tuple | None = None
        self._owned: set = set()

    def start(self, view: GroupView) -> None:
        self._record_context(view, None, -1)

    def after(self, ev: Event, view: GroupView, seq: int) -> None:
        if ev.event in _CONTEXT_EVENT_KINDS or (ev.group_type and ev.group_type != (self._signature or (None,))[0]):
            self._record_context(view, ev, seq)
        if ev.event in _OWNERSHIP_EVENT_KINDS:
            owned = set(view.owners())
            for topic_id, partition in sorted(owned ^ self._owned, key=str):
                self.ownership.append({"partition": ev.partition, "offset": ev.offset, "seq": seq,
                                       "topic_id": topic_id, "topic_partition": int(partition),
                                       "owned": (topic_id, partition) in owned})
            self._owned = owned

    def _record_context(self, view: GroupView, ev: Event | None, seq: int) -> None:
        members = tuple((m.member_id, m.member_epoch, m.previous_member_epoch, m.evidence)
                        for m in view.members.values())
        signature = (view.group_type, bool(view.members or view.classic_members), bool(view.members),
                     view.group_epoch, view.assignment_epoch, members)
        if signature == self._signature:
            return
        self._signature = signature
        self.context.append({
            "partition": None if ev is None else ev.partition, "offset": None if ev is None else ev.offset,
            "seq": seq, "group_type": view.group_type, "has_members": signature[1],
            "has_modern_members": signature[2], "group_epoch": view.group_epoch,
            "assignment_epoch": view.assignment_epoch,
            "member_evidence": [m[3] for m in members][:10],
            "members_json": json.dumps({m[0]: {"member_epoch": m[1], "previous_member_epoch": m[2]} for m in members},
                                       sort_keys=True),
        })


def audit_group(events: Iterable[dict], config: dict | None = None, *, settings: dict | None = None,
                end_time_ms: int | None = None,
                timeline: GroupTimeline | None = None) -> tuple[list[Finding], list[dict]]:
    """Findings and rebalance rows of one group id, from its events in log (offset) order.

    ``end_time_ms`` is when the log ends (the newest record of the whole input): pending transactions
    and stuck states are measured up to it; by default, the group's own last event. Offset events
    (``OFFSET_EVENT_KINDS``) reach the offset rules only; the Spark edge leaves them out and evaluates the
    offset rules in Spark SQL over the commit log, from the ``timeline`` this walk fills in.
    """
    settings = settings if settings is not None else rule_settings(config)
    parsed = [e if isinstance(e, Event) else Event.from_dict(e) for e in events]
    if not parsed:
        return [], []
    group_id = parsed[0].group_id
    cfg = dict(config or {})
    if end_time_ms is not None:
        cfg["_end_time_ms"] = end_time_ms
    ctx = AuditContext(settings, cfg, group_id)
    view = GroupView(group_id, next((e.group_type for e in parsed if e.group_type), None))
    families: list = [cls(ctx) for cls in FAMILY_CLASSES]
    offset_families = [f for f in families if isinstance(f, (OffsetRules, OwnershipRules))]
    tracker = RebalanceTracker(ctx)
    families.append(tracker)
    group_events = [i for i, ev in enumerate(parsed) if ev.event not in OFFSET_EVENT_KINDS]
    batch_ends = {i for i, nxt in zip(group_events, group_events[1:] + [None])
                  if nxt is None or parsed[nxt].timestamp != parsed[i].timestamp}
    if timeline is not None:
        timeline.start(view)
    for i, ev in enumerate(parsed):
        if ev.event in OFFSET_EVENT_KINDS:
            for family in offset_families:
                family.on_event(ev, view)
            view.apply(ev)
            continue
        for family in families:
            family.on_event(ev, view)
        view.apply(ev)
        if timeline is not None:
            timeline.after(ev, view, i)
        if i in batch_ends:
            for family in families:
                family.on_batch_end(view, ev)
    for family in families:
        family.finish(view)
    return ctx.findings, tracker.rows


def audit_events(events: Iterable[dict], config: dict | None = None, *,
                 end_time_ms: int | None = None) -> tuple[list[Finding], list[dict]]:
    """``audit_group`` over events of many groups (split by group id, order kept within each)."""
    settings = rule_settings(config)
    by_group: dict = {}
    for e in events:
        gid = e.group_id if isinstance(e, Event) else e.get("group_id")
        by_group.setdefault(gid, []).append(e)
    findings: list[Finding] = []
    rebalances: list[dict] = []
    for gid, evs in by_group.items():
        if gid is None:
            continue
        f, r = audit_group(evs, config, settings=settings, end_time_ms=end_time_ms)
        findings.extend(f)
        rebalances.extend(r)
    return findings, rebalances
