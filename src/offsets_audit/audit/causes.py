"""Why did the group rebalance? The cause and the culprits of every group-epoch bump.

Kafka's group coordinator bumps a modern group's epoch in the same ``CoordinatorResult`` (one log batch)
as the records that made it do so (``GroupMetadataManager``):

* ``consumerGroupHeartbeat`` / ``shareGroupHeartbeat`` / ``streamsGroupHeartbeat`` write the member's
  ``*MemberMetadata`` record (a join, or a changed member), any static-member replacement records and
  regular-expression / topology records *before* the ``*GroupMetadata`` record with the new epoch;
* ``consumerGroupFenceMembers`` / ``shareGroupFenceMember`` / ``streamsGroupFenceMember`` (a leave, a
  session or rebalance timeout) write the member's tombstones, then the epoch record;
* ``handleRegularExpressionsResult`` writes the ``ConsumerGroupRegularExpression`` records, then the epoch;
* a heartbeat past the metadata refresh deadline bumps with only the epoch record when the group's
  ``MetadataHash`` (KIP-1101) changed: partitions added, topics created or deleted, racks moved.

``CauseTracker`` reads the replay events in log order and, for each bump, looks at the events of the
operation that wrote it: those since the previous operation's end within the same record timestamp
(the coordinator appends one batch with one timestamp). An operation ends at a current-assignment record,
a target assignment or another bump, so each of several bumps in one batch (KIP-1263 batching, several
operations in one append) gets its own causes. The vocabulary is ``CAUSES``; ``unknown`` means no record
explains the bump: it is counted, never guessed. docs/rules.md documents every cause.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .model import Event, EventKind

#: The fixed vocabulary of ``rebalances.causes`` (docs/rules.md, "Rebalance causes").
CAUSES = (
    "member_joined",              # a new member id (dynamic member, or a static instance seen for the first time)
    "member_left",                # a member's records were tombstoned: a leave or a session/rebalance timeout
    "static_member_replaced",     # the same instance id came back under a new member id
    "subscription_changed",       # subscribed topic names or regular expression changed
    "regex_resolution_changed",   # a regular expression resolved to other topics (record type 16)
    "topic_metadata_changed",     # the MetadataHash changed with the same subscribed topics
    "rack_changed",               # a member's rack changed (streams: epoch-relevant)
    "assignor_changed",           # a member's preferred server assignor changed
    "assignment_configs_changed",  # streams: the broker's assignment configs differ from the stored ones
    "group_converted",            # classic <-> consumer online migration
    "topology_changed",           # streams: a topology record, a member on another topology epoch, or validation
    "process_joined",             # streams: the first member of a process id
    "process_left",               # streams: the last member of a process id left
    "member_metadata_changed",    # streams dynamic member: any other metadata (client, endpoint, tags, timeout);
                                  # classic member: other protocol metadata with the same topics and rack
    "share_partitions_initialized",  # share: partitions whose share state got initialized wait to be assigned
    "protocol_changed",           # classic: the selected protocol changed with the generation
    "leader_rejoined",            # classic: the same members and metadata: the leader's JoinGroup started it
    "unknown",                    # no record of the bump's operation explains it
)

_CAUSE_RANK = {c: i for i, c in enumerate(CAUSES)}
#: Fields of one ``rebalances.cause_members`` element.
CAUSE_MEMBER_FIELDS = ("member_id", "instance_id", "client_id", "client_host", "rack_id", "process_id", "causes")

_IDENTITY = ("instance_id", "client_id", "client_host", "rack_id", "process_id")
_MEMBER_FIELDS = _IDENTITY + ("subscribed_topic_names", "subscribed_topic_regex", "server_assignor",
                              "topology_epoch")
#: Member-metadata changes that bump the epoch per group type (``hasMemberSubscriptionChanged``,
#: ``hasPreferredServerAssignorChanged``; streams: ``hasStreamsMemberMetadataChanged`` where a static
#: member bumps only on ``hasEpochRelevantMemberConfigChanged`` and a dynamic member on any change).
_FIELD_CAUSE = {"subscribed_topic_names": "subscription_changed", "subscribed_topic_regex": "subscription_changed",
                "server_assignor": "assignor_changed", "rack_id": "rack_changed",
                "topology_epoch": "topology_changed"}
_EPOCH_RELEVANT = {
    "consumer": ("subscribed_topic_names", "subscribed_topic_regex", "server_assignor"),
    "share": ("subscribed_topic_names",),
    "streams_static": ("rack_id", "client_tags", "process_id", "topology_epoch"),
}
#: Events that close an operation: what the coordinator writes after the bump or on its own.
_OPERATION_ENDS = (EventKind.TARGET_ASSIGNMENT_COMPUTED, EventKind.MEMBER_EPOCH_ADVANCED,
                   EventKind.MEMBER_ASSIGNMENT_CHANGED)


@dataclass
class Attribution:
    """The causes of one bump and the members behind them, in a fixed order (``CAUSES``, member id)
    whatever the order of the events of one record."""

    causes: list[str]
    cause_members: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.causes = sorted(self.causes, key=_CAUSE_RANK.__getitem__)
        for m in self.cause_members:
            m["causes"] = sorted(m["causes"], key=_CAUSE_RANK.__getitem__)
        self.cause_members = sorted(self.cause_members, key=lambda m: str(m["member_id"]))


class CauseTracker:
    """Walks one group's events (each *before* the view applies it) and attributes every epoch bump."""

    def __init__(self) -> None:
        self.members: dict[str | None, dict] = {}
        self.regex_topics: dict[str | None, list] = {}
        self.window: list[Event] = []
        self.window_time: int | None = None
        self._reset_window()
        self.converted = False
        self.share_initialized = False
        self.classic: dict[str | None, dict] = {}
        self.classic_protocol: str | None = None
        #: (timestamp, group type, had members, members that left in that batch) of the last group deletion: a
        #: group of the other type created in the same batch is a conversion (``convertToConsumerGroup`` /
        #: ``convertToClassicGroup`` write the old group's tombstones and the new group's records in one append)
        self.deleted: tuple | None = None
        #: the members whose leave converted a consumer group back to classic (the culprits of the conversion)
        self.conversion_left: dict[str, dict] = {}
        #: members that left at the current record timestamp (one append), with their identity
        self.batch_left: dict[str | None, dict] = {}
        #: the classic group's leader as of its last generation (``GroupMetadata.leader``)
        self.classic_leader: str | None = None
        #: after a downgrade: its culprits, for the generation of the rebalance the classic group starts
        self.downgrade_rebalance: dict[str, dict] | None = None

    # -- the walk -------------------------------------------------------------------------------

    def _reset_window(self) -> None:
        self.window = []
        self.undo: dict[str | None, dict | None] = {}
        self.regex_undo: dict[str | None, list | None] = {}

    def on_event(self, ev: Event) -> None:
        if ev.timestamp != self.window_time or not hasattr(self, "batch_left"):  # (a state from before batch_left)
            self._reset_window()
            self.window_time = ev.timestamp
            self.batch_left = {}
        kind = ev.event
        if kind in (EventKind.GROUP_CREATED, EventKind.GROUP_DELETED):
            if kind == EventKind.GROUP_DELETED:
                left = dict(self.batch_left)
                self.deleted = (ev.timestamp, ev.group_type, bool(self.members or self.classic or left), left)
            deleted = getattr(self, "deleted", None)
            converted = (kind == EventKind.GROUP_CREATED and deleted is not None
                         and deleted[0] == ev.timestamp and ev.group_type is not None
                         and deleted[1] not in (None, ev.group_type)
                         and (deleted[2] or deleted[1] != "classic"))
            self.conversion_left = dict(deleted[3]) if converted and deleted else {}
            self.members, self.regex_topics = {}, {}
            self.share_initialized = False
            self.converted = converted
            self.downgrade_rebalance = None
            if kind == EventKind.GROUP_DELETED:
                self.classic = {}
        elif kind == EventKind.GROUP_TYPE_CHANGED:
            self.members, self.regex_topics = {}, {}
            self.converted = True
        elif kind == EventKind.SHARE_STATE_PARTITION_METADATA and ev.get("initialized_topics"):
            self.share_initialized = True
        if kind in _OPERATION_ENDS and not self._part_of_operation(ev):
            self._reset_window()
        elif kind != EventKind.GROUP_EPOCH_BUMPED:
            self.window.append(ev)

    def _part_of_operation(self, ev: Event) -> bool:
        """A current-assignment record of a member that joined in this operation (a static replacement
        writes the new member's metadata, target and current assignment before the bump)."""
        return ev.event != EventKind.TARGET_ASSIGNMENT_COMPUTED and any(
            e.event == EventKind.MEMBER_JOINED and e.member_id == ev.member_id for e in self.window)

    def after_event(self, ev: Event) -> None:
        """Keep the member registry current (called after ``on_event`` and any attribution)."""
        kind = ev.event
        if kind in (EventKind.MEMBER_JOINED, EventKind.MEMBER_METADATA_CHANGED, EventKind.MEMBER_LEFT) and self.window:
            # What the registry held when the operation began: ``attribute`` compares before and after.
            self.undo.setdefault(ev.member_id, self.members.get(ev.member_id))
        if kind == EventKind.REGEX_RESOLUTION_CHANGED and self.window:
            self.regex_undo.setdefault(ev.get("regular_expression"), self.regex_topics.get(ev.get("regular_expression")))
        if kind == EventKind.MEMBER_JOINED:
            self.members[ev.member_id] = {f: ev.details.get(f) for f in _MEMBER_FIELDS}
        elif kind == EventKind.MEMBER_METADATA_CHANGED:
            m = self.members[ev.member_id] = dict(self.members.get(ev.member_id) or {})
            m.update(ev.details.get("new") or {})
            m.update({f: ev.details.get(f) for f in _IDENTITY if f in ev.details})
        elif kind == EventKind.MEMBER_LEFT:
            gone = self.members.pop(ev.member_id, None)
            if ev.member_id:
                self.batch_left[ev.member_id] = {**(gone or {}),
                                                 **{k: v for k, v in ev.details.items() if v is not None}}
        elif kind == EventKind.REGEX_RESOLUTION_CHANGED:
            regex = ev.get("regular_expression")
            if ev.details.get("topics") is None:
                self.regex_topics.pop(regex, None)
            else:
                self.regex_topics[regex] = list(ev.details["topics"])
        elif kind == EventKind.GROUP_EPOCH_BUMPED:
            self._reset_window()
            self.converted = False
            self.share_initialized = False

    # -- modern groups --------------------------------------------------------------------------

    def attribute(self, bump: Event, group_type: str | None) -> Attribution:
        """Causes of the bump ``bump`` (a ``group_epoch_bumped`` event) from its operation's events."""
        window = self.window
        causes: list[str] = []
        culprits: dict[str | None, dict] = {}

        def blame(member_id: str | None, cause: str, identity: dict) -> None:
            if cause not in causes:
                causes.append(cause)
            entry = culprits.setdefault(member_id, {"member_id": member_id, **{f: identity.get(f) for f in _IDENTITY},
                                                    "causes": []})
            for f in _IDENTITY:
                if entry[f] is None and identity.get(f) is not None:
                    entry[f] = identity[f]
            if cause not in entry["causes"]:
                entry["causes"].append(cause)

        joined = {e.member_id: e for e in window if e.event == EventKind.MEMBER_JOINED}
        left = {e.member_id: e for e in window if e.event == EventKind.MEMBER_LEFT}
        after = dict(self.members)
        before = dict(after)
        for mid, old in self.undo.items():
            if old is None:
                before.pop(mid, None)
            else:
                before[mid] = old
        regex_before = dict(self.regex_topics)
        for regex, old_topics in self.regex_undo.items():
            if old_topics is None:
                regex_before.pop(regex, None)
            else:
                regex_before[regex] = old_topics

        if self.converted:
            causes.append("group_converted")
            for mid, e in joined.items():
                blame(mid, "group_converted", e.details)
            joined = {}

        # Static replacement: the old member's tombstones and the new member id with the same instance id.
        left_by_instance = {e.get("instance_id"): mid for mid, e in left.items() if e.get("instance_id")}
        for mid, e in list(joined.items()):
            old_id = left_by_instance.get(e.get("instance_id")) if e.get("instance_id") else None
            if old_id is not None:
                # The new member is a copy of the old one (``ConsumerGroupMember.Builder(existing, memberId)``);
                # what it changes afterwards comes as a member_metadata_changed below.
                blame(mid, "static_member_replaced", e.details)
                del joined[mid], left[old_id]
        for mid, e in joined.items():
            blame(mid, "member_joined", e.details)
        for mid, e in left.items():
            identity = {**before.get(mid, {}), **{k: v for k, v in e.details.items() if v is not None}}
            blame(mid, "member_left", identity)

        for e in window:
            if e.event == EventKind.MEMBER_METADATA_CHANGED:
                relevant = _epoch_relevant(group_type, after.get(e.member_id) or e.details)
                for f in e.get("changed", []):
                    if group_type == "streams" and relevant is _ANY:
                        cause = _FIELD_CAUSE.get(f, "member_metadata_changed")
                    elif f in relevant:
                        cause = _FIELD_CAUSE.get(f, "member_metadata_changed")
                    else:
                        continue
                    identity = dict(after.get(e.member_id) or {})
                    identity.update({k: e.details.get(k) for k in _IDENTITY if e.details.get(k) is not None})
                    blame(e.member_id, cause, identity)
            elif e.event == EventKind.REGEX_RESOLUTION_CHANGED:
                regex = e.get("regular_expression")
                topics = e.details.get("topics")
                if topics != regex_before.get(regex) and "regex_resolution_changed" not in causes:
                    causes.append("regex_resolution_changed")
            elif e.event == EventKind.TOPOLOGY_CHANGED and e.get("old_topology_epoch") is not None \
                    and "topology_changed" not in causes:
                # The first topology of a group comes with its first member: that is the join.
                causes.append("topology_changed")

        if group_type == "streams":
            processes_before = {m.get("process_id") for m in before.values() if m.get("process_id")}
            processes_after = {m.get("process_id") for m in after.values() if m.get("process_id")}
            for mid, m in after.items():
                if m.get("process_id") and m["process_id"] not in processes_before:
                    blame(mid, "process_joined", m)
            for mid, m in before.items():
                if m.get("process_id") and m["process_id"] not in processes_after:
                    identity = {**m, **{k: v for k, v in left[mid].details.items() if v is not None}} \
                        if mid in left else m
                    blame(mid, "process_left", identity)
            if bump.get("assignment_configs_changed") and int(bump.get("old", 0) or 0) > 0:
                causes.append("assignment_configs_changed")

        hash_changed = bump.get("old_metadata_hash") is not None and \
            bump.get("old_metadata_hash") != bump.get("metadata_hash")
        if hash_changed and not self._subscribed_topics_changed(group_type, before, after, regex_before, window):
            causes.append("topic_metadata_changed")
        if group_type == "streams" and "topology_changed" not in causes and not hash_changed and \
                bump.details.get("old_validated_topology_epoch") != bump.details.get("validated_topology_epoch"):
            causes.append("topology_changed")
        if group_type == "share" and self.share_initialized and not causes:
            causes.append("share_partitions_initialized")
        tied = _tied_server_assignors(after) if group_type == "consumer" and not causes else set()
        if tied:
            # Members preferring different server assignors in equal numbers: the coordinator re-evaluates the
            # group's preferred assignor on a heartbeat (hasPreferredServerAssignorChanged) and can find it changed
            # with no member record written, which bumps the epoch alone, on any member's heartbeat for as long as
            # the tie lasts. No one heartbeat is to blame: the tie is, so its members are the culprits.
            causes.append("assignor_changed")
            for mid, m in after.items():
                if m.get("server_assignor") in tied:
                    blame(mid, "assignor_changed", m)
        if not causes:
            causes.append("unknown")
        return Attribution(causes, list(culprits.values()))

    def _subscribed_topics_changed(self, group_type, before: dict, after: dict, regex_before: dict,
                                   window: list[Event]) -> bool:
        """Did the group's subscribed topics (names and resolved regexes; streams: the topology) change in
        this operation? Then a MetadataHash change follows from it, not from the topics themselves."""
        if any(e.event in (EventKind.TOPOLOGY_CHANGED, EventKind.GROUP_TYPE_CHANGED, EventKind.GROUP_CREATED) for e in window):
            return True
        if any(e.event == EventKind.REGEX_RESOLUTION_CHANGED and e.details.get("topics") != regex_before.get(
                e.get("regular_expression")) for e in window):
            return True
        if group_type == "streams":
            return False

        def topics(members: dict, regexes: dict) -> set:
            out: set = set()
            for m in members.values():
                out.update(m.get("subscribed_topic_names") or ())
                regex = m.get("subscribed_topic_regex")
                if regex:
                    out.update(regexes.get(regex) or ())
            return out

        return topics(before, regex_before) != topics(after, self.regex_topics)

    # -- classic groups -------------------------------------------------------------------------

    def attribute_classic(self, generation_event: Event, record_events: list[Event]) -> Attribution:
        """Causes of a classic generation change: the members that joined, left or were replaced between
        the two ``GroupMetadata`` records, and a protocol change (``ClassicGroup`` is rewritten whole)."""
        causes: list[str] = []
        culprits: dict[str | None, dict] = {}

        def blame(mid, cause, identity):
            if cause not in causes:
                causes.append(cause)
            entry = culprits.setdefault(mid, {"member_id": mid, **{f: identity.get(f) for f in _IDENTITY},
                                              "causes": []})
            if cause not in entry["causes"]:
                entry["causes"].append(cause)

        joined = {e.member_id: e.details for e in record_events if e.event == EventKind.MEMBER_JOINED}
        left = {e.member_id: self.classic.get(e.member_id, {}) for e in record_events if e.event == EventKind.MEMBER_LEFT}
        downgrade = None if self.converted else getattr(self, "downgrade_rebalance", None)
        self.downgrade_rebalance = None
        if self.converted:
            # A consumer group downgraded to classic (GroupMetadataManager.convertToClassicGroup): its last
            # KIP-848 member left (a leave or a timeout, tombstoned in the same batch), and the classic-protocol
            # members it kept carry on in the classic group, which are not joins.
            self.converted = False
            causes.append("group_converted")
            pending: dict[str, dict] = {}
            for mid, d in getattr(self, "conversion_left", {}).items():
                if mid in joined:       # a classic-protocol member tombstoned in the consumer group, kept here
                    continue
                blame(mid, "member_left", d)
                blame(mid, "group_converted", d)
                pending[mid] = d
            self.conversion_left = {}
            # The classic group starts a rebalance right away (its members learn of it on their next heartbeat):
            # the generation that rebalance completes is the conversion's too.
            self.downgrade_rebalance = pending or {"": {}}
            joined = {}
        for mid, change in sorted((generation_event.get("member_changes") or {}).items()):
            if mid not in joined:
                blame(mid, change, self.classic.get(mid, {}))
        left_by_instance = {m.get("instance_id"): mid for mid, m in left.items() if m.get("instance_id")}
        for mid, d in list(joined.items()):
            old = left_by_instance.get(d.get("instance_id")) if d.get("instance_id") else None
            if old is not None:
                blame(mid, "static_member_replaced", d)
                del joined[mid], left[old]
        for mid, d in joined.items():
            blame(mid, "member_joined", d)
        for mid, d in left.items():
            blame(mid, "member_left", d)
        protocol = generation_event.get("protocol")
        if self.classic_protocol is not None and protocol is not None and protocol != self.classic_protocol:
            causes.append("protocol_changed")
        for e in record_events:
            if e.event == EventKind.MEMBER_JOINED:
                self.classic[e.member_id] = {f: e.details.get(f) for f in _IDENTITY}
            elif e.event == EventKind.MEMBER_LEFT:
                self.classic.pop(e.member_id, None)
        if protocol is not None:
            self.classic_protocol = protocol
        if not causes and downgrade is not None:
            # nothing else changed: the rebalance a downgrade starts (ClassicGroup in PreparingRebalance)
            causes.append("group_converted")
            for mid, d in downgrade.items():
                if mid:
                    blame(mid, "group_converted", d)
        leader = getattr(self, "classic_leader", None)
        if not causes and leader is not None and leader in self.classic \
                and generation_event.get("old_generation") is not None:
            # Same members, same metadata: in a Stable classic group only a JoinGroup from the leader starts a
            # rebalance without either changing (ClassicGroup / GroupMetadataManager.updateMemberThenRebalanceOrCompleteJoin).
            blame(leader, "leader_rejoined", self.classic[leader])
        self.classic_leader = generation_event.get("leader") or leader
        if not causes:
            causes.append("unknown")
        return Attribution(causes, list(culprits.values()))


def _tied_server_assignors(members: dict[str | None, dict]) -> set[str]:
    """The server assignors each preferred by the most members, when there are two or more of them (else none)."""
    counts = Counter(m.get("server_assignor") for m in members.values() if m.get("server_assignor"))
    if not counts:
        return set()
    best = max(counts.values())
    tied = {str(name) for name, n in counts.items() if n == best}
    return tied if len(tied) > 1 else set()


_ANY = ("*",)


def _epoch_relevant(group_type: str | None, member: dict) -> tuple:
    if group_type == "streams":
        return _EPOCH_RELEVANT["streams_static"] if member.get("instance_id") else _ANY
    return _EPOCH_RELEVANT.get(group_type or "", ())


def dominant(rows: list[dict], top: int = 3) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The most frequent causes and culprits (``client_id@client_host``) over some rebalance rows."""
    causes: Counter = Counter()
    culprits: Counter = Counter()
    for r in rows:
        causes.update(r.get("causes") or ())
        seen = {culprit_name(m) for m in r.get("cause_members") or ()}
        culprits.update(n for n in seen if n)
    return causes.most_common(top), culprits.most_common(top)


def culprit_name(member: dict) -> str | None:
    """``client_id@client_host`` of a cause member (what an operator recognises), else its member id."""
    client, host = member.get("client_id"), member.get("client_host")
    if client or host:
        return f"{client or '?'}@{host or '?'}"
    return member.get("member_id")


def summarize_causes(rebalances: list[dict]) -> list[dict]:
    """``rebalance_causes`` rows: rebalances per (group, day, cause) and per (client id, client host, day)."""
    by_cause: Counter = Counter()
    by_client: Counter = Counter()
    client_groups: dict = {}
    for r in rebalances:
        for cause in r.get("causes") or ("unknown",):
            key = (r["group_type"], r["group_id"], r["day"], cause)
            by_cause[key] += 1
        seen = set()
        for m in r.get("cause_members") or ():
            client_key = (m.get("client_id"), m.get("client_host"), r["day"])
            if client_key not in seen:
                seen.add(client_key)
                by_client[client_key] += 1
                client_groups.setdefault(client_key, set()).add(r["group_id"])
    out = []
    for (group_type, group_id, day, cause), n in sorted(by_cause.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        out.append({"level": "group_day_cause", "group_type": group_type, "group_id": group_id, "day": day,
                    "cause": cause, "client_id": None, "client_host": None, "rebalances": n, "groups": 1})
    for (client_id, client_host, day), n in sorted(by_client.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        out.append({"level": "client_day", "group_type": None, "group_id": None, "day": day, "cause": None,
                    "client_id": client_id, "client_host": client_host, "rebalances": n,
                    "groups": len(client_groups[(client_id, client_host, day)])})
    return out
