"""The pure audit of one group: walk its replay events once, run every rule family, time rebalances.

``audit_group(events, settings)`` is what the Spark edge runs per group (``applyInArrow``) and what the
tests call directly with hand-built or replayed events.
"""
from __future__ import annotations

import json
import pickle
import zlib
from typing import Iterable

from offsets_audit.settings import Settings

from .interval_whatif import HistoryBuilder
from .latency import RebalanceTracker
from .model import Event, Finding
from .rules import FAMILY_CLASSES
from .rules.base import AuditContext, GroupView, RuleFamily, share_causes
from .rules.offsets import OffsetRules
from .rules.ownership import OwnershipRules


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

    With ``members`` false the context rows leave out the members (``members_json`` and ``member_evidence``
    null) and change only with the group's type, epochs and whether it has members: a few rows per rebalance
    instead of one per member event, each carrying every member (a group of m members made O(events x m) of
    them). The batch audit walks every group so, and walks again with the members only the groups whose
    commits the non-owner rule reports (``audit.spark.audit``).

    With ``member_limit`` the members are listed only while the group has at most that many: an incremental run
    cannot walk a group's earlier runs again, so it lists them as it goes, and a group of thousands of members
    churning would otherwise emit a row of every member per member event (quadratic in the group's size, in the
    run's memory and in its checkpoint). ``left_out_at`` is the member count when the members were first left
    out (None: never), so the run can say which groups' findings name no members.
    """

    #: Class defaults too: a timeline pickled in an incremental checkpoint before these attributes loads with
    #: members, no limit, and nothing left out.
    members = True
    member_limit: int | None = None
    left_out_at: int | None = None

    def __init__(self, members: bool = True, member_limit: int | None = None) -> None:
        self.context: list[dict] = []
        self.ownership: list[dict] = []
        self.members = members
        self.member_limit = member_limit
        self._signature: tuple | None = None
        self._owned: set = set()

    def start(self, view: GroupView) -> None:
        self._record_context(view, None, -1)

    def after(self, ev: Event, view: GroupView, seq: int) -> None:
        if ev.event in _CONTEXT_EVENT_KINDS or (ev.group_type and ev.group_type != (self._signature or (None,))[0]):
            self._record_context(view, ev, seq)
        if ev.event in _OWNERSHIP_EVENT_KINDS:
            owned = view.held()
            for topic_id, partition in sorted(owned ^ self._owned, key=str):
                self.ownership.append({"partition": ev.partition, "offset": ev.offset, "seq": seq,
                                       "topic_id": topic_id, "topic_partition": int(partition),
                                       "owned": (topic_id, partition) in owned})
            self._owned = owned

    def _record_context(self, view: GroupView, ev: Event | None, seq: int) -> None:
        listed = self.members and (self.member_limit is None or len(view.members) <= self.member_limit)
        if self.members and not listed and self.left_out_at is None:
            self.left_out_at = len(view.members)
        members = tuple((m.member_id, m.member_epoch, m.previous_member_epoch, m.evidence)
                        for m in view.members.values()) if listed else None
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
            "member_evidence": None if members is None else [m[3] for m in members][:10],
            "members_json": None if members is None else json.dumps(
                {m[0]: {"member_epoch": m[1], "previous_member_epoch": m[2]} for m in members}, sort_keys=True),
        })


#: What ``AuditContext`` holds of the run rather than of the group: never stored with a group's state.
_RUN_ATTRIBUTES = ("settings", "rules", "end_time_ms")

#: Version byte of ``GroupAudit.to_bytes``: a checkpoint written by another layout is refused, not misread.
_STATE_FORMAT = 1


class GroupAudit:
    """The audit of one group id, resumable: fed its events chunk by chunk, its whole state kept as bytes.

    The walk ``audit_group`` does in one go, cut anywhere: the view (``GroupView``), every rule family, the
    ``RebalanceTracker``, the ``GroupTimeline`` signature and ownership, and the one thing a cut would lose,
    whether the last group event ended its batch (the coordinator writes one batch per append time, so that is
    known only when the next group event comes; until then the batch end and the offset events after it wait).
    ``feed`` emits what is certain (findings, rebalances that closed, timeline rows); ``finish`` adds what holds
    only because the log ends here: still-pending transactions, still-stuck states, rebalances still open, the
    interval summary of ``assignment_interval_overridden``. ``provisional(end_time_ms)`` is that tail computed
    on a copy, so an incremental run can report it for its own "now" and resume later from the uncut state.

    Like ``GroupFold`` for the replay (``GroupCoordinatorShard.replay`` one record at a time), this is what the
    streaming audit keeps per group in its state store (``to_bytes`` / ``from_bytes``).
    """

    def __init__(self, group_id: str | None, settings: Settings | None = None, *, end_time_ms: int | None = None,
                 timeline: bool = False, timeline_member_limit: int | None = None, what_if: bool = False) -> None:
        self.group_id = group_id
        # The assignment-interval what-if's history of the group (``interval_whatif.HistoryBuilder``): resumed with
        # the rest of the state, it gives the what-if rows of one walk over the whole log.
        self.what_if: HistoryBuilder | None = HistoryBuilder() if what_if else None
        self.ctx = AuditContext(settings or Settings(), group_id, end_time_ms=end_time_ms)
        self.families: list = [cls(self.ctx) for cls in FAMILY_CLASSES]
        self.tracker = RebalanceTracker(self.ctx)
        self.families.append(self.tracker)
        self.offset_families = [f for f in self.families if isinstance(f, (OffsetRules, OwnershipRules))]
        self.batch_families = _batch_families(self.families)
        # The churn rules and the rebalance tracker both attribute bumps to causes: one tracker for both, moved on
        # once per event (it was kept twice, the same events walked through each).
        self.causes = share_causes(self.families)
        self.timeline = GroupTimeline(member_limit=timeline_member_limit) if timeline else None
        self.view: GroupView | None = None
        self.seq = 0  # index of the next event in the group's whole event list (the timeline rows' ``seq``)
        self._waiting: list[Event] = []  # events before the group's type is known (the view starts typed)
        self._last_group_event: Event | None = None  # its batch end not yet decided
        self._held: list[Event] = []  # offset events after it, applied once its batch end is decided

    # -- state ---------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Compact state (zlib-compressed pickle) without the run's settings, rules and end time, given again
        on load."""
        ctx = self.ctx
        run = {name: ctx.__dict__.pop(name) for name in _RUN_ATTRIBUTES if name in ctx.__dict__}
        try:
            blob = pickle.dumps(self.__dict__, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            ctx.__dict__.update(run)
        return bytes([_STATE_FORMAT]) + zlib.compress(blob, 1)

    @classmethod
    def from_bytes(cls, data: bytes, settings: Settings | None = None) -> GroupAudit:
        if not data or data[0] != _STATE_FORMAT:
            raise ValueError(f"unknown GroupAudit state format {data[:1]!r}; the checkpoint was written by another "
                             "version: start a new checkpoint")
        audit = cls.__new__(cls)
        audit.__dict__.update(pickle.loads(zlib.decompress(data[1:])))
        audit.__dict__.setdefault("what_if", None)  # a checkpoint written before the what-if kept its history
        if "batch_families" not in audit.__dict__:  # a checkpoint written before these attributes
            audit.batch_families = _batch_families(audit.families)
            audit.causes = share_causes(audit.families)
        for name in ("config", *_RUN_ATTRIBUTES):  # "config": what a checkpoint written before typed settings kept
            audit.ctx.__dict__.pop(name, None)
        audit.ctx.use(settings or Settings())
        return audit

    # -- the walk ------------------------------------------------------------------------------------

    def feed(self, events: Iterable) -> None:
        """Walk the next events of the group, in log order (after every event fed before)."""
        for raw in events:
            ev = raw if isinstance(raw, Event) else Event.from_dict(raw)
            if self.what_if is not None:
                self.what_if.add(ev)
            if self.view is None:
                self._waiting.append(ev)
                if ev.group_type:
                    self._start(ev.group_type)
                continue
            self._walk(ev)

    def _start(self, group_type: str | None) -> None:
        self.view = GroupView(self.group_id, group_type)
        if self.timeline is not None:
            self.timeline.start(self.view)
        waiting, self._waiting = self._waiting, []
        for ev in waiting:
            self._walk(ev)

    def _walk(self, ev: Event) -> None:
        view = self.view
        assert view is not None
        seq, self.seq = self.seq, self.seq + 1
        if ev.event in OFFSET_EVENT_KINDS:
            if self._last_group_event is not None:
                self._held.append(ev)
            else:
                self._offset_event(ev)
            return
        if self._last_group_event is not None:
            self._decide_batch_end(ev.timestamp)
        causes = self.causes
        if causes is None:
            for family in self.families:
                family.on_event(ev, view)
        else:
            causes.on_event(ev)
            try:
                for family in self.families:
                    family.on_event(ev, view)
            finally:
                causes.after_event(ev)
        view.apply(ev)
        if self.timeline is not None:
            self.timeline.after(ev, view, seq)
        self._last_group_event = ev

    def _offset_event(self, ev: Event) -> None:
        view = self.view
        assert view is not None  # offset events wait in ``_waiting`` until the group's view starts
        for family in self.offset_families:
            family.on_event(ev, view)
        view.apply(ev)

    def _decide_batch_end(self, next_timestamp: int | None, *, log_ends: bool = False) -> None:
        """The last group event ended its batch if the next group event has another append time (or none comes)."""
        last, self._last_group_event = self._last_group_event, None
        if last is not None and (log_ends or next_timestamp != last.timestamp):
            view = self.view
            assert view is not None  # a group event was walked: the view has started
            for family in self.batch_families:
                family.on_batch_end(view, last)
            view.batch_checked()
        held, self._held = self._held, []
        for ev in held:
            self._offset_event(ev)

    def finish(self) -> None:
        """The log ends here: close the last batch, then every family's end-of-log checks."""
        self._close_last_batch()
        for family in self.families:
            family.finish(self.view)

    def _close_last_batch(self) -> None:
        if self.view is None:
            self._start(None)
        self._decide_batch_end(None, log_ends=True)

    # -- what the walk produced ----------------------------------------------------------------------

    @property
    def findings(self) -> list[Finding]:
        return self.ctx.findings

    @property
    def rebalances(self) -> list[dict]:
        return self.tracker.rows

    def take(self) -> tuple[list[Finding], list[dict], list[dict], list[dict]]:
        """Findings, rebalance rows, timeline context and ownership rows produced since the last ``take``;
        cleared here so the stored state does not grow with the group's history."""
        out = (self.ctx.findings, self.tracker.rows,
               self.timeline.context if self.timeline else [], self.timeline.ownership if self.timeline else [])
        self.ctx.findings, self.tracker.rows = [], []
        if self.timeline is not None:
            self.timeline.context, self.timeline.ownership = [], []
        return out

    def provisional(self, end_time_ms: int | None) -> tuple[list[Finding], list[dict]]:
        """What ``finish`` would add if the log ended at ``end_time_ms``, computed on a copy (this state is
        left as it was). Call after ``take``: the result holds only the end-of-log tail."""
        findings, rebalances, _ = self.provisional_until(end_time_ms)
        return findings, rebalances

    def provisional_until(self, end_time_ms: int | None) -> tuple[list[Finding], list[dict], int | None]:
        """``provisional(end_time_ms)`` and how long it holds: the first end time after ``end_time_ms`` at
        which it could differ (a stuck-state or pending-transaction timer runs out, or one already out is
        measured to a later end); None when no later end time changes it. With no new events for the group, a
        later run whose clock is below that time has the same tail and can carry it instead of recomputing."""
        copy = GroupAudit.from_bytes(self.to_bytes(), self.ctx.settings)
        copy.ctx.findings, copy.tracker.rows = [], []
        copy.ctx.end_time_ms = end_time_ms
        copy._close_last_batch()
        assert copy.view is not None  # ``_close_last_batch`` starts it
        end = end_time_ms or copy.view.last_time
        horizons = [h for h in (f.clock_horizon(copy.view, end) for f in copy.families) if h is not None]
        for family in copy.families:
            family.finish(copy.view)
        findings, rebalances, _, _ = copy.take()
        return findings, rebalances, min(horizons, default=None)


def _batch_families(families: list) -> list:
    """The families that do something at a batch end (``on_batch_end`` overridden), in their order: a group has a
    batch end for nearly every second event."""
    return [f for f in families if type(f).on_batch_end is not RuleFamily.on_batch_end]


def audit_group(events: Iterable[dict | Event], settings: Settings | None = None, *, end_time_ms: int | None = None,
                timeline: GroupTimeline | None = None) -> tuple[list[Finding], list[dict]]:
    """Findings and rebalance rows of one group id, from its events in log (offset) order.

    ``end_time_ms`` is when the log ends (the newest record of the whole input): pending transactions
    and stuck states are measured up to it; by default, the group's own last event. Offset events
    (``OFFSET_EVENT_KINDS``) reach the offset rules only; the Spark edge leaves them out and evaluates the
    offset rules in Spark SQL over the commit log, from the ``timeline`` this walk fills in.
    A ``GroupAudit`` fed once and finished.
    """
    parsed = [e if isinstance(e, Event) else Event.from_dict(e) for e in events]
    if not parsed:
        return [], []
    audit = GroupAudit(parsed[0].group_id, settings, end_time_ms=end_time_ms)
    if timeline is not None:
        audit.timeline = timeline
    audit.feed(parsed)
    audit.finish()
    return audit.findings, audit.rebalances


def audit_events(events: Iterable[dict], settings: Settings | None = None, *,
                 end_time_ms: int | None = None) -> tuple[list[Finding], list[dict]]:
    """``audit_group`` over events of many groups (split by group id, order kept within each)."""
    by_group: dict = {}
    for e in events:
        gid = e.group_id if isinstance(e, Event) else e.get("group_id")
        by_group.setdefault(gid, []).append(e)
    findings: list[Finding] = []
    rebalances: list[dict] = []
    for gid, evs in by_group.items():
        if gid is None:
            continue
        f, r = audit_group(evs, settings, end_time_ms=end_time_ms)
        findings.extend(f)
        rebalances.extend(r)
    return findings, rebalances
