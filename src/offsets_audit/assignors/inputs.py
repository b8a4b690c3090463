"""What the coordinator handed its assignor, rebuilt from one replayed target assignment.

Every ``ConsumerGroupTargetAssignmentMetadata`` (and the share / streams equivalents) marks one run of the
server-side assignor. ``GroupMetadataManager.maybeUpdateTargetAssignment`` builds that run's input from:

* the group's members as of that moment (``TargetAssignmentBuilder.withMembers``), where a static member
  that replaced another one under the same ``instance_id`` inherits its predecessor's target
  (``UpdatedMembersAndTargetAssignmentView.addOrUpdateMember``);
* each member's subscribed topic names, plus the topics its regular expression resolved to
  (``ConsumerGroupRegularExpression`` records, type 16), resolved to topic ids against the metadata image
  (``ConsumerTargetAssignmentBuilder.newMemberSubscriptionAndAssignment``);
* the current assignment of each member = its target before this run (``targetAssignment``);
* the subscription type (``ConsumerGroup.subscriptionType``, regex-aware; ``ModernGroup.subscriptionType``
  for share groups);
* share groups: the initialized share partitions (``ShareGroupStatePartitionMetadata.initializedTopics``,
  empty when the group has none) as ``assignable_partitions``;
* streams groups: the topology (``StreamsGroupTopology``), the assignment configs stored with the group epoch
  (``lastAssignmentConfigs``), process ids, client tags and previous tasks. Task offsets come from heartbeats
  and are not in the log, so they are empty here.

``reconstruct_group(rows, snapshot)`` turns the ``target_assignments`` rows of one group (docs/replay.md) into
``AssignorRun`` records whose ``case_input`` is in the golden assignor layout (``tests/golden/README.md``), ready
for ``offsets_audit.assignors.run``.

Topic metadata is not in the log (KIP-1101); see ``topic_metadata`` for the sources and the ``confidence``
levels: ``metadata_verified`` (the topics reproduce the group's recorded metadata hash),
``metadata_provided`` (a snapshot was given but the hash does not match or is absent),
``partition_metadata_record`` (deprecated type 4/9/18 record) and ``inferred`` (partition counts from the
recorded assignments).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from offsets_audit.assignors.common import HETEROGENEOUS, HOMOGENEOUS
from offsets_audit.assignors.java_order import hashmap_order, java_string_hash
from offsets_audit.assignors.uniform import BEFORE_4_0 as UNIFORM_BEFORE_4_0
from offsets_audit.assignors.topic_metadata import (
    TopicMetadata,
    repair_partition_counts,
    topics_from_partition_metadata,
    verify_metadata_hash,
)

#: Kafka's default ``group.consumer.assignors`` first entry (the assignor used without a client preference).
DEFAULT_CONSUMER_ASSIGNOR = "uniform"
SHARE_ASSIGNOR = "simple"
STREAMS_ASSIGNOR = "sticky"

METADATA_VERIFIED = "metadata_verified"
METADATA_PROVIDED = "metadata_provided"
PARTITION_METADATA_RECORD = "partition_metadata_record"
INFERRED = "inferred"

_JSON_FIELDS = ("members", "target", "previous_target", "topology", "resolved_regular_expressions",
                "counted_regular_expressions",
                "partition_metadata", "assignment_configs", "initialized_topics")


@dataclass
class AssignorRun:
    """One recorded target assignment and the input rebuilt for re-running its assignor."""

    group_id: str
    group_type: str
    assignment_epoch: int
    assignment_timestamp: int | None
    partition: int | None
    offset: int | None
    assignor: str
    case_input: dict
    recorded: dict
    confidence: str
    metadata_source: str
    metadata_hash_match: bool | None
    notes: list[str] = field(default_factory=list)
    #: whether the user's snapshot itself (as of the assignment time, unrepaired) reproduces the hash
    snapshot_hash_match: bool | None = None
    #: other server assignors as many members prefer as ``assignor``: Kafka's pick among them follows its maps'
    #: iteration orders, so a re-run that does not match with ``assignor`` tries these
    tied_assignors: list[str] = field(default_factory=list)
    #: ``classic_conversion``: the target an online upgrade wrote, the classic group's own assignment carried over
    #: (``ConsumerGroup.fromClassicGroup``); no server assignor computed it
    origin: str | None = None
    #: whether the group's coordinator predates Kafka 4.0 (``broker.kafka_version``); ``None`` when not configured
    before_4_0: bool | None = None


def predates_4_0(kafka_version: str | None) -> bool | None:
    """Whether brokers of ``kafka_version`` (``"3.9"``, ``"3.9.1"``) predate Kafka 4.0, whose coordinator changed
    how the uniform assignor hands out extra partitions; ``None`` when the version is not known."""
    if kafka_version is None:
        return None
    head = str(kafka_version).strip().split(".")[0]
    return int(head) < 4 if head.isdigit() else None


def parse_row(row: Mapping) -> dict:
    """A ``target_assignments`` row with its JSON string columns parsed (pure rows pass through)."""
    out = dict(row)
    for name in _JSON_FIELDS:
        value = out.get(name)
        if isinstance(value, str):
            out[name] = json.loads(value)
    return out


# ---------------------------------------------------------------------------------------------------------------
# subscriptions

def _regex_topics(member: Mapping, resolved: Mapping | None) -> list[str] | None:
    regex = member.get("subscribed_topic_regex")
    if not regex:
        return None
    entry = (resolved or {}).get(regex)
    return None if entry is None else list(entry.get("topics") or ())


def member_subscription(member: Mapping, resolved: Mapping | None) -> list[str]:
    """Names the member subscribes to: its topic names, united with its resolved regex (type 16)."""
    names = list(member.get("subscribed_topic_names") or ())
    by_regex = _regex_topics(member, resolved)
    if by_regex:
        seen = set(names)
        names.extend(t for t in by_regex if t not in seen)
    return names


def _string_hashset(names: list[str]) -> list[str]:
    """Iteration order of ``new HashSet<>(names)``: the set a member's topic names (and a resolved regular
    expression's topics) live in once replayed (``ConsumerGroupMember.Builder``, ``ResolvedRegularExpression``)."""
    unique = list(dict.fromkeys(names))
    return hashmap_order(unique, None, max(int(len(unique) / 0.75) + 1, 16))


def subscription_iteration_order(member: Mapping, resolved: Mapping | None) -> list[str]:
    """The member's subscribed topic names in the order the assignor meets them: ``TopicIds`` over the member's
    names set, or over ``UnionSet(names, regex topics)`` (the larger set first, then the other's topics it lacks)
    when its regular expression is resolved (``ConsumerTargetAssignmentBuilder.newMemberSubscriptionAndAssignment``).
    The order decides where two topic ids share a bucket of the assignor's ``HashSet<Uuid>``."""
    names = _string_hashset(list(member.get("subscribed_topic_names") or ()))
    by_regex = _regex_topics(member, resolved)
    if not by_regex:
        return names
    regex_topics = _string_hashset(by_regex)
    if not names:
        return regex_topics
    large, small = (names, regex_topics) if len(names) > len(regex_topics) else (regex_topics, names)
    in_large = set(large)
    return large + [t for t in small if t not in in_large]


def consumer_subscription_type(members: list[Mapping], resolved: Mapping | None,
                               every_resolution: bool = False) -> str:
    """``ConsumerGroup.subscriptionType``: by-name counts, and the one-regex-for-everyone special case.

    ``every_resolution``: count the topics of every resolution in ``resolved``, used by a member or not, as the
    group's stored type does (its topic counts hold each resolution until its tombstone is replayed)."""
    n = len(members)
    regex_counts = Counter(m["subscribed_topic_regex"] for m in members if m.get("subscribed_topic_regex"))
    by_name: Counter = Counter()
    for m in members:
        by_name.update(set(m.get("subscribed_topic_names") or ()))
    by_regex: Counter = Counter()
    for regex in (resolved or {}) if every_resolution else regex_counts:
        entry = (resolved or {}).get(regex)
        if entry is not None:
            by_regex.update(set(entry.get("topics") or ()))
    topics = set(by_name) | set(by_regex)
    if not regex_counts:
        return HOMOGENEOUS if all(by_name[t] == n for t in topics) else HETEROGENEOUS
    if next(iter(regex_counts.values())) == n:
        ok = all(by_regex[t] == 1 and by_name[t] == 0 for t in topics)
        return HOMOGENEOUS if ok else HETEROGENEOUS
    return HETEROGENEOUS


def share_subscription_type(members: list[Mapping]) -> str:
    """``ModernGroup.subscriptionType``: homogeneous when every subscribed name has every member."""
    n = len(members)
    counts: Counter = Counter()
    for m in members:
        counts.update(set(m.get("subscribed_topic_names") or ()))
    return HOMOGENEOUS if all(c == n for c in counts.values()) else HETEROGENEOUS


def streams_required_topics(topology: Mapping | None) -> list[str]:
    """``StreamsTopology.requiredTopics``: source, repartition source and changelog topics."""
    names: set[str] = set()
    for s in (topology or {}).get("subtopologies") or ():
        names.update(s.get("sourceTopics") or ())
        names.update(t.get("name") for t in s.get("repartitionSourceTopics") or ())
        names.update(t.get("name") for t in s.get("stateChangelogTopics") or ())
    names.discard(None)
    return sorted(names)


def hashed_topic_names(row: Mapping) -> list[str]:
    """The topic names the group's ``metadataHash`` covers (``subscribedTopicNames`` of the group)."""
    if row["group_type"] == "streams":
        return streams_required_topics(row.get("topology"))
    resolved = row.get("resolved_regular_expressions")
    names: set[str] = set()
    for m in row.get("members") or ():
        names.update(member_subscription(m, resolved))
    return sorted(names)


# ---------------------------------------------------------------------------------------------------------------
# inference of topics from the recorded assignments

def _max_partitions(assignment: Mapping | None, into: dict[str, int]) -> None:
    for topic_partitions in (assignment or {}).values():
        for topic_id, partitions in (topic_partitions or {}).items():
            if partitions:
                into[topic_id] = max(into.get(topic_id, 0), max(int(p) for p in partitions) + 1)


class TopicNames:
    """Topic id -> name of one group, learned from its target assignments in log order (``observe``).

    The target records name topic ids only; the names come from the metadata image (KIP-1101), where an id names
    one topic for the topic's whole life (a re-created topic gets a new id). So a name learned from any target
    holds for every target of the group, earlier ones included, and once learned it is never revised:

    * by the group's partition-metadata record (type 4 / 9, written before Kafka 4.1): the image's own pairing;
    * by subscription: an id can only be a topic every member assigned it subscribes to. Candidate names per id
      are intersected over the targets seen so far (consumer and share rows); an id left with a single name
      once the names already taken are removed is named, until nothing changes;
    * by the metadata hash (no topic snapshot given): where subscriptions cannot tell which id is which topic
      (every member subscribes to all of them), each pairing of a target's unnamed ids with its unnamed
      subscribed names is tried, and the first whose inferred topics reproduce the recorded ``metadataHash``
      names them.

    First evidence wins: a later target that contradicts a learned name (an assignment to a member not
    subscribed to the topic) cannot rename the topic for the earlier, healthy targets. The state is small
    (candidates per id, names), so an incremental run resumes it (``assignors.rerun.GroupRerun``).
    """

    MAX_HASH_TRIALS = 5040

    def __init__(self, *, use_hash: bool = True) -> None:
        self.use_hash = use_hash
        self.candidates: dict[str, set[str]] = {}   # first-seen order: the naming pass iterates it
        self.names: dict[str, str] = {}

    def observe(self, row: Mapping) -> None:
        """Learn from one parsed ``target_assignments`` row (rows in log order)."""
        if row.get("group_type") not in ("consumer", "share"):
            return
        narrowed = False
        for topic in topics_from_partition_metadata(row.get("partition_metadata")):
            if topic["id"] and topic["name"] and topic["id"] not in self.names:
                self.names[topic["id"]] = topic["name"]  # the metadata image's own pairing (Kafka 4.0 records)
                narrowed = True
        resolved = row.get("resolved_regular_expressions")
        subscriptions = {m["member_id"]: set(member_subscription(m, resolved)) for m in row.get("members") or ()}
        for member_id, assignment in (row.get("target") or {}).items():
            names = subscriptions.get(member_id)
            if not names:
                continue
            for topic_id, partitions in (assignment or {}).items():
                if not partitions:
                    continue
                before = self.candidates.get(topic_id)
                after = before & names if before is not None else set(names)
                if after != before:
                    self.candidates[topic_id] = after
                    narrowed = narrowed or topic_id not in self.names
        if narrowed:
            self._name_by_subscription()
        if self.use_hash and row.get("metadata_hash"):
            self._name_by_hash(row)

    def _name_by_subscription(self) -> None:
        changed = True
        while changed:
            changed = False
            taken = set(self.names.values())
            for topic_id, names in self.candidates.items():
                if topic_id in self.names:
                    continue
                left = names - taken
                if len(left) == 1:
                    self.names[topic_id] = next(iter(left))
                    taken.add(self.names[topic_id])
                    changed = True

    def _name_by_hash(self, row: Mapping) -> None:
        from itertools import permutations

        counts: dict[str, int] = {}
        _max_partitions(row.get("target"), counts)
        open_ids = sorted(t for t in counts if t not in self.names)
        if not open_ids:
            return
        open_names = sorted(set(hashed_topic_names(row)) - set(self.names.values()))
        if len(open_names) < len(open_ids):
            return
        for trials, names in enumerate(permutations(open_names, len(open_ids)), start=1):
            if trials > self.MAX_HASH_TRIALS:
                return
            trial = dict(self.names)
            trial.update(zip(open_ids, names))
            if verify_metadata_hash(row["metadata_hash"], hashed_topic_names(row), inferred_topics(row, trial)):
                self.names = trial
                self._name_by_subscription()  # the names just taken may leave another id a single candidate
                return

    def names_every_topic_of(self, row: Mapping) -> bool:
        """Whether every topic id ``row``'s target assigns has a name: then its rebuilt input is final (names
        are never revised). Streams targets name subtopologies, not topic ids."""
        if row.get("group_type") == "streams":
            return True
        counts: dict[str, int] = {}
        _max_partitions(row.get("target"), counts)
        return all(topic_id in self.names for topic_id in counts)


def infer_topic_names(rows: Iterable[Mapping], *, use_hash: bool = False) -> dict[str, str]:
    """Topic id -> name from a group's target rows in log order (``TopicNames``; the hash only if asked)."""
    learned = TopicNames(use_hash=use_hash)
    for row in rows:
        learned.observe(row)
    return learned.names


def inferred_topics(row: Mapping, names_by_id: Mapping[str, str]) -> dict[str, dict]:
    """``{name: topic}`` with partition counts = highest partition in this recorded target + 1."""
    counts: dict[str, int] = {}
    _max_partitions(row.get("target"), counts)
    out = {}
    for topic_id, count in counts.items():
        name = names_by_id.get(topic_id)
        if name is not None:
            out[name] = {"id": topic_id, "name": name, "partitions": count, "partition_racks": None}
    return out


# ---------------------------------------------------------------------------------------------------------------
# choosing the topics one run saw

def choose_topics(row: Mapping, snapshot: TopicMetadata | None, names_by_id: Mapping[str, str]
                  ) -> tuple[dict[str, dict], str, str, bool | None, list[str]]:
    """Topics for one run: ``(topics_by_name, confidence, metadata_source, metadata_hash_match, notes)``.

    Candidates, best first: the snapshot as of the assignment time; the snapshot with one topic's partition
    count repaired by the recorded hash; the deprecated partition-metadata record; counts inferred from the
    recorded target (also checked against the hash). The first candidate reproducing the hash wins.
    """
    names = hashed_topic_names(row)
    recorded_hash = row.get("metadata_hash")
    lower_bounds: dict[str, int] = {}
    inferred = inferred_topics(row, names_by_id)
    for name, t in inferred.items():
        lower_bounds[name] = t["partitions"]
    notes: list[str] = []
    candidates: list[tuple[str, dict[str, dict]]] = []
    if snapshot:
        at = snapshot.as_of(row.get("assignment_timestamp") or None)
        candidates.append(("snapshot", at))
    record_topics = topics_from_partition_metadata(row.get("partition_metadata"))
    if record_topics:
        candidates.append(("partition_metadata_record", {t["name"]: t for t in record_topics}))
    if inferred:
        merged = dict(candidates[0][1]) if candidates else {}
        merged.update(inferred)
        candidates.append(("inferred", merged))

    first_match = None
    for source, topics in candidates:
        match = verify_metadata_hash(recorded_hash, names, topics)
        if match:
            first_match = (source, topics, True)
            break
        if match is False and source == "snapshot" and recorded_hash is not None:
            repaired = repair_partition_counts(recorded_hash, names, topics, lower_bounds=lower_bounds)
            if repaired is not None:
                changed = sorted(n for n in set(repaired) | set(topics)
                                 if (repaired.get(n) or {}).get("partitions") != (topics.get(n) or {}).get("partitions"))
                notes.append("snapshot partition counts repaired by the metadata hash: "
                             + ", ".join(f"{n}={(repaired.get(n) or {}).get('partitions', 'absent')}" for n in changed))
                first_match = ("snapshot_repaired", repaired, True)
                break
    if first_match is not None:
        source, topics, _ = first_match
        return topics, METADATA_VERIFIED, source, True, notes
    if snapshot:
        topics = candidates[0][1]
        return topics, METADATA_PROVIDED, "snapshot", verify_metadata_hash(recorded_hash, names, topics), notes
    if record_topics:
        topics = {t["name"]: t for t in record_topics}
        return (topics, PARTITION_METADATA_RECORD, "partition_metadata_record",
                verify_metadata_hash(recorded_hash, names, topics), notes)
    if inferred:
        notes.append("no topic metadata: partition counts are lower bounds from the recorded assignment")
    return inferred, INFERRED, "inferred", verify_metadata_hash(recorded_hash, names, inferred), notes


# ---------------------------------------------------------------------------------------------------------------
# member order: Kafka's TimelineHashMap, then the OverlayMap of the heartbeat's changes

_FIBONACCI_MULTIPLIER = -7046029254386353131
_MASK64 = (1 << 64) - 1


def timeline_slot(key: str, capacity: int) -> int:
    """``BaseHashTable.findSlot``: Knuth multiplicative hash of ``String.hashCode``, top ``log2(capacity)`` bits."""
    product = (java_string_hash(key) * _FIBONACCI_MULTIPLIER) & _MASK64
    return product >> (65 - capacity.bit_length())


def timeline_grow(capacity: int, size_before_insert: int) -> int:
    """``BaseHashTable.baseAddOrReplace``: double while one more element would pass the 0.75 load factor (checked
    on every put, a replacement too)."""
    while (size_before_insert + 1) * 0.75 > capacity:
        capacity *= 2
    return capacity


def timeline_order(keys_in_insertion_order: list[str], capacity: int) -> list[str]:
    """Iteration order of a ``TimelineHashMap`` (the group's ``members``): slots ascending, and inside a slot
    the *last* inserted first (``SnapshottableHashTable.CurrentIterator`` pops from the end of the slot)."""
    indexed = list(enumerate(keys_in_insertion_order))
    indexed.sort(key=lambda item: (timeline_slot(item[1], capacity), -item[0]))
    return [key for _, key in indexed]


class MemberOrder:
    """Tracks one group's member table across its target assignments to list members the way
    ``TargetAssignmentBuilder.build`` iterates them: the group's ``TimelineHashMap`` (insertion order and
    capacity, which never shrinks), then the member the heartbeat adds (``OverlayMap`` additions).

    A member with member epoch 0 that was not present at the previous assignment is taken as the one the
    heartbeat adds (its records are replayed only after the assignor ran). A share group's joining member is in
    the group's table already when its heartbeat computes the assignment (``overlay`` false;
    ``ShareGroup.getOrMaybeCreateMember`` puts it, once, before the assignor runs, its records put it again after):
    it takes its place in the ``TimelineHashMap`` like the others (checked against Kafka's coordinator by the oracle's recorded
    assignor inputs, tests/test_assignor_choice.py). Members that joined and left
    between two assignments are invisible here; they can only have grown the table, so the capacity is a
    lower bound and, in rare collisions, the order may differ from Kafka's.
    """

    def __init__(self) -> None:
        self.capacity = 2
        self.present: list[str] = []
        #: after a conversion, the converted members in record order: the table the group is replayed into
        self.replayed: list[str] | None = None

    def order(self, members: list[Mapping], overlay: bool = True, converted: bool = False) -> list[Mapping]:
        """``members`` (a target row's, in record order) as the assignor iterates them.

        ``converted``: the first target of a group converted from a classic group. ``ConsumerGroup.fromClassicGroup``
        puts every member into a new table and ``createConsumerGroupRecords`` then writes their records in that
        table's iteration order, not in the order they went in, so the insertion order is the one under which the
        table iterates as the records came. That table serves only the heartbeat that converted the group (its
        member's join computes the next target in the same append); the group that stays is the one the records
        are replayed into (``GroupMetadataManager.replay``), a new table filled in record order, which serves every
        target after that one (``_replay_conversion``)."""
        replayed = getattr(self, "replayed", None)   # a member table kept by an incremental run before this field
        self.replayed = None
        if converted:
            self.capacity, self.present = 2, []
            self.replayed = [m["member_id"] for m in members]
        ids = [m["member_id"] for m in members]
        if replayed is not None and not self._converting_join(members):
            self._replay_conversion(replayed)
            replayed = None
        present = set(self.present)
        # The heartbeat that computes the target adds its member when it joined in that same append; one that
        # joined earlier (the assignment waited for KIP-1263's interval) is in the table already. Without the
        # append boundaries (a live source), a member at epoch 0 new since the last target is taken as joining.
        known = any(m.get("joined_in_batch") is not None for m in members)
        joining = [m["member_id"] for m in members if m["member_id"] not in present
                   and (m.get("joined_in_batch") if known else not m.get("member_epoch"))]
        if converted:  # every member is in the new table already, none comes by the heartbeat's overlay
            joining = []
        additions = joining if overlay else []
        added = set(additions)
        # a share group's joiner is put into the table once before the assignor runs; its records, replayed after
        # it, put it again
        put_once = set(joining) - added
        base = [i for i in ids if i not in added and i not in put_once]
        base_set = set(base) | put_once
        # ``BaseHashTable.baseAddOrReplace`` checks the load factor before it looks the key up, so a replaced
        # member (each of its records is a put) grows the table like an insertion would: the members' records
        # since the last target were such puts, at the table's size then.
        if self.present:
            self.capacity = timeline_grow(self.capacity, len(self.present))
        self.present = [i for i in self.present if i in base_set]
        inserted = False
        for member_id in base:
            if member_id not in present:
                self.capacity = timeline_grow(self.capacity, len(self.present))
                self.present.append(member_id)
                inserted = True
        if converted:
            # inside a slot the table iterates the last inserted first: the records came in iteration order
            position = {member_id: n for n, member_id in enumerate(self.present)}
            self.present.sort(key=lambda i: (timeline_slot(i, self.capacity), -position[i]))
        if inserted:  # their own records after the insertion (a current assignment) were puts too
            self.capacity = timeline_grow(self.capacity, len(self.present))
        for member_id in (i for i in ids if i in put_once):
            self.capacity = timeline_grow(self.capacity, len(self.present))
            self.present.append(member_id)
        by_id = {m["member_id"]: m for m in members}
        listing = timeline_order(self.present, self.capacity) + hashmap_order(additions)
        for member_id in additions:
            self.capacity = timeline_grow(self.capacity, len(self.present))
            self.present.append(member_id)
        if put_once:  # the joiner's records after the assignor ran
            self.capacity = timeline_grow(self.capacity, len(self.present))
        if replayed is not None:
            self._replay_conversion(replayed)
        return [by_id[i] for i in listing]

    def _converting_join(self, members: list[Mapping]) -> bool:
        """Whether this target is the one the converting heartbeat computed: a member joins in its append."""
        present = set(self.present)
        return any(m["member_id"] not in present and m.get("joined_in_batch") for m in members)

    def _replay_conversion(self, replayed: list[str]) -> None:
        """The member table as the conversion's records rebuild it: the converted members in record order, then
        the members put since (in the order they came)."""
        kept = set(self.present)
        converted = [i for i in replayed if i in kept]
        since = set(replayed)
        self.present = converted + [i for i in self.present if i not in since]


# ---------------------------------------------------------------------------------------------------------------
# the case input

def _current_targets(row: Mapping, previous_members: Mapping[str, Mapping]) -> dict[str, Any]:
    """Target of each member before this run, with static replacements relabelled
    (``UpdatedMembersAndTargetAssignmentView``: the new member id takes its predecessor's target)."""
    previous = dict(row.get("previous_target") or {})
    by_instance = {m.get("instance_id"): member_id for member_id, m in previous_members.items() if m.get("instance_id")}
    current_ids = {m["member_id"] for m in row.get("members") or ()}
    out: dict[str, Any] = {}
    for m in row.get("members") or ():
        member_id = m["member_id"]
        if member_id in previous:
            out[member_id] = previous[member_id]
            continue
        old_id = by_instance.get(m.get("instance_id")) if m.get("instance_id") else None
        if old_id is not None and old_id != member_id and old_id not in current_ids and old_id in previous:
            out[member_id] = previous[old_id]
    return out


def _clean_assignment(assignment: Mapping | None) -> dict[str, list[int]]:
    return {t: sorted(int(p) for p in parts) for t, parts in (assignment or {}).items() if parts}


def _record_order_assignment(assignment: Mapping | None) -> dict[str, list[int]]:
    """A current assignment in record order (topics and partitions), which the assignors' tie-breaks follow."""
    return {t: [int(p) for p in parts] for t, parts in (assignment or {}).items() if parts}


def consumer_case_input(row: Mapping, topics_by_name: Mapping[str, dict], current: Mapping[str, Any],
                        previous_resolved: Mapping | None = None) -> dict:
    """Golden consumer/share layout for one run (``previous_resolved``: the regular expressions resolved at the
    group's previous target)."""
    resolved = row.get("resolved_regular_expressions")
    members = row.get("members") or ()
    is_share = row["group_type"] == "share"
    names_in_use: set[str] = set()
    case_members = []
    for m in members:
        names = member_subscription(m, resolved) if not is_share else list(m.get("subscribed_topic_names") or ())
        names_in_use.update(names)
        ids = []
        seen: set = set()  # a set beside the list: 1,000 subscribed names were 500,000 list comparisons each
        for name in subscription_iteration_order(m, None if is_share else resolved):
            t = topics_by_name.get(name)
            if t is not None and t.get("id") and t["id"] not in seen:
                seen.add(t["id"])
                ids.append(t["id"])
        case_members.append({
            "member_id": m["member_id"], "instance_id": m.get("instance_id"), "rack_id": m.get("rack_id"),
            "subscribed_topic_names": names, "subscribed_topic_ids": ids,
            "current_assignment": _record_order_assignment(current.get(m["member_id"])),
        })
    topics = [{"id": t["id"], "name": t["name"], "partitions": int(t["partitions"]),
               "partition_racks": t.get("partition_racks")}
              for name, t in sorted(topics_by_name.items()) if name in names_in_use and t.get("id")]
    if is_share:
        subscription_type = share_subscription_type(list(members))
        initialized: dict = {}
        for entry in row.get("initialized_topics") or ():
            initialized.setdefault(entry.get("topicId"), []).extend(entry.get("partitions") or ())
        assignable: dict | None = {t: sorted(set(p)) for t, p in initialized.items()}
        # Only a 4.0 broker wrote ShareGroupPartitionMetadata (type 9) for share groups: 4.1 removed the record
        # together with that release's early-access assignor, which ignored share-partition initialization.
        if row.get("partition_metadata") is not None and row.get("initialized_topics") is None:
            return {"subscription_type": subscription_type, "topics": topics, "members": case_members,
                    "assignable_partitions": None, "subscribed_topic_order": "topic_ids", "early_access_4_0": True}
    else:
        # A member joining with a regular expression not resolved yet does not bump the epoch, so its heartbeat
        # keeps the group's stored subscription type, computed before its member record (GroupMetadataManager
        # reads group.subscriptionType() and recomputes it only on a bump); when the heartbeat bumps the epoch
        # for another reason (the metadata hash moved), the type is recomputed with the member.
        counted = [m for m in members if not (m.get("joined_in_batch") and not m.get("bumped_after_joining")
                                              and m.get("subscribed_topic_regex")
                                              and not m.get("subscribed_topic_names")
                                              and (resolved or {}).get(m["subscribed_topic_regex"]) is None)]
        # The replay names the resolutions the stored type counted when they are not the current ones
        # (``counted_regular_expressions``): a heartbeat that did not bump the epoch computed this target.
        stored = row.get("counted_regular_expressions")
        if len(counted) < len(members):
            # That stored type was last computed when the last member record before the joiner's was replayed
            # (ConsumerGroup updates it on member updates and removals only). A member leaving is replayed before
            # the tombstone of a regular expression it was the last to use, so the type counted that
            # expression's topics (by regex, by no name): a resolution dropped since the previous target counts.
            if stored is None:
                earlier = {r: e for r, e in (previous_resolved or {}).items() if r not in (resolved or {})}
                stored = {**earlier, **(resolved or {})}
        # Otherwise a replay-named ``stored`` is a target the epoch already called for (a member timed out or left
        # in an earlier append, the assignment interval deferred the computation): TargetAssignmentBuilder got the
        # stored type, which still counts a resolution tombstoned after the last member record.
        if stored is not None:
            subscription_type = consumer_subscription_type(counted, stored, every_resolution=True)
        else:
            subscription_type = consumer_subscription_type(counted, resolved)
        assignable = None
    return {"subscription_type": subscription_type, "topics": topics, "members": case_members,
            "assignable_partitions": assignable, "subscribed_topic_order": "topic_ids"}


def streams_case_input(row: Mapping, topics_by_name: Mapping[str, dict], current: Mapping[str, Any],
                       recorded_tasks: Mapping[str, int]) -> dict:
    """Golden streams layout for one run; task counts from topic metadata, else from the recorded tasks."""
    configs = row.get("assignment_configs") or {}
    try:
        standbys = int(configs.get("num.standby.replicas", 0))
    except (TypeError, ValueError):
        standbys = 0
    subtopologies = []
    for s in sorted((row.get("topology") or {}).get("subtopologies") or (), key=lambda s: s.get("subtopologyId")):
        sources = list(s.get("sourceTopics") or ()) + [t.get("name") for t in s.get("repartitionSourceTopics") or ()]
        counts = [topics_by_name[n]["partitions"] for n in sources if n in topics_by_name]
        declared = [t.get("partitions") for t in s.get("repartitionSourceTopics") or () if t.get("partitions")]
        tasks = max(counts + declared) if counts or declared else recorded_tasks.get(s.get("subtopologyId"), 0)
        subtopologies.append({"subtopology_id": s.get("subtopologyId"), "max_num_input_partitions": int(tasks),
                              "stateful": bool(s.get("stateChangelogTopics"))})
    members = []
    for m in row.get("members") or ():
        tasks = current.get(m["member_id"]) or {}
        members.append({
            "member_id": m["member_id"], "instance_id": m.get("instance_id"), "rack_id": m.get("rack_id"),
            "process_id": m.get("process_id"), "client_tags": m.get("client_tags") or {},
            "active_tasks": _record_order_assignment(tasks.get("active")),
            "standby_tasks": _record_order_assignment(tasks.get("standby")),
            "warmup_tasks": _record_order_assignment(tasks.get("warmup")),
            "task_offsets": {}, "task_end_offsets": {},
        })
    return {"configs": {"num_standby_replicas": standbys, "rack_aware_assignment_tags": []},
            "subtopologies": subtopologies, "members": members}


def recorded_result(row: Mapping) -> dict:
    """The recorded target in the layout ``assignors.run`` returns (every current member, empty ones too)."""
    target = row.get("target") or {}
    members: dict[str, Any] = {}
    for m in row.get("members") or ():
        assignment = target.get(m["member_id"]) or {}
        if row["group_type"] == "streams":
            members[m["member_id"]] = {"active_tasks": _clean_assignment(assignment.get("active")),
                                       "standby_tasks": _clean_assignment(assignment.get("standby"))}
        else:
            members[m["member_id"]] = _clean_assignment(assignment)
    return {"error": None, "members": members}


def target_origin(row: Mapping) -> str | None:
    """``classic_conversion`` for the first target of a consumer group converted from a classic group: every
    member speaks the classic protocol and nothing was targeted before (a consumer group a heartbeat creates
    has a KIP-848 member; ``convertToConsumerGroup`` writes the classic members' assignment as the target)."""
    members = row.get("members") or ()
    if (row["group_type"] == "consumer" and members and not row.get("previous_target")
            and all(m.get("classic_protocol") for m in members)):
        return "classic_conversion"
    return None


def tied_assignors(row: Mapping, chosen: str) -> list[str]:
    """The members' other preferred server assignors with as many members as the most used one: between them
    ``ConsumerGroup.computePreferredServerAssignor`` (a ``HashMap`` copy) and ``preferredServerAssignor`` (the
    group's ``TimelineHashMap``) can answer differently, so Kafka's pick is not in the log (and each heartbeat may
    bump the group epoch: causes ``assignor_changed``)."""
    if row["group_type"] != "consumer":
        return []
    counts = Counter(m.get("server_assignor") for m in row.get("members") or () if m.get("server_assignor"))
    if not counts:
        return []
    best = max(counts.values())
    return sorted(name for name, c in counts.items() if c == best and name != chosen)


def group_assignor(row: Mapping, default_consumer_assignor: str = DEFAULT_CONSUMER_ASSIGNOR,
                   streams_assignor: str = STREAMS_ASSIGNOR) -> str:
    """``ConsumerGroup.computePreferredServerAssignor``: the most used ``serverAssignor`` of the members
    (ties: the name first in ``String.compareTo`` order, one of Kafka's possible HashMap answers), else the
    broker default; share groups use ``simple``, streams groups the group's task assignor
    (``GroupMetadataManager.streamsGroupAssignor``, ``sticky`` unless a group config names another)."""
    if row["group_type"] == "share":
        return SHARE_ASSIGNOR
    if row["group_type"] == "streams":
        return streams_assignor
    counts = Counter(m.get("server_assignor") for m in row.get("members") or () if m.get("server_assignor"))
    if not counts:
        return default_consumer_assignor
    best = max(counts.values())
    return sorted(name for name, c in counts.items() if c == best)[0]


class GroupReconstruction:
    """The sequential part of rebuilding a group's assignor inputs, one target after the other (``build``): the
    member table's order (``MemberOrder``) and the members of the previous target (static-member replacement).
    Small, and resumable: an incremental run keeps it between runs (``assignors.rerun.GroupRerun``)."""

    def __init__(self, default_consumer_assignor: str = DEFAULT_CONSUMER_ASSIGNOR,
                 streams_assignors: Mapping[str, str] | None = None, kafka_version: str | None = None) -> None:
        self.default_consumer_assignor = default_consumer_assignor
        #: the brokers' Kafka version (``broker.kafka_version``), ``None`` when not configured
        self.kafka_version = kafka_version
        #: streams group id -> its task assignor (``""``: the default), from the group configs snapshot
        self.streams_assignors = dict(streams_assignors or {})
        self.member_order = MemberOrder()
        self.previous_members: dict[str, Mapping] = {}
        self.previous_resolved: Mapping | None = None
        self.last_epoch: int | None = None

    def streams_assignor(self, group_id: str) -> str:
        choice = getattr(self, "streams_assignors", None) or {}  # state kept by an older version has none
        return choice.get(group_id) or choice.get("") or STREAMS_ASSIGNOR

    def build(self, row: Mapping, snapshot: TopicMetadata | None, names_by_id: Mapping[str, str]
              ) -> AssignorRun | None:
        """The ``AssignorRun`` of the next parsed target row (None for a group type without an assignor)."""
        if row["group_type"] not in ("consumer", "share", "streams"):
            return None
        last = getattr(self, "last_epoch", None)  # (absent from a state saved by an older version)
        if last is not None and row["assignment_epoch"] <= last:
            # a new incarnation of the group id (deleted, then created again): a new, empty member table
            self.member_order = MemberOrder()
            self.previous_members = {}
            self.previous_resolved = None
        self.last_epoch = row["assignment_epoch"]
        before = predates_4_0(getattr(self, "kafka_version", None))  # (absent from an older version's state)
        # Only Kafka 3.x's member order needs to know whether this heartbeat converted the group, and only before
        # ``order`` moves the table on.
        conversion = (getattr(self.member_order, "replayed", None)  # (absent from an older version's state)
                      if before and row["group_type"] == "consumer" else None)
        converting_join = conversion is not None and self.member_order._converting_join(list(row.get("members") or ()))
        row = dict(row, members=self.member_order.order(list(row.get("members") or ()),
                                                        overlay=row["group_type"] != "share",
                                                        converted=target_origin(row) == "classic_conversion"))
        if before and row["group_type"] == "consumer":
            # Kafka 3.x's TargetAssignmentBuilder puts the group's members, in its table's order, then the
            # heartbeat's member into a new default HashMap, and its assignors iterate that map. The heartbeat
            # that converted a classic group iterates the table ConsumerGroup.fromClassicGroup filled, in which
            # order createConsumerGroupRecords wrote the conversion's records.
            by_id = {m["member_id"]: m for m in row["members"]}
            inserted = list(by_id)
            if converting_join and conversion is not None:
                first = [i for i in conversion if i in by_id]
                converted = set(first)
                inserted = first + [i for i in inserted if i not in converted]
            row["members"] = [by_id[i] for i in hashmap_order(inserted)]
        topics_by_name, confidence, source, hash_match, notes = choose_topics(row, snapshot, names_by_id)
        snapshot_match = (verify_metadata_hash(row.get("metadata_hash"), hashed_topic_names(row),
                                               snapshot.as_of(row.get("assignment_timestamp") or None))
                          if snapshot else None)
        current = _current_targets(row, self.previous_members)
        assignor = group_assignor(row, self.default_consumer_assignor, self.streams_assignor(row["group_id"]))
        if row["group_type"] == "streams":
            recorded_tasks: dict[str, int] = {}
            for tasks in (row.get("target") or {}).values():
                for sub, parts in ((tasks or {}).get("active") or {}).items():
                    if parts:
                        recorded_tasks[sub] = max(recorded_tasks.get(sub, 0), max(parts) + 1)
            case_input = streams_case_input(row, topics_by_name, current, recorded_tasks)
        else:
            case_input = consumer_case_input(row, topics_by_name, current,
                                             getattr(self, "previous_resolved", None))
        if before and row["group_type"] == "consumer":
            case_input[UNIFORM_BEFORE_4_0] = True
        self.previous_members = {m["member_id"]: m for m in row.get("members") or ()}
        self.previous_resolved = row.get("resolved_regular_expressions")
        return AssignorRun(
            group_id=row["group_id"], group_type=row["group_type"], assignment_epoch=row["assignment_epoch"],
            assignment_timestamp=row.get("assignment_timestamp"), partition=row.get("partition"),
            offset=row.get("offset"), assignor=assignor,
            case_input=case_input, recorded=recorded_result(row), confidence=confidence, metadata_source=source,
            metadata_hash_match=hash_match, notes=notes, snapshot_hash_match=snapshot_match,
            tied_assignors=tied_assignors(row, assignor), origin=target_origin(row), before_4_0=before)


def in_log_order(rows: Iterable[Mapping]) -> list[dict]:
    """Parsed target rows (``parse_row``) in log order."""
    return sorted((parse_row(r) for r in rows), key=lambda r: (r.get("partition") or 0, r.get("offset") or 0))


def reconstruct_group(rows: Iterable[Mapping], snapshot: TopicMetadata | None = None, *,
                      names_by_id: Mapping[str, str] | None = None,
                      default_consumer_assignor: str = DEFAULT_CONSUMER_ASSIGNOR,
                      streams_assignors: Mapping[str, str] | None = None,
                      kafka_version: str | None = None) -> Iterator[AssignorRun]:
    """Rebuild the assignor input of every recorded target assignment of one group (rows in log order).

    ``names_by_id`` maps topic ids to names (default: learned from all these rows, ``TopicNames``, with the
    metadata hash when no snapshot is given). ``kafka_version``: the brokers' (``broker.kafka_version``); a
    coordinator before 4.0 marks its consumer groups' inputs ``before_4_0`` (uniform's older builder).
    """
    parsed = in_log_order(rows)
    if names_by_id is None:
        names_by_id = infer_topic_names(parsed, use_hash=snapshot is None)
    reconstruction = GroupReconstruction(default_consumer_assignor, streams_assignors, kafka_version)
    for row in parsed:
        run = reconstruction.build(row, snapshot, names_by_id)
        if run is not None:
            yield run
