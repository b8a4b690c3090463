"""What another assignment interval would have done to a group: KIP-1263's rule replayed over its recorded triggers.

Kafka computes a group's next target assignment on a heartbeat of one of its members, and only when the group
epoch is ahead of the assignment epoch and ``GroupMetadataManager.canComputeNextTargetAssignment`` allows it: the
previous ``AssignmentTimestamp`` is 0 (no previous assignment, or the group was emptied), the interval is 0, or
``now >= AssignmentTimestamp + interval``. The computation stamps the new assignment with the heartbeat's time.
A streams group that was empty when a member joined first waits for its initial rebalance delay
(``streams.initial.rebalance.delay.ms``): a coordinator timer scheduled on that bump blocks the heartbeats' own
computations until it fires and computes (``computeDelayedTargetAssignment``). Leaves and session-timeout fences
bump the epoch without computing; the next heartbeat of a remaining member does.

The replay here needs what the log tells of a group (``group_history(events)``):

* the triggers: every group-epoch bump with its time, and whether the group was empty before it;
* the heartbeats: every record a member's own heartbeat wrote (it joined, changed its subscription, advanced its
  epoch or its assignment) and every recorded target assignment (computed on a heartbeat); between two of a
  member's records its client sent a heartbeat every heartbeat interval (the client's timer restarts at each
  heartbeat), which the log does not show because they changed nothing;
* the resets: a target assignment stamped 0 for a group that lost its last member, a deletion, a conversion.

``replay(history, interval_ms=...)`` then walks the triggers through the rule for one candidate interval and
returns the computations it would have made, each with the bumps it answered. At the interval the group ran with
it must give back the recorded computations (``RecordedCheck``); at another it estimates what that interval
would change: how many assignor runs, how long from a bump to its assignment. ``what_if_rows`` does that for a list
of candidates and recommends: the interval the group runs with while its busiest minute of assignor time is within
a budget, else the smallest interval that brings it within the budget without adding more than one heartbeat
interval to its bumps' time to assignment.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from offsets_audit.group_configs import (
    KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS,
    KAFKA_DEFAULT_HEARTBEAT_INTERVAL_MS,
    KAFKA_DEFAULT_STREAMS_INITIAL_REBALANCE_DELAY_MS,
    assignment_interval,
    group_setting_ms,
)
from offsets_audit.replay.events import Event, EventKind
from offsets_audit.settings import BrokerSettings

from .latency import percentile

#: Candidate intervals (ms) when the configuration names none: KIP-1263's bounds are 0 and 15 s by default.
DEFAULT_CANDIDATES_MS: tuple[int, ...] = (0, 1000, 3000, 5000, 15000)
MODERN_GROUP_TYPES = ("consumer", "share", "streams")
MINUTE_MS = 60_000

#: Events a member's own heartbeat writes (``ConsumerGroupHeartbeat`` and siblings): the member was there, then.
_HEARTBEAT_EVENTS = frozenset({EventKind.MEMBER_JOINED, EventKind.MEMBER_METADATA_CHANGED,
                               EventKind.MEMBER_EPOCH_ADVANCED, EventKind.MEMBER_ASSIGNMENT_CHANGED})
_GONE_EVENTS = frozenset({EventKind.MEMBER_LEFT, EventKind.MEMBER_FENCED_BY_TOMBSTONE})

# Step kinds. Steps are taken in log order; a recorded computation is placed at its AssignmentTimestamp.
_BUMP, _RESET, _BEAT, _GONE = 0, 1, 2, 3


@dataclass(frozen=True)
class GroupIntervals:
    """The settings of one group that the rule reads, each as the group ran with it (group config, else the broker
    default): the assignment interval and where it came from, the heartbeat interval its members were given, and
    (streams) the initial rebalance delay."""

    interval_ms: int
    heartbeat_interval_ms: int
    initial_rebalance_delay_ms: int = 0
    interval_known: bool = True
    interval_source: str = ""


@dataclass
class GroupHistory:
    """What the log tells of one group's triggers and heartbeats (``group_history``)."""

    group_id: str | None
    group_type: str | None
    partition: int | None = None
    #: (time, kind, subject, flags): bumps (new epoch; (group was empty before, written by a member's heartbeat)),
    #: resets, heartbeats (member, or None for a recorded computation; (joined, its bump follows)) and departures;
    #: a member is named by its number (``HistoryBuilder.ids``)
    steps: list[tuple] = field(default_factory=list)
    #: recorded computations: (AssignmentTimestamp, or the record's time where Kafka wrote 0, assignment epoch)
    computations: list[tuple[int, int]] = field(default_factory=list)
    #: Kafka before KIP-1263 stamped every assignment 0 and computed on every bump's heartbeat
    untimed: bool = False
    end_time: int | None = None

    @property
    def bumps(self) -> int:
        return sum(1 for step in self.steps if step[1] == _BUMP)


def group_history(events: Iterable[Event], *, end_time_ms: int | None = None) -> GroupHistory:
    """The triggers, heartbeats and recorded computations of one group, from its events in log order."""
    builder = HistoryBuilder()
    builder.feed(events)
    return builder.history(end_time_ms)


class HistoryBuilder:
    """``group_history`` cut anywhere: fed a group's events chunk by chunk in log order (an incremental run keeps
    it in the group's stored audit state), ``history(end_time_ms)`` gives what ``group_history`` gives for every
    event fed so far. It keeps one small step per trigger, heartbeat record and computation: the replay of another
    interval starts from the group's first record, so nothing of the history can be folded away.

    The steps name a member by a small number (``ids``, in the order members were first seen), never by its id: a
    member's id, tens of characters, would otherwise be stored once per heartbeat record of it in the group's
    stored state. The replay only tells members apart, so the numbers give it the same answers."""

    #: Each member id seen, by its number. None on a builder stored before members were numbered: its steps and
    #: ``members`` hold the ids themselves, numbered when it is next fed (``_numbered``).
    ids: dict[str, int] | None = None

    def __init__(self) -> None:
        self.acc: GroupHistory | None = None
        self.members: set[int] = set()
        self.ids = {}
        self.last_ts = 0
        self.untimed = 0
        self.timed = 0

    def _member(self, member_id: str) -> int:
        ids = self.ids if self.ids is not None else self._numbered()
        number = ids.get(member_id)
        if number is None:
            number = ids[member_id] = len(ids)
        return number

    def _numbered(self) -> dict[str, int]:
        """Number the members of a builder stored before members were numbered, in its steps and ``members``."""
        ids: dict[str, int] = {}

        def number(member):
            if not isinstance(member, str):
                return member
            return ids.setdefault(member, len(ids))

        if self.acc is not None:
            self.acc.steps = [(t, kind, number(subject) if kind in (_BEAT, _GONE) else subject, flags)
                              for t, kind, subject, flags in self.acc.steps]
        self.members = {number(m) for m in sorted(self.members, key=str)}
        self.ids = ids
        return ids

    def feed(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.add(ev)

    def add(self, ev: Event) -> None:
        if self.ids is None:
            self._numbered()
        if self.acc is None:
            self.acc = GroupHistory(ev.group_id, None)
        history, members = self.acc, self.members
        if ev.group_type:
            history.group_type = ev.group_type
        if ev.partition is not None:
            history.partition = ev.partition
        t = ev.timestamp
        if t is None:
            return
        history.end_time = t if history.end_time is None else max(history.end_time, t)
        kind = ev.event
        if kind == EventKind.GROUP_EPOCH_BUMPED:
            new, old = int(ev.get("new", 0) or 0), int(ev.get("old", 0) or 0)
            if new > old:
                # A heartbeat writes the member's record, then the bump: a bump right after a record of a member's
                # own heartbeat in the same append is that heartbeat's, which may compute at once. "Empty before"
                # leaves out a member that joined in that heartbeat (Kafka asks the group before applying it).
                previous = history.steps[-1] if history.steps else None
                by_heartbeat = (previous is not None and previous[0] == t and previous[1] == _BEAT
                                and previous[2] is not None)
                joined_now = None
                if by_heartbeat and previous is not None:   # that heartbeat computes after its bump, not before
                    joined_now = previous[2] if previous[3][0] else None
                    history.steps[-1] = (t, _BEAT, previous[2], (previous[3][0], True))
                history.steps.append((t, _BUMP, new, (not (members - {joined_now}), by_heartbeat)))
        elif kind == EventKind.TARGET_ASSIGNMENT_COMPUTED:
            ts = int(ev.get("assignment_timestamp", 0) or 0)
            epoch = int(ev.get("assignment_epoch", 0) or 0)
            if ts == 0 and not members:
                history.steps.append((t, _RESET, None, None))   # the last member left: no assignor ran
                self.last_ts = 0
                return
            if ts != 0 and ts == self.last_ts:
                return   # the streams refinement repeats the timestamp: no new computation
            if ts == 0:
                self.untimed += 1
            else:
                self.timed += 1
            self.last_ts = ts
            history.computations.append((ts or t, epoch))
            history.steps.append((ts or t, _BEAT, None, (False, False)))
        elif kind in (EventKind.GROUP_DELETED, EventKind.GROUP_TYPE_CHANGED, EventKind.GROUP_CREATED):
            if kind != EventKind.GROUP_CREATED or members:
                history.steps.append((t, _RESET, None, None))
            members.clear()
            self.last_ts = 0
        elif kind in _HEARTBEAT_EVENTS and ev.member_id is not None:
            if int(ev.get("member_epoch", 0) or 0) < 0:
                return   # a static member's temporary leave (epoch -2) is not a heartbeat that can compute
            member = self._member(ev.member_id)
            joined = kind == EventKind.MEMBER_JOINED and member not in members
            history.steps.append((t, _BEAT, member, (joined, False)))
            members.add(member)
        elif kind in _GONE_EVENTS and ev.member_id is not None:
            member = self._member(ev.member_id)
            if member in members:
                members.discard(member)
                history.steps.append((t, _GONE, member, None))

    def history(self, end_time_ms: int | None = None) -> GroupHistory:
        """The history of the events fed so far for a log ending at ``end_time_ms`` (a copy: feeding goes on)."""
        acc = self.acc
        if acc is None:
            return GroupHistory(None, None)
        history = GroupHistory(acc.group_id, acc.group_type, acc.partition,
                               sorted(acc.steps, key=lambda step: step[0]),   # stable: log order within a ms
                               list(acc.computations), self.untimed > 0 and self.timed == 0, acc.end_time)
        if end_time_ms is not None:
            history.end_time = max(history.end_time or end_time_ms, end_time_ms)
        return history


def can_compute_next_target_assignment(last_assignment_timestamp: int, interval_ms: int, now: int) -> bool:
    """``GroupMetadataManager.canComputeNextTargetAssignment``: no previous timestamp, no interval, or it passed."""
    return last_assignment_timestamp == 0 or interval_ms == 0 or now >= last_assignment_timestamp + interval_ms


@dataclass
class Computation:
    """One target assignment the replay computes: when, the times of the bumps it answers, and from when the rule
    (and a streams group's initial-delay timer) allowed it."""

    time: int
    bumps: list[int]
    allowed_from: int


@dataclass
class Replayed:
    """The computations one candidate interval gives, and the bumps no computation answered before the log ends."""

    interval_ms: int
    computations: list[Computation]
    #: the bumps still waiting when the log ends
    unanswered_bumps: list[int]
    end_time: int | None = None
    #: for bumps still unanswered: from when the rule allowed their computation
    pending_allowed_from: int | None = None

    @property
    def runs(self) -> int:
        return len(self.computations)

    @property
    def unanswered(self) -> int:
        return len(self.unanswered_bumps)

    def latencies(self) -> list[float]:
        """Each bump's time to assignment; a bump still waiting when the log ends counts with the time it has
        waited so far (a lower bound), so an interval that leaves bumps unanswered does not look faster."""
        out = [float(c.time - b) for c in self.computations for b in c.bumps]
        if self.end_time is not None:
            out += [float(max(self.end_time - b, 0)) for b in self.unanswered_bumps]
        return out

    def peak_minute_runs(self) -> int:
        per_minute: dict[int, int] = {}
        for c in self.computations:
            per_minute[c.time // MINUTE_MS] = per_minute.get(c.time // MINUTE_MS, 0) + 1
        return max(per_minute.values(), default=0)


def replay(history: GroupHistory, *, interval_ms: int, heartbeat_interval_ms: int | None,
           initial_rebalance_delay_ms: int = 0, silent: Sequence[tuple[int, int]] = (),
           timer_computes: bool = True) -> Replayed:
    """The computations Kafka's rule would make for ``history`` with the assignment interval ``interval_ms``.

    A computation happens at the first heartbeat at or after the moment the rule allows one (the first pending bump,
    the previous timestamp plus the interval). Heartbeats are the ones the log shows and, with a
    ``heartbeat_interval_ms``, for each member present one every interval after its last shown one, except within
    the ``silent`` stretches (``silent_stretches``), where the log shows that no heartbeat or timer computed. A
    streams group's initial-delay timer blocks the heartbeats' computations until it fires, and computes then if
    the rule allows (``timer_computes`` false: only a heartbeat after it does, as when the recorded computations
    themselves are the heartbeats)."""
    streams_delay = initial_rebalance_delay_ms if history.group_type == "streams" else 0
    beats = _Heartbeats(heartbeat_interval_ms) if heartbeat_interval_ms else None
    quiet = _Stretches(silent)
    pending: list[int] = []
    computations: list[Computation] = []
    last_ts = 0
    timer_at: int | None = None
    timer_due: int | None = None        # when the timer of the pending bumps was due
    previous_step: int | None = None

    def allowed(t: int) -> bool:
        return can_compute_next_target_assignment(last_ts, interval_ms, t)

    def compute(at: int) -> None:
        nonlocal last_ts, pending, timer_due
        start = pending[0]
        if last_ts and interval_ms:
            start = max(start, last_ts + interval_ms)
        if timer_due is not None:
            start = max(start, timer_due)
        computations.append(Computation(at, pending, min(start, at)))
        pending = []
        last_ts = at
        timer_due = None

    def between(until: int | None) -> None:
        """A computation before the next step at ``until`` (None: up to the log's end) on an unseen heartbeat or
        the streams timer."""
        nonlocal timer_at
        limit = until if until is not None else history.end_time
        if not pending or limit is None:
            return

        def before(t: int) -> bool:
            return t < limit if until is not None else t <= limit

        if timer_at is not None:
            fires = quiet.after(timer_at)
            if not before(fires) or not timer_computes:
                return                       # the heartbeats wait for the timer
            timer_at = None
            if allowed(fires):
                compute(fires)
                return
        if beats is None:
            return
        start = pending[0]
        if last_ts and interval_ms:
            start = max(start, last_ts + interval_ms)
        if previous_step is not None:
            start = max(start, previous_step + 1)   # the shown heartbeats up to the last step were taken as steps
        beat = beats.next_at_or_after(start)
        while beat is not None and quiet.within(beat):
            beat = beats.next_at_or_after(quiet.after(beat))
        if beat is not None and before(beat):
            compute(beat)

    for t, kind, subject, flags in history.steps:
        between(t)
        previous_step = t
        if kind == _BUMP:
            was_empty, by_heartbeat = flags
            if not pending and streams_delay and was_empty and timer_at is None:
                timer_at = timer_due = t + streams_delay
            pending.append(t)
            if by_heartbeat and timer_at is None and allowed(t):
                compute(t)                   # the heartbeat that bumped the epoch computes in the same request
        elif kind == _RESET:
            pending = []
            last_ts = 0
            timer_at = timer_due = None
        elif kind == _GONE:
            if beats is not None:
                beats.leave(subject)
        else:
            if subject is not None and beats is not None:
                beats.beat(subject, t)
            if pending and timer_at is not None and t >= timer_at:
                timer_at = None              # the timer fired by now
            if pending and timer_at is None and not flags[1] and allowed(t):
                compute(t)
    between(None)
    out = Replayed(interval_ms, computations, pending, history.end_time)
    if pending:
        start = pending[0]
        if last_ts and interval_ms:
            start = max(start, last_ts + interval_ms)
        out.pending_allowed_from = max(start, timer_due) if timer_due is not None else start
    return out


def silent_stretches(history: GroupHistory, interval_ms: int, initial_rebalance_delay_ms: int = 0) -> list[tuple[int, int]]:
    """The stretches ``[from, to)`` in which the log proves no heartbeat of the group computed: a bump was pending
    and the rule (at the interval the group ran with) allowed a computation from ``from``, yet the recorded one came
    only at ``to`` (or the log ended first). Replayed with the shown heartbeats only, the recorded computations
    come back where they are; the unseen heartbeats of the replay at other intervals are kept out of these
    stretches."""
    replayed = replay(history, interval_ms=interval_ms, heartbeat_interval_ms=None,
                      initial_rebalance_delay_ms=initial_rebalance_delay_ms, timer_computes=False)
    out = [(c.allowed_from, c.time) for c in replayed.computations if c.allowed_from < c.time]
    if replayed.unanswered and history.end_time is not None:
        start = replayed.pending_allowed_from
        if start is not None and start <= history.end_time:
            out.append((start, history.end_time + 1))
    return out


class _Stretches:
    """Sorted, non-overlapping stretches ``[from, to)``."""

    def __init__(self, stretches: Sequence[tuple[int, int]]) -> None:
        self.starts = [a for a, _ in stretches]
        self.ends = [b for _, b in stretches]

    def within(self, t: int) -> bool:
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.ends[i]

    def after(self, t: int) -> int:
        """``t``, or the end of the stretch holding it."""
        i = bisect.bisect_right(self.starts, t) - 1
        return self.ends[i] if i >= 0 and t < self.ends[i] else t


class _Heartbeats:
    """The members present and the phase of their heartbeats: a member that beat at ``t`` beats again at
    ``t + k * interval``. The phases are kept sorted, so the first heartbeat of any member after a moment is one
    bisection, however many members the group has."""

    def __init__(self, interval_ms: int) -> None:
        self.interval = max(int(interval_ms), 1)
        self.phase: dict[str, int] = {}
        self.sorted: list[int] = []

    def beat(self, member: str, t: int) -> None:
        self.leave(member)
        p = t % self.interval
        self.phase[member] = p
        bisect.insort(self.sorted, p)

    def leave(self, member: str) -> None:
        p = self.phase.pop(member, None)
        if p is not None:
            del self.sorted[bisect.bisect_left(self.sorted, p)]

    def next_at_or_after(self, start: int) -> int | None:
        if not self.sorted:
            return None
        base, offset = divmod(start, self.interval)
        i = bisect.bisect_left(self.sorted, offset)
        if i < len(self.sorted):
            return base * self.interval + self.sorted[i]
        return (base + 1) * self.interval + self.sorted[0]


@dataclass(frozen=True)
class RecordedCheck:
    """How the replay at the group's own interval compares with the log: the counts, and the largest difference
    between a replayed computation's time and the recorded one (when the counts agree)."""

    recorded_runs: int
    replayed_runs: int
    max_time_error_ms: int | None

    @property
    def matches(self) -> bool:
        return self.recorded_runs == self.replayed_runs and self.max_time_error_ms == 0


def check_recorded(history: GroupHistory, replayed: Replayed) -> RecordedCheck:
    recorded = [t for t, _ in history.computations]
    got = [c.time for c in replayed.computations]
    error = max((abs(a - b) for a, b in zip(recorded, got)), default=0) if len(recorded) == len(got) else None
    return RecordedCheck(len(recorded), len(got), error)


#: The columns of ``assignment_interval_whatif`` (one row per group and candidate, and the cluster's rows).
WHATIF_DDL = (
    "level string, group_id string, group_type string, partition int, interval_ms int, candidate string, "
    "recorded_interval_ms int, interval_known boolean, interval_source string, heartbeat_interval_ms int, "
    "initial_rebalance_delay_ms int, groups int, bumps long, recorded_runs long, runs long, runs_saved long, "
    "unanswered_bumps long, estimated_ms_per_run double, coordinator_ms double, peak_minute_runs int, "
    "peak_minute_share double, time_to_assignment_p50_ms double, time_to_assignment_p95_ms double, "
    "time_to_assignment_max_ms double, added_p95_ms double, replay_matches_log boolean, "
    "replay_time_error_ms long, replay_note string, meets_budget boolean, within_latency boolean, "
    "recommended boolean"
)
WHATIF_COLUMNS = tuple(part.split()[0] for part in WHATIF_DDL.split(", "))


@dataclass(frozen=True)
class Budget:
    """What a recommendation must keep: the group's busiest minute of assignor time under ``max_share`` of the
    minute, and its bumps' p95 time to assignment at most ``max_added_heartbeats`` heartbeat intervals above the
    interval it runs with."""

    max_share: float = 0.05
    max_added_heartbeats: float = 1.0


def candidate_intervals(recorded_ms: int | None, candidates: Sequence[int] = DEFAULT_CANDIDATES_MS) -> list[int]:
    """The candidates, the recorded interval among them, once each, in increasing order."""
    out = {int(c) for c in candidates}
    if recorded_ms is not None:
        out.add(int(recorded_ms))
    return sorted(out)


def what_if_rows(history: GroupHistory, intervals: GroupIntervals, *, run_ms: float | None,
                 candidates: Sequence[int] = DEFAULT_CANDIDATES_MS, budget: Budget = Budget()) -> list[dict]:
    """One ``assignment_interval_whatif`` row per candidate interval for one group (none for a classic group or a
    group without triggers). ``run_ms``: the group's estimated coordinator time per assignor run (the mean of its
    recorded runs' estimates, ``coordinator_load``), None when no run was timed."""
    if history.group_type not in MODERN_GROUP_TYPES or not history.steps or history.bumps == 0:
        return []
    recorded_interval = 0 if history.untimed else intervals.interval_ms
    delay = intervals.initial_rebalance_delay_ms if history.group_type == "streams" else 0
    hb = intervals.heartbeat_interval_ms
    silent = silent_stretches(history, recorded_interval, delay)
    replays = {c: replay(history, interval_ms=c, heartbeat_interval_ms=hb, initial_rebalance_delay_ms=delay,
                         silent=silent)
               for c in candidate_intervals(recorded_interval, candidates)}
    base = replays[recorded_interval]
    check = check_recorded(history, base)
    base_p95 = percentile(base.latencies(), 0.95)
    rows = []
    for interval, replayed in replays.items():
        latencies = replayed.latencies()
        p95 = percentile(latencies, 0.95)
        peak = replayed.peak_minute_runs()
        share = None if run_ms is None else peak * run_ms / MINUTE_MS
        added = None if p95 is None or base_p95 is None else p95 - base_p95
        row = {
            "level": "group", "group_id": history.group_id, "group_type": history.group_type,
            "partition": history.partition, "interval_ms": interval,
            "candidate": "recorded" if interval == recorded_interval else "candidate",
            "recorded_interval_ms": recorded_interval, "interval_known": intervals.interval_known and not history.untimed,
            "interval_source": ("AssignmentTimestamp 0 on every assignment: a broker before KIP-1263 computes at once"
                                if history.untimed else intervals.interval_source),
            "heartbeat_interval_ms": hb, "initial_rebalance_delay_ms": delay if history.group_type == "streams" else None,
            "groups": 1, "bumps": history.bumps, "recorded_runs": check.recorded_runs, "runs": replayed.runs,
            "runs_saved": check.recorded_runs - replayed.runs, "unanswered_bumps": replayed.unanswered,
            "estimated_ms_per_run": run_ms, "coordinator_ms": None if run_ms is None else replayed.runs * run_ms,
            "peak_minute_runs": peak, "peak_minute_share": share,
            "time_to_assignment_p50_ms": percentile(latencies, 0.5), "time_to_assignment_p95_ms": p95,
            "time_to_assignment_max_ms": float(max(latencies)) if latencies else None, "added_p95_ms": added,
            "replay_matches_log": check.matches if interval == recorded_interval else None,
            "replay_time_error_ms": check.max_time_error_ms if interval == recorded_interval else None,
            "replay_note": (None if interval != recorded_interval or check.matches else
                            _mismatch_note(history, check, recorded_interval, intervals.interval_known)),
            "meets_budget": None if share is None else share <= budget.max_share,
            "within_latency": added is None or added <= budget.max_added_heartbeats * hb,
            "recommended": False,
        }
        rows.append(row)
    _recommend(rows)
    return rows


def early_computations(history: GroupHistory, interval_ms: int) -> list[int]:
    """The gaps (ms) of the recorded computations that came sooner after the previous one than ``interval_ms``
    allows (``canComputeNextTargetAssignment``: none before the interval has passed, unless the group was emptied
    or reset in between). Kafka's rule never computes there, so a replay of it cannot give them back."""
    gaps = []
    last: int | None = None
    for t, kind, subject, _ in history.steps:
        if kind == _RESET:
            last = None
        elif kind == _BEAT and subject is None:
            if last is not None and interval_ms and t < last + interval_ms:
                gaps.append(t - last)
            last = t
    return gaps


def _mismatch_note(history: GroupHistory, check: RecordedCheck, interval_ms: int, known: bool) -> str:
    """Why the replay at the recorded interval does not give back the log's computations, for the report."""
    early = early_computations(history, interval_ms)
    if early:
        counted = (f"the log has {len(early)} computation(s) sooner after the previous one than the {interval_ms} ms "
                   f"interval allows (smallest gap {min(early)} ms), which Kafka's rule never makes")
        return counted + ("; the group broke its interval (see assignment_interval_violated)" if known else
                          "; the group probably runs with a smaller interval than the one assumed "
                          "(see assignment_interval_overridden)")
    error = "" if check.max_time_error_ms is None else f", times up to {check.max_time_error_ms} ms apart"
    return (f"the replay gives {check.replayed_runs} computation(s), the log {check.recorded_runs}{error}: heartbeats "
            "the log cannot show, or a log another writer made")


def group_intervals(broker: BrokerSettings, group_id: str | None, group_type: str) -> GroupIntervals:
    """The interval, heartbeat interval and (streams) initial rebalance delay one group ran with, as far as the
    broker settings and their group-configs snapshot tell (``group_configs``)."""
    basis = assignment_interval(broker, group_id, group_type)
    heartbeat, _ = group_setting_ms(broker, group_id, group_type, "heartbeat.interval.ms",
                                    KAFKA_DEFAULT_HEARTBEAT_INTERVAL_MS)
    delay = 0
    if group_type == "streams":
        delay, _ = group_setting_ms(broker, group_id, group_type, "initial.rebalance.delay.ms",
                                    KAFKA_DEFAULT_STREAMS_INITIAL_REBALANCE_DELAY_MS)
    if basis is None or basis.interval_ms is None:
        return GroupIntervals(KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS, heartbeat, delay, False, "Kafka's default")
    return GroupIntervals(basis.interval_ms, heartbeat, delay, basis.known, basis.source)


def what_if_rows_of_group(events: Sequence[Event], broker: BrokerSettings, *, run_ms: float | None,
                          end_time_ms: int | None, candidates: Sequence[int] = DEFAULT_CANDIDATES_MS,
                          budget: Budget = Budget()) -> list[dict]:
    """``what_if_rows`` of one group from its events in log order, with the settings it ran with."""
    return what_if_rows_of_history(group_history(events, end_time_ms=end_time_ms), broker, run_ms=run_ms,
                                   candidates=candidates, budget=budget)


def what_if_rows_of_history(history: GroupHistory, broker: BrokerSettings, *, run_ms: float | None,
                            candidates: Sequence[int] = DEFAULT_CANDIDATES_MS, budget: Budget = Budget()) -> list[dict]:
    """``what_if_rows`` of one group's history (``group_history``, or an incremental run's ``HistoryBuilder``),
    with the settings it ran with."""
    if history.group_type not in MODERN_GROUP_TYPES:
        return []
    return what_if_rows(history, group_intervals(broker, history.group_id, history.group_type), run_ms=run_ms,
                        candidates=candidates, budget=budget)


def depends_on_the_clock(rows: Iterable[Mapping]) -> bool:
    """Whether a later end of the log alone (no new record of the group) could change these rows: only a bump
    still unanswered at some interval waits on the clock (its wait so far, the stretch the log proves silent);
    every other answer is fixed by the records."""
    return any(r.get("unanswered_bumps") for r in rows)


def _recommend(rows: list[dict]) -> None:
    """Mark the interval to run with. A group within the budget at the interval it runs with keeps it: nothing
    about its coordinator time asks for a change, and a smaller interval would only spend more of the coordinator
    on it (KIP-1263's default of 1 s is a deliberate batching, not a cost to remove). A group over the budget gets
    the smallest candidate within the latency limit that meets the budget; when none meets it, the one within the
    limit with the least assignor time (then the smallest interval). A group whose runs were not timed gets no
    recommendation."""
    recorded = [r for r in rows if r["candidate"] == "recorded" and r["meets_budget"]]
    if recorded:
        recorded[0]["recommended"] = True
        return
    allowed = [r for r in rows if r["within_latency"] and r["meets_budget"] is not None]
    meeting = [r for r in allowed if r["meets_budget"]]
    if meeting:
        min(meeting, key=lambda r: r["interval_ms"])["recommended"] = True
    elif allowed:
        min(allowed, key=lambda r: (r["peak_minute_share"], r["coordinator_ms"], r["interval_ms"]))["recommended"] = True


def cluster_rows(group_rows: Iterable[Mapping]) -> list[dict]:
    """The cluster-wide picture over every group's rows: per candidate interval, every group at that interval; and
    ``candidate`` "recommended", every group at its recommendation (runs saved against the recorded runs, the p95
    added to the bumps' time to assignment, over the groups with a recommendation)."""
    by_interval: dict[int, list[Mapping]] = {}
    chosen: list[Mapping] = []
    for r in group_rows:
        if r.get("level") != "group":
            continue
        by_interval.setdefault(int(r["interval_ms"]), []).append(r)
        if r.get("recommended"):
            chosen.append(r)
    out = [_cluster_row(rows, interval, "candidate") for interval, rows in sorted(by_interval.items())]
    if chosen:
        out.append(_cluster_row(chosen, None, "recommended"))
    return out


def _total(rows: Sequence[Mapping], name: str) -> float | None:
    values = [r[name] for r in rows if r.get(name) is not None]
    return sum(values) if values else None


def _cluster_row(rows: Sequence[Mapping], interval: int | None, candidate: str) -> dict:
    added = [r["added_p95_ms"] for r in rows if r.get("added_p95_ms") is not None]
    row: dict[str, Any] = {c: None for c in WHATIF_COLUMNS}
    row.update({
        "level": "cluster", "interval_ms": interval, "candidate": candidate, "groups": len(rows),
        "bumps": _total(rows, "bumps"), "recorded_runs": _total(rows, "recorded_runs"), "runs": _total(rows, "runs"),
        "runs_saved": _total(rows, "runs_saved"), "unanswered_bumps": _total(rows, "unanswered_bumps"),
        "coordinator_ms": _total(rows, "coordinator_ms"),
        "time_to_assignment_p95_ms": max((r["time_to_assignment_p95_ms"] for r in rows
                                          if r.get("time_to_assignment_p95_ms") is not None), default=None),
        "time_to_assignment_max_ms": max((r["time_to_assignment_max_ms"] for r in rows
                                          if r.get("time_to_assignment_max_ms") is not None), default=None),
        "added_p95_ms": max(added) if added else None,
    })
    return row
