"""Rebalance latency: one row per group-epoch bump, and percentiles over them.

For every bump to group epoch E (a rebalance, KIP-848) the audit measures:

* ``time_to_assignment_ms``: until a target assignment at epoch >= E exists, timed by its
  ``AssignmentTimestamp`` (KIP-1263; the record time where the timestamp is 0). This is the batching
  delay the assignment interval adds: several bumps are answered by one assignment;
* ``convergence_ms``: until every member of the group is at an epoch >= E and STABLE (nothing pending
  revocation), checked at batch ends; ``reconciling_ms`` is the part after the assignment;
* the members whose owned partitions changed and the partitions whose owner changed between the bump
  and convergence.

A rebalance cut short (group deleted or converted, or the log ends first) has ``complete`` false.
Every row also says why the epoch moved: ``causes`` and ``cause_members`` (audit/causes.py).
"""
from __future__ import annotations

from typing import Any

import datetime as _dt
from dataclasses import dataclass, field

from .causes import Attribution
from offsets_audit.replay.state import MemberState

from .model import Event
from .rules.base import CauseTrackingFamily, GroupView

PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
LATENCY_METRICS = ("time_to_assignment_ms", "convergence_ms", "reconciling_ms")

REBALANCE_COLUMNS = (
    "group_id", "group_type", "group_epoch", "bump_partition", "bump_offset", "bump_time",
    "assignment_epoch", "assignment_timestamp", "assignment_offset", "assignment_time", "converged_time",
    "time_to_assignment_ms", "convergence_ms", "assigning_ms", "reconciling_ms", "members",
    "members_changed", "partitions_moved", "bumps_in_batch", "assignment_interval_ms", "complete", "day",
    "causes", "cause_members",
)


@dataclass
class _Open:
    group_epoch: int
    bump: Event
    before: dict
    assignment: Event | None = None
    assignment_time: int | None = None
    extra: dict = field(default_factory=dict)
    attribution: Attribution | None = None


def _ownership(view: GroupView) -> dict:
    """Member -> frozenset of what it holds (partitions, or (role, task) for streams)."""
    out = {}
    for m in view.members.values():
        held = set(m.assigned) | set(m.pending)
        for role, tasks in m.tasks.items():
            held |= {(role,) + t for t in tasks}
        out[m.member_id] = frozenset(held)
    return out


def _moved(before: dict, after: dict) -> tuple[int, int]:
    members_changed = sum(1 for m in set(before) | set(after) if before.get(m, frozenset()) != after.get(m, frozenset()))
    owner_before: dict = {}
    owner_after: dict = {}
    for m, held in before.items():
        for x in held:
            owner_before.setdefault(x, set()).add(m)
    for m, held in after.items():
        for x in held:
            owner_after.setdefault(x, set()).add(m)
    moved = sum(1 for x in set(owner_before) | set(owner_after) if owner_before.get(x) != owner_after.get(x))
    return members_changed, moved


def day_of(ms: int | None) -> str | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d")


class RebalanceTracker(CauseTrackingFamily):
    """Walks the same events as the rules and collects one row per group-epoch bump."""

    family = "latency"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.open: list[_Open] = []
        self.rows: list[dict] = []
        #: a classic generation change and the other events of its GroupMetadata record (joins, leaves)
        self.classic_pending: tuple[Event, list[Event]] | None = None
        self.record: tuple | None = None
        self.record_events: list[Event] = []

    def _on_event(self, ev: Event, view: GroupView) -> None:
        kind = ev.event
        record = (ev.partition, ev.offset)
        if record != self.record:
            if self.classic_pending is not None:
                self._close_classic(view)
            self.record, self.record_events = record, []
        if kind == "classic_generation_changed":
            old, new = ev.get("old_generation"), ev.get("generation")
            # A first generation seen mid-history (a compacted log) has no known predecessor: not attributed.
            if new is not None and (int(new) > int(old) if old is not None
                                    else int(new) == 1 or self.causes.converted):
                # The record's joins and leaves may come before or after it (Spark does not keep the
                # order of one record's events): all events of the record count.
                self.classic_pending = (ev, self.record_events)
            return
        self.record_events.append(ev)
        if kind == "group_epoch_bumped" and view.group_type in ("consumer", "share", "streams"):
            new = int(ev.get("new", 0))
            old = int(ev.get("old", 0) or 0)
            if new <= old:
                return
            waiting = next((o for o in self.open if o.assignment is None), None)
            before = waiting.before if waiting is not None else _ownership(view)
            self.open.append(_Open(new, ev, before, attribution=self.causes.attribute(ev, view.group_type)))
        elif kind == "target_assignment_computed":
            epoch = int(ev.get("assignment_epoch", 0))
            ts = int(ev.get("assignment_timestamp", 0) or 0)
            answered = [o for o in self.open if o.assignment is None and o.group_epoch <= epoch]
            for o in answered:
                o.assignment = ev
                o.assignment_time = ts if ts > 0 else ev.timestamp
                o.extra["bumps_in_batch"] = len(answered)
        elif kind in ("group_deleted", "group_type_changed"):
            for o in self.open:
                self._close(o, view, None)
            self.open = []

    def _close_classic(self, view: GroupView) -> None:
        """One row per classic generation: the GroupMetadata record is written once the rebalance is over
        (SyncGroup, or an empty generation), so it is complete and its latency is not in the log."""
        assert self.classic_pending is not None  # called when a generation is pending
        ev, record_events = self.classic_pending
        self.classic_pending = None
        attribution = self.causes.attribute_classic(ev, record_events)
        row: dict[str, Any] = {c: None for c in REBALANCE_COLUMNS}
        row.update({
            "group_id": view.group_id, "group_type": "classic", "group_epoch": int(ev.get("generation")),
            "bump_partition": ev.partition, "bump_offset": ev.offset, "bump_time": ev.timestamp,
            "converged_time": ev.timestamp, "members": len(ev.get("members", []) or []), "complete": True,
            "day": day_of(ev.timestamp), "causes": list(attribution.causes),
            "cause_members": [dict(m) for m in attribution.cause_members],
        })
        self.rows.append(row)

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        if self.classic_pending is not None:
            self._close_classic(view)
        if not self.open:
            return
        still = []
        for o in self.open:
            if o.assignment is not None and self._converged(view, o.group_epoch):
                self._close(o, view, last.timestamp)
            else:
                still.append(o)
        self.open = still

    @staticmethod
    def _converged(view: GroupView, epoch: int) -> bool:
        for m in view.members.values():
            if m.member_epoch < epoch or m.state != MemberState.STABLE or m.pending or any(m.tasks_pending.values()):
                return False
        return True

    def _close(self, o: _Open, view: GroupView, converged_time: int | None) -> None:
        after = _ownership(view) if converged_time is not None else None
        members_changed, moved = _moved(o.before, after) if after is not None else (None, None)
        bump_time = o.bump.timestamp
        a = o.assignment
        tta = None if o.assignment_time is None or bump_time is None else max(o.assignment_time - bump_time, 0)
        conv = None if converged_time is None or bump_time is None else converged_time - bump_time
        rec = None if converged_time is None or o.assignment_time is None else max(converged_time - o.assignment_time, 0)
        self.rows.append({
            "group_id": view.group_id,
            "group_type": view.group_type,
            "group_epoch": o.group_epoch,
            "bump_partition": o.bump.partition,
            "bump_offset": o.bump.offset,
            "bump_time": bump_time,
            "assignment_epoch": None if a is None else int(a.get("assignment_epoch", 0)),
            "assignment_timestamp": None if a is None else int(a.get("assignment_timestamp", 0) or 0),
            "assignment_offset": None if a is None else a.offset,
            "assignment_time": o.assignment_time,
            "converged_time": converged_time,
            "time_to_assignment_ms": tta,
            "convergence_ms": conv,
            "assigning_ms": tta,
            "reconciling_ms": rec,
            "members": len(view.members) if converged_time is not None else None,
            "members_changed": members_changed,
            "partitions_moved": moved,
            "bumps_in_batch": o.extra.get("bumps_in_batch"),
            "assignment_interval_ms": self.ctx.assignment_interval_ms(view.group_id, view.group_type),
            "complete": converged_time is not None,
            "day": day_of(bump_time),
            "causes": list(o.attribution.causes) if o.attribution else ["unknown"],
            "cause_members": [dict(m) for m in o.attribution.cause_members] if o.attribution else [],
        })

    def finish(self, view: GroupView) -> None:
        if self.classic_pending is not None:
            self._close_classic(view)
        for o in self.open:
            self._close(o, view, None)
        self.open = []


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (Spark SQL ``percentile``, numpy's default)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def summarize_latency(rebalances: list[dict]) -> list[dict]:
    """``latency_summary`` rows: per (group_type, group_id, day), per (group_type, day), per group_type, each
    with its latency percentiles and ``causes``: how many of its rebalances had each cause (audit/causes.py).

    Rolled-up levels have ``group_id`` (and ``day``) null; ``level`` says which one a row is.
    """
    buckets: dict[tuple, list[dict]] = {}
    for r in rebalances:
        for level, key in (("group_day", (r["group_type"], r["group_id"], r["day"])),
                           ("group_type_day", (r["group_type"], None, r["day"])),
                           ("group_type", (r["group_type"], None, None))):
            buckets.setdefault((level,) + key, []).append(r)
    out = []
    for (level, group_type, group_id, day), rows in sorted(buckets.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        causes: dict[str, int] = {}
        for r in rows:
            for cause in r.get("causes") or ["unknown"]:
                causes[cause] = causes.get(cause, 0) + 1
        row = {"level": level, "group_type": group_type, "group_id": group_id, "day": day,
               "rebalances": len(rows), "complete": sum(1 for r in rows if r["complete"]),
               "causes": [{"cause": c, "rebalances": causes[c]} for c in sorted(causes)]}
        for metric in LATENCY_METRICS:
            values = [r[metric] for r in rows if r[metric] is not None]
            for name, q in PERCENTILES:
                row[f"{metric}_{name}"] = percentile(values, q)
            row[f"{metric}_max"] = float(max(values)) if values else None
        out.append(row)
    return out
