"""What every rule family shares: the group as the audit sees it while walking its events, and emit().

``GroupView`` is a light re-reading of the replay events (epochs, member epochs, current assignments),
enough for invariant checks; it does not redo the replay. Families see each event *before* the view
applies it (so they can compare old and new), and the view's state at the end of every batch
(records sharing one append timestamp, as the coordinator writes one ``CoordinatorResult`` per batch).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from offsets_audit.replay.state import GroupState, MemberState, modern_group_state
from offsets_audit.settings import RuleSettings, Settings

from ..causes import CauseTracker
from ..model import Event, EventKind, Finding, partitions_of

LEAVE_EPOCHS = (-1, -2)
#: ``Uuid.ZERO_UUID``: an OffsetCommitValue without a known topic id.
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass
class MemberView:
    member_id: str | None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = MemberState.STABLE
    assigned: dict = field(default_factory=dict)      # (topic_id, partition) -> assignment epoch
    pending: dict = field(default_factory=dict)       # partitions pending revocation
    tasks: dict = field(default_factory=dict)         # role -> {(subtopology, partition): epoch}
    tasks_pending: dict = field(default_factory=dict)
    subscribed_topic_names: list | None = None
    subscribed_topic_regex: str | None = None
    process_id: str | None = None
    task_lags: dict = field(default_factory=dict)     # (subtopology, partition) -> end offset - offset
    evidence: str | None = None                       # record of the last current-assignment change


class GroupView:
    """One group id while its events are walked in log order."""

    def __init__(self, group_id: str | None, group_type: str | None = None) -> None:
        self.group_id = group_id
        self.group_type = group_type
        self.exists = False
        self.created_in_log = False
        self.converted = False
        self.incarnation = 0
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.assignment_count = 0
        self.last_assignment: Event | None = None
        self.bumps: dict[int, Event] = {}
        self.members: dict[str | None, MemberView] = {}
        self.generation: int | None = None
        self.classic_members: list[str | None] = []
        self.topology_ready: bool | None = None
        self.last_time: int | None = None
        self.first_time: int | None = None
        #: (time, group type, had members) of a deletion that the very next event may turn into a conversion
        self._just_deleted: tuple | None = None

    # What the view keeps up to date as events change it, so that a batch end costs what the batch changed, not
    # the group's size (a group of m members holding p partitions was scanned whole at every one of its batch
    # ends). Class defaults only (``__init__`` sets none of them): a new view and one pickled in an incremental
    # checkpoint before they existed start from them alike, and rebuild what they need from the members on first use.
    #: ids of the members an event changed since the last ``batch_checked`` (None: every member).
    touched: set | None = None
    #: (topic_id, partition) -> how many members hold it (assigned or pending revocation); None: to rebuild.
    _holders: dict | None = None
    #: how many (topic_id, partition)s two members or more hold
    _shared = 0
    #: ids of the members not reconciled (``is_reconciled``) at ``assignment_epoch``; None: to rebuild.
    _unreconciled: set | None = None

    # -- derived state (ConsumerGroup.maybeUpdateGroupState) ---------------------------------------

    def is_reconciled(self, member: MemberView) -> bool:
        return member.state == MemberState.STABLE and member.member_epoch == self.assignment_epoch

    @property
    def state(self) -> GroupState:
        """The replay's ``GroupState`` as the events show it (the same derivation as ``replay.state``)."""
        if not self.exists:
            return GroupState.DEAD
        if self.group_type == "classic":
            return GroupState.STABLE if self.classic_members else GroupState.EMPTY
        if self.group_type == "streams" and self.topology_ready is False:
            return GroupState.NOT_READY
        # the unreconciled members kept as events change them: not a pass over every member at each batch end
        return modern_group_state(self.members, self.group_epoch, self.assignment_epoch,
                                  any_unreconciled=lambda: bool(self._unreconciled_members()))

    def _unreconciled_members(self) -> set:
        if self._unreconciled is None:
            self._unreconciled = {m.member_id for m in self.members.values() if not self.is_reconciled(m)}
        return self._unreconciled

    def changed_members(self) -> list[MemberView]:
        """The members an event changed since the last ``batch_checked`` (every member after a reset), in
        ``members``' order: a rule whose verdict on a member depends on that member alone, and that reports it once
        (an ``emit`` key), need check no other at a batch end."""
        touched = self.touched
        if touched is None:
            return list(self.members.values())
        if not touched:
            return []
        if len(touched) == 1:
            member = self.members.get(next(iter(touched)))
            return [] if member is None else [member]
        return [m for m in self.members.values() if m.member_id in touched]

    def batch_checked(self) -> None:
        """The rules have seen the view at a batch end: ``changed_members`` starts again from none."""
        self.touched = set()

    def _holdings(self) -> list:
        """Per member the (topic_id, partition)s it holds (assigned or pending revocation): ``owners()`` by member."""
        return [_held(m.assigned, m.pending) for m in self.members.values()]

    def held(self) -> set[tuple]:
        """The (topic_id, partition)s some member holds: ``owners()``' keys, without building its lists."""
        return set(self._holder_counts())

    def held_twice(self) -> bool:
        """Whether some (topic_id, partition) is held by two members: a count kept as assignments change, the
        common answer (no) without ``owners()``' per-partition lists or a pass over every member's partitions, which
        the audit would otherwise make at every batch's end."""
        self._holder_counts()
        return self._shared > 0

    def _holder_counts(self) -> dict:
        if self._holders is None:
            self._holders, self._shared = {}, 0
            for held in self._holdings():
                self._count_holdings(held, 1)
        return self._holders

    def _count_holdings(self, held, step: int) -> None:
        """Add (``step`` 1) or take away (-1) one member's holdings in ``_holders`` and ``_shared``."""
        holders = self._holders
        assert holders is not None  # built before any count (``holders()``)
        for tp in held:
            n = holders.get(tp, 0)
            if step > 0:
                holders[tp] = n + 1
                if n == 1:
                    self._shared += 1
            else:
                if n == 2:
                    self._shared -= 1
                if n <= 1:
                    del holders[tp]
                else:
                    holders[tp] = n - 1

    def _set_holdings(self, m: MemberView, assigned: dict, pending: dict) -> None:
        """``m`` holds ``assigned`` and ``pending`` now: the holder counts follow (only what changed)."""
        self._holder_counts()
        old, new = _held(m.assigned, m.pending), _held(assigned, pending)
        self._count_holdings(old - new, -1)
        self._count_holdings(new - old, 1)
        m.assigned, m.pending = assigned, pending

    def owners(self) -> dict[tuple, list[str | None]]:
        """(topic_id, partition) -> members holding it (assigned or pending revocation)."""
        out: dict[tuple, list[str | None]] = {}
        for m, held in zip(self.members.values(), self._holdings()):
            for tp in held:
                out.setdefault(tp, []).append(m.member_id)
        return out

    # -- applying events ---------------------------------------------------------------------------

    def apply(self, ev: Event) -> None:
        if ev.group_type:
            self.group_type = ev.group_type
        if ev.timestamp is not None:
            self.last_time = ev.timestamp
            if self.first_time is None:
                self.first_time = ev.timestamp
        kind = ev.event
        deleted_before, self._just_deleted = self._just_deleted, None
        if kind == EventKind.GROUP_CREATED:
            self._reset()
            self.exists = True
            self.created_in_log = not ev.get("simple", False)
            # A conversion (classic <-> consumer) is written in one batch: the old group's tombstones, then
            # the new group's records (GroupMetadataManager.convertToConsumerGroup / convertToClassicGroup).
            # A classic group must have had members (an empty one is simply replaced); a modern group's members
            # are tombstoned before the group itself, so only the type change is checked there.
            if (deleted_before is not None and deleted_before[0] == ev.timestamp
                    and deleted_before[1] != self.group_type
                    and (deleted_before[2] or deleted_before[1] != "classic")):
                self.converted = True
            self.incarnation += 1
            if self.group_type in ("consumer", "share", "streams"):
                # TargetAssignmentMetadata.INITIAL: epoch 1, timestamp 0 (KIP-1263), never written.
                self.assignment_epoch = 1
        elif kind == EventKind.GROUP_TYPE_CHANGED:
            self._reset()
            self.exists = True
            self.converted = True
            self.group_type = ev.get("new_type", self.group_type)
        elif kind == EventKind.GROUP_DELETED:
            self._just_deleted = (ev.timestamp, self.group_type, bool(self.classic_members or self.members))
            self._reset()
            self.exists = False
        elif kind == EventKind.GROUP_EPOCH_BUMPED:
            self.exists = True
            self.group_epoch = int(ev.get("new", 0))
            self.bumps[self.group_epoch] = ev
        elif kind == EventKind.TARGET_ASSIGNMENT_COMPUTED:
            self.exists = True
            epoch = int(ev.get("assignment_epoch", 0))
            if epoch != self.assignment_epoch:
                self._unreconciled = None  # every member's verdict may change with it
            self.assignment_epoch = epoch
            self.assignment_timestamp = int(ev.get("assignment_timestamp", 0))
            self.assignment_count += 1
            self.last_assignment = ev
        elif kind == EventKind.MEMBER_JOINED:
            self.exists = True
            if self.group_type == "classic":
                if ev.member_id not in self.classic_members:
                    self.classic_members.append(ev.member_id)
                return
            m = self.members.setdefault(ev.member_id, MemberView(ev.member_id))
            m.subscribed_topic_names = ev.details.get("subscribed_topic_names", m.subscribed_topic_names)
            m.subscribed_topic_regex = ev.details.get("subscribed_topic_regex", m.subscribed_topic_regex)
            m.process_id = ev.details.get("process_id", m.process_id)
        elif kind == EventKind.MEMBER_LEFT:
            if self.group_type == "classic":
                self.classic_members = [x for x in self.classic_members if x != ev.member_id]
            gone = self.members.pop(ev.member_id, None)
            if gone is not None and self._holders is not None:
                self._count_holdings(_held(gone.assigned, gone.pending), -1)
        elif kind == EventKind.MEMBER_FENCED_BY_TOMBSTONE:
            fenced = self.members.get(ev.member_id)
            if fenced is not None:
                m = fenced
                m.member_epoch = m.previous_member_epoch = -1
                self._set_holdings(m, {}, {})
                m.tasks, m.tasks_pending = {}, {}
                m.evidence = ev.where
        elif kind == EventKind.MEMBER_EPOCH_ADVANCED:
            m = self.members.setdefault(ev.member_id, MemberView(ev.member_id))
            m.member_epoch = int(ev.get("member_epoch", 0))
            m.previous_member_epoch = int(ev.get("previous_member_epoch", -1))
            m.state = ev.get("member_state", m.state)
        elif kind == EventKind.MEMBER_ASSIGNMENT_CHANGED:
            m = self.members.setdefault(ev.member_id, MemberView(ev.member_id))
            if "assigned_partitions" in ev.details or "partitions_pending_revocation" in ev.details:
                self._set_holdings(m, partitions_of(ev.details.get("assigned_partitions")),
                                   partitions_of(ev.details.get("partitions_pending_revocation")))
            if "assigned_tasks" in ev.details or "tasks_pending_revocation" in ev.details:
                m.tasks = {role: partitions_of(t) for role, t in (ev.details.get("assigned_tasks") or {}).items()}
                m.tasks_pending = {role: partitions_of(t)
                                   for role, t in (ev.details.get("tasks_pending_revocation") or {}).items()}
            m.evidence = ev.where
        if ev.member_id is not None:
            self._member_changed(ev.member_id)
        if ev.member_id in self.members and ("task_offsets" in ev.details and "task_end_offsets" in ev.details):
            self.members[ev.member_id].task_lags = _task_lags(ev.details)
        if kind == EventKind.CLASSIC_GENERATION_CHANGED:
            self.exists = True
            self.generation = ev.get("generation")
            self.classic_members = list(ev.get("members", []) or [])
        elif kind == EventKind.TOPOLOGY_CHANGED:
            ready = ev.details.get("ready")
            if ready is not None:
                self.topology_ready = bool(ready)

    def _member_changed(self, member_id: str) -> None:
        """An event was about ``member_id`` (joined, left, its epochs, state or holdings changed, or none of them):
        ``changed_members`` names it, and whether it is reconciled is asked again."""
        if self.touched is not None:
            self.touched.add(member_id)
        if self._unreconciled is not None:
            m = self.members.get(member_id)
            if m is None or self.is_reconciled(m):
                self._unreconciled.discard(member_id)
            else:
                self._unreconciled.add(member_id)

    def _reset(self) -> None:
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.assignment_count = 0
        self.last_assignment = None
        self.bumps = {}
        self.members = {}
        self.touched, self._holders, self._shared, self._unreconciled = None, {}, 0, None
        self.generation = None
        self.classic_members = []
        self.converted = False
        self.created_in_log = False
        self.topology_ready = None


def _held(assigned: dict, pending: dict):
    """The (topic_id, partition)s a member holds: assigned or pending revocation (a view of ``assigned``'s keys when
    nothing is pending, no copy)."""
    return assigned.keys() | pending.keys() if pending else assigned.keys()


def _task_lags(details: dict) -> dict:
    """(subtopology, partition) -> end offset minus reported offset, where both are known."""
    offsets = details.get("task_offsets") or {}
    ends = details.get("task_end_offsets") or {}
    out = {}
    for sub, parts in ends.items():
        for p, end in (parts or {}).items():
            have = (offsets.get(sub) or {}).get(p)
            if have is not None and end is not None:
                out[(sub, int(p))] = int(end) - int(have)
    return out


class RuleFamily:
    """Base of one module of rules. Subclasses override the hooks they need."""

    family = ""

    def __init__(self, ctx: AuditContext) -> None:
        self.ctx = ctx

    def on_event(self, ev: Event, view: GroupView) -> None:
        """Called with the view as it was *before* ``ev``."""

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        """Called after every run of events that share one record timestamp."""

    def finish(self, view: GroupView) -> None:
        """Called once after the group's last event."""

    def clock_horizon(self, view: GroupView, end: int | None) -> int | None:
        """For a family whose ``finish`` measures something up to the end of the log (``_end_time_ms``): the
        first end time after ``end`` at which ``finish`` could emit something else, asked after the last
        batch closed and before ``finish``. None (the default): ``finish`` does not read the end time."""
        return None


def timer_horizon(started: int | None, limit: int, end: int | None) -> int | None:
    """``RuleFamily.clock_horizon`` of one timer that fires once ``end - started > limit``: the first end time
    that fires it, or, once it fired, the next end time (the finding is measured to the end)."""
    if started is None:
        return None
    if end is None:
        return started + limit + 1
    return max(started + limit + 1, end + 1)


class CauseTrackingFamily(RuleFamily):
    """A rule family that attributes what it sees to causes: ``self.causes`` sees every event, before the
    family's ``_on_event`` and after it (even when that raises), so both sides of an event are tracked.

    ``share_causes`` gives several such families one tracker, which their walk then drives itself around all of
    them (``GroupAudit``): the tracker's state is a function of the events alone, so one serves them all."""

    #: whether ``on_event`` moves ``causes`` on (False once ``share_causes`` handed it to the walk)
    drives_causes = True

    def __init__(self, ctx: AuditContext) -> None:
        super().__init__(ctx)
        self.causes = CauseTracker()

    def on_event(self, ev: Event, view: GroupView) -> None:
        if not self.drives_causes:
            self._on_event(ev, view)
            return
        self.causes.on_event(ev)
        try:
            self._on_event(ev, view)
        finally:
            self.causes.after_event(ev)

    def _on_event(self, ev: Event, view: GroupView) -> None:
        """The family's own handling of ``ev``; the view is as it was *before* ``ev``."""


def share_causes(families: list) -> CauseTracker | None:
    """One ``CauseTracker`` for every ``CauseTrackingFamily`` of ``families``, which the caller now moves on around
    each event (``on_event`` before the families, ``after_event`` after them all); None when none is such a family.

    The last family's: ``GroupAudit`` appends the rebalance tracker last, the one family that also attributes
    classic generations (``attribute_classic`` keeps the classic members and protocol). Its tracker holds all the
    other ones did, so a checkpoint written with a tracker per family resumes from it."""
    trackers = [f for f in families if isinstance(f, CauseTrackingFamily)]
    if not trackers:
        return None
    shared = trackers[-1].causes
    for family in trackers:
        family.causes, family.drives_causes = shared, False
    return shared


class AuditContext:
    """The run's settings and rules, when the log ends, and the sink findings go to (deduplicated).

    ``end_time_ms``: the newest record of the whole input (None: the group's own last event), which pending
    transactions and stuck states are measured up to. The settings, rules and end time are the run's, never part
    of a group's stored state (``GroupAudit.to_bytes`` leaves them out; a resumed audit is given them again)."""

    #: Class defaults: a context pickled in an incremental checkpoint before these attributes starts from them.
    settings: Settings = Settings()
    rules: Mapping[str, RuleSettings] = {}
    end_time_ms: int | None = None

    def __init__(self, settings: Settings, group_id: str | None, *, rules: Mapping[str, RuleSettings] | None = None,
                 end_time_ms: int | None = None) -> None:
        self.use(settings, rules)
        self.end_time_ms = end_time_ms
        self.group_id = group_id
        self.findings: list[Finding] = []
        self._open_keys: set = set()

    def use(self, settings: Settings, rules: Mapping[str, RuleSettings] | None = None) -> None:
        """Audit with ``settings`` and ``rules`` (default: the settings' rules, else every rule's registry default)."""
        from .registry import default_rule_settings

        self.settings = settings
        self.rules = rules if rules is not None else (settings.rules or default_rule_settings())

    def enabled(self, rule: str) -> bool:
        """Whether ``rule`` is switched on; a rule id the registry does not know is a programming error."""
        settings = self.rules.get(rule)
        if settings is None:
            raise KeyError(f"unknown rule id {rule!r}: add it to audit/rules/registry.py")
        return settings.enabled

    def threshold(self, rule: str, name: str) -> Any:
        return self.rules[rule].threshold(name)

    def emit(self, rule: str, view: GroupView | None, time: int | None, message: str,
             evidence: Sequence[str | None],
             details: dict | None = None, key: Any = None) -> None:
        """Record a finding unless the rule is off or the same ``key`` is already open for this rule."""
        if not self.enabled(rule):
            return
        if key is not None:
            if (rule, key) in self._open_keys:
                return
            self._open_keys.add((rule, key))
        details = dict(details or {})
        if key is not None:
            details["key"] = key if isinstance(key, (str, int)) else list(key) if isinstance(key, tuple) else str(key)
        self.findings.append(Finding(
            rule=rule, severity=self.rules[rule].severity, group_id=view.group_id if view else self.group_id,
            group_type=view.group_type if view else None, time=time, message=message,
            evidence=[e for e in dict.fromkeys(evidence) if e], details=details))

    def close(self, rule: str, key: Any) -> None:
        """The condition behind ``key`` cleared: a later recurrence is a new finding."""
        self._open_keys.discard((rule, key))

    def is_open(self, rule: str, key: Any) -> bool:
        return (rule, key) in self._open_keys

    # -- broker configuration mirrored in conf ------------------------------------------------------

    def assignment_interval_ms(self, group_id: str | None, group_type: str | None) -> int | None:
        """``group.<type>.assignment.interval.ms`` or the group's own override (-1 = broker default)."""
        if group_type not in ("consumer", "share", "streams"):
            return None
        broker = self.settings.broker
        configured = broker.assignment_interval_ms(group_type)
        default = 1000 if configured is None else configured
        override = (broker.group_overrides.get(group_id or "") or {}).get("assignment_interval_ms")
        if override is None or int(override) == -1:
            return default
        return int(override)

    @property
    def kafka_version(self) -> str | None:
        return self.settings.broker.kafka_version
