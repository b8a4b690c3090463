"""Scenario driver: one discrete-event loop per ``__consumer_offsets`` partition (one coordinator shard).

Every group is an actor scheduling its clients' actions (joins, heartbeats, commits, leaves, crashes, rolling
restarts, transactions) on the shard's clock; each coordinator action becomes one ``Append``. Randomness comes
from ``random.Random`` seeded with ``(seed, group id)``, so a group's history does not depend on which other
groups share its partition or on how partitions are spread over worker processes.
"""

from __future__ import annotations

import base64
import heapq
import random
from dataclasses import dataclass, field

from offsets_audit.assignors.java_order import java_string_hash
import offsets_audit.simulate.records as R
from offsets_audit.simulate.classic import ClassicMember, SimulatedClassicGroup
from offsets_audit.simulate.consumer import SimulatedConsumerGroup
from offsets_audit.simulate.modern import LEAVE_GROUP_STATIC_MEMBER_EPOCH, Member, Topic
from offsets_audit.simulate.share import SimulatedShareGroup
from offsets_audit.simulate.streams import SimulatedStreamsGroup

START_MS = 1754000000000
#: group.consumer/share/streams.assignment.interval.ms of the simulated brokers (KIP-1263 default)
BROKER_ASSIGNMENT_INTERVAL_MS = 1000
SESSION_TIMEOUT_MS = 45000
CLASSIC_INITIAL_REBALANCE_DELAY_MS = 3000
KINDS = ("consumer", "classic", "simple", "txn", "share", "streams")
KIND_WEIGHTS = (40, 18, 17, 8, 9, 8)
FAULT_KINDS = ("wrong_assignment", "epoch_regression", "early_assignment", "double_ownership")


def coordinator_partition(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (``Utils.abs(Integer.MIN_VALUE)`` is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -2**31 else abs(h)) % partitions


def kafka_uuid(rng: random.Random) -> str:
    """A random Kafka ``Uuid`` string (22 chars of URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


@dataclass
class SimConfig:
    groups: int = 20
    hours: float = 1.0
    seed: int = 7
    partitions: int = 50
    faults: tuple = ()
    start_ms: int = START_MS
    #: consumers' auto.commit.interval.ms (consumer, classic and transactional groups)
    commit_interval_ms: int = 5000
    #: Kafka Streams' commit.interval.ms (at-least-once default)
    streams_commit_interval_ms: int = 30000
    #: Kafka Connect's offset.flush.interval.ms (sink connectors' commit-only groups)
    connect_flush_interval_ms: int = 60000
    #: mean time between membership changes of a modern group (joins, leaves, crashes, rolling bounces,
    #: subscription changes); classic groups change half as often. With 3 to 10 members per group this makes
    #: group records about a tenth of the log, as on a busy cluster, while a healthy group stays under the
    #: audit's rebalance_storm threshold (60 group epochs an hour). Every change of a share or streams group
    #: bumps its epoch, so the start's joins plus about 30 changes an hour leave room for chance: a shorter mean
    #: let a healthy share group of the demo's history cross the storm threshold, a storm the simulator made
    churn_mean_ms: int = 120 * 1000
    topics: int = 8
    #: the broker's ``group.streams.num.standby.replicas`` (stored with each streams group epoch)
    num_standby_replicas: int = 1
    #: a big consumer group that rebalances often, beside the small ones on the first consumer group's
    #: __consumer_offsets partition (KIP-1263's problem case): its members (0: none), the partitions of the topic
    #: it alone reads, the mean time between its membership changes, and its assignment interval (a group config)
    hog_members: int = 0
    hog_partitions: int = 600
    hog_churn_mean_ms: int = 2000
    hog_interval_ms: int = 0

    @property
    def end_ms(self) -> int:
        return self.start_ms + int(self.hours * 3600 * 1000)


@dataclass
class GroupPlan:
    group_id: str
    kind: str
    partition: int
    faults: list = field(default_factory=list)


def topic_catalog(cfg: SimConfig) -> dict:
    rng = random.Random(f"{cfg.seed}:topics")
    names = ["orders", "payments", "clicks", "audit", "inventory", "page-views", "shipments", "users",
             "sessions", "metrics", "logs", "alerts"]
    topics = {}
    for i in range(cfg.topics):
        name = names[i] if i < len(names) else f"topic-{i}"
        tid = kafka_uuid(rng)
        topics[tid] = Topic(tid, name, rng.choice([3, 4, 6, 8, 12]))
    if cfg.hog_members:
        tid = kafka_uuid(random.Random(f"{cfg.seed}:hog-topic"))
        topics[tid] = Topic(tid, HOG_TOPIC, cfg.hog_partitions)
    return topics


#: the topic only the big group of ``SimConfig.hog_members`` reads, and that group's id prefix
HOG_TOPIC = "bulk-events"
HOG_GROUP_PREFIX = "bulk-orders"


def hog_group_id(partition: int, partitions: int) -> str:
    """The first ``bulk-orders-<k>`` whose coordinator is ``partition`` (Kafka's hash of the group id)."""
    k = 0
    while coordinator_partition(f"{HOG_GROUP_PREFIX}-{k}", partitions) != partition:
        k += 1
    return f"{HOG_GROUP_PREFIX}-{k}"


def plan_groups(cfg: SimConfig) -> list:
    """Every group's id, kind and coordinator partition, plus the faults injected into it."""
    rng = random.Random(f"{cfg.seed}:groups")
    plans = []
    prefixes = {"consumer": "svc-{}-consumer", "classic": "legacy-{}", "simple": "connect-sink-{}",
                "txn": "eos-app-{}", "share": "share-workers-{}", "streams": "streams-app-{}"}
    for i in range(cfg.groups):
        kind = "consumer" if i == 0 else rng.choices(KINDS, KIND_WEIGHTS)[0]
        gid = prefixes[kind].format(i)
        plans.append(GroupPlan(gid, kind, coordinator_partition(gid, cfg.partitions)))
    consumers = [p for p in plans if p.kind == "consumer"]
    if cfg.hog_members and plans:
        plans.append(GroupPlan(hog_group_id(plans[0].partition, cfg.partitions), "hog", plans[0].partition))
    for index, kind in enumerate(cfg.faults):
        if kind not in FAULT_KINDS:
            from offsets_audit.errors import UserError
            raise UserError(f"unknown fault kind {kind!r}", fix=f"use some of {', '.join(FAULT_KINDS)}")
        if consumers:
            consumers[index % len(consumers)].faults.append(kind)
    return plans


class Shard:
    """The event loop of one coordinator shard: a clock, a timer heap and the appends written so far."""

    def __init__(self, cfg: SimConfig, partition: int):
        self.cfg = cfg
        self.partition = partition
        self.now = cfg.start_ms
        self._heap: list = []
        self._seq = 0
        self.pending: list = []

    def at(self, time_ms: int, fn, *args) -> None:
        if time_ms <= self.cfg.end_ms:
            self._seq += 1
            heapq.heappush(self._heap, (int(time_ms), self._seq, fn, args))

    def emit(self, records: list, **batch) -> None:
        if records or batch.get("control"):
            self.pending.append(R.Append(self.now, list(records), **batch))

    def run(self):
        while self._heap:
            time_ms, _, fn, args = heapq.heappop(self._heap)
            self.now = time_ms
            fn(*args)
            if self.pending:
                yield from self.pending
                self.pending = []


class OffsetClock:
    """Deterministic log-end offsets per topic partition: a commit at time t commits about rate * t."""

    def __init__(self, cfg: SimConfig, group_id: str):
        self.cfg = cfg
        self.lag = abs(java_string_hash(group_id)) % 50

        self._params: dict = {}

    def offset(self, topic: str, partition: int, now: int) -> int:
        params = self._params.get((topic, partition))
        if params is None:
            h = abs(java_string_hash(f"{topic}-{partition}"))
            params = self._params[(topic, partition)] = (1000 + h % 10000 - self.lag, 5 + h % 200)
        base, rate = params
        return base + rate * (now - self.cfg.start_ms) // 1000


class Actor:
    """Common parts of group actors: commits and committed-offset bookkeeping."""

    def __init__(self, shard: Shard, plan: GroupPlan, topics: dict):
        self.shard = shard
        self.plan = plan
        self.group_id = plan.group_id
        self.topics = topics
        self.by_name = {t.name: t for t in topics.values()}
        self.rng = random.Random(f"{shard.cfg.seed}:{plan.group_id}")
        self.clock = OffsetClock(shard.cfg, plan.group_id)
        self.committed: dict = {}
        names = sorted(self.by_name)
        self.subscription = tuple(sorted(self.rng.sample(names, self.rng.choice([1, 1, 2]))))

    def commit_records(self, pairs, metadata="") -> list:
        now = self.shard.now
        out = []
        for topic, p in pairs:
            offset = self.clock.offset(topic, p, now)
            out.append(R.offset_commit(self.group_id, topic, p, offset, self.rng.randrange(5), metadata, now))
        return out

    def apply_commits(self, recs) -> None:
        for r in recs:
            self.committed[(r.key["topic"], r.key["partition"])] = r.value["offset"]

    def commit_interval_ms(self) -> int:
        return self.shard.cfg.commit_interval_ms

    def next_commit(self) -> int:
        interval = self.commit_interval_ms()
        return self.shard.now + interval + self.rng.randrange(-interval // 10, interval // 10 + 1)

    churn_factor = 1

    def churn_time(self) -> int:
        mean = self.shard.cfg.churn_mean_ms * self.churn_factor
        return self.shard.now + int(self.rng.expovariate(1.0 / mean)) + 1000

    def state(self) -> dict:
        offsets: dict = {}
        for (topic, p), off in sorted(self.committed.items()):
            offsets.setdefault(topic, {})[str(p)] = off
        return {"committed_offsets": offsets}

    def start(self) -> None:
        """Schedule the actor's first steps on its shard (each kind of group starts its own way)."""
        raise NotImplementedError


class ModernActor(Actor):
    """Drives a consumer / share / streams group: members join, heartbeat until settled, commit, churn."""

    commits = True

    def __init__(self, shard, plan, topics, group):
        super().__init__(shard, plan, topics)
        self.group = group
        self.live: set = set()
        self.away: dict = {}            # static instance id -> old member id (temporarily left)
        self.hb_pending: set = set()
        self.static_counter = 0
        self.faults = list(plan.faults)
        #: what the clients put in ConsumerGroupHeartbeat.serverAssignor (consumer groups only)
        self.server_assignor = group.assignor if group.kind == "consumer" else None
        group.pending_faults = {f for f in self.faults if f == "wrong_assignment"}
        if "early_assignment" in self.faults:
            group.interval_ms = max(group.interval_ms, 1000)

    def start(self) -> None:
        t0 = self.shard.now + self.rng.randrange(0, 60000)
        for _ in range(self.rng.randint(4, 14)):
            t0 += self.rng.randrange(50, 3000)
            self.shard.at(t0, self.join, self.rng.random() < 0.3)
        self.shard.at(self.churn_time() + 120000, self.churn)
        if self.faults and set(self.faults) - {"wrong_assignment"}:
            self.shard.at(self.shard.now + 5 * 60000 + self.rng.randrange(60000), self.inject)

    def new_member(self, static: bool, instance_id=None) -> Member:
        if static and instance_id is None:
            instance_id = f"instance-{self.static_counter}"
            self.static_counter += 1
        return Member(kafka_uuid(self.rng), f"client-{self.group.kind}", self.subscription,
                      instance_id=instance_id, rack_id=f"rack-{self.rng.randrange(3)}",
                      process_id=kafka_uuid(self.rng), server_assignor=self.server_assignor)

    def join(self, static: bool = False, force_early: bool = False) -> None:
        member = self.new_member(static)
        if force_early:
            self.group.force_early_assignment = True
        self.shard.emit(self.group.heartbeat(self.shard.now, member.member_id, join=member))
        self.live.add(member.member_id)
        self.after_emit()
        self.poke()
        if self.commits:
            self.shard.at(self.next_commit(), self.commit, member.member_id)

    def poke(self) -> None:
        for mid in sorted(self.live):
            if mid not in self.hb_pending and not self.group.settled(self.group.members[mid]):
                self.hb_pending.add(mid)
                self.shard.at(self.shard.now + self.rng.randrange(100, 3000), self.heartbeat, mid)

    def heartbeat(self, mid: str) -> None:
        self.hb_pending.discard(mid)
        if mid not in self.live:
            return
        records = self.group.heartbeat(self.shard.now, mid)
        self.shard.emit(records)
        self.after_emit()
        self.poke()

    def commit(self, mid: str) -> None:
        if mid not in self.live or self.group.deleted:
            return
        member = self.group.members[mid]
        pairs = [(self.topics[t].name if t in self.topics else t, p)
                 for t in sorted(member.assigned) for p in sorted(member.assigned[t])]
        recs = self.commit_records(pairs)
        self.apply_commits(recs)
        self.shard.emit(recs)
        self.shard.at(self.next_commit(), self.commit, mid)

    def leave(self, mid: str) -> None:
        if mid not in self.live:
            return
        self.live.discard(mid)
        self.shard.emit(self.group.remove_member(self.shard.now, mid))
        self.poke()

    def crash(self, mid: str) -> None:
        """The client stops heartbeating; the session timeout removes it later."""
        self.live.discard(mid)
        self.shard.at(self.shard.now + SESSION_TIMEOUT_MS, self.expire, mid)

    def expire(self, mid: str) -> None:
        if mid in self.group.members:
            self.shard.emit(self.group.remove_member(self.shard.now, mid))
            self.poke()

    def churn(self) -> None:
        roll = self.rng.random()
        live = sorted(self.live)
        statics = [m for m in live if self.group.members[m].instance_id]
        if roll < 0.35 or not live:
            self.join(self.rng.random() < 0.3)
        elif roll < 0.6 and len(live) > 1:
            self.leave(self.rng.choice(live))
        elif roll < 0.75 and len(live) > 1:
            self.crash(self.rng.choice(live))
        elif roll < 0.9 and statics and isinstance(self.group, SimulatedConsumerGroup):
            t = self.shard.now
            for mid in statics:
                self.shard.at(t, self.static_leave, mid)
                t += self.rng.randrange(2000, 6000)
                self.shard.at(t, self.static_rejoin, mid)
                t += self.rng.randrange(1000, 5000)
        elif isinstance(self.group, SimulatedConsumerGroup):
            mid = self.rng.choice(live)
            names = sorted(self.by_name)
            new_sub = tuple(sorted(self.rng.sample(names, self.rng.choice([1, 2]))))
            self.shard.emit(self.group.heartbeat(self.shard.now, mid, subscription=new_sub))
            self.poke()
        self.shard.at(self.churn_time(), self.churn)

    def static_leave(self, mid: str) -> None:
        if mid not in self.live:
            return
        self.live.discard(mid)
        self.shard.emit(self.group.static_leave(self.shard.now, mid))

    def static_rejoin(self, old: str) -> None:
        member = self.group.members.get(old)
        if member is None or member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return
        new = self.new_member(True, member.instance_id)
        self.shard.emit(self.group.static_rejoin(self.shard.now, old, new))
        self.live.add(new.member_id)
        self.poke()
        self.shard.at(self.next_commit(), self.commit, new.member_id)

    def inject(self) -> None:
        """Write the planned non-assignment faults as extra appends, then restore the true member record."""
        live = [m for m in sorted(self.live) if self.group.members[m].member_epoch > 0]
        if not live:
            self.shard.at(self.shard.now + 60000, self.inject)
            return
        group = self.group
        for kind in [f for f in self.faults if f != "wrong_assignment"]:
            if kind == "early_assignment":
                self.shard.at(self.shard.now + 1, self._early)
                continue
            member = group.members[live[0]]
            bad = R.consumer_current_assignment(group.group_id, member)
            value = bad.value
            if value is None:   # a member's current assignment record always has a value
                continue
            if kind == "epoch_regression":
                value["previousMemberEpoch"] = member.member_epoch
                value["memberEpoch"] = member.member_epoch - 1
                bad.fault = {"kind": kind, "member_id": member.member_id,
                             "detail": f"member epoch {member.member_epoch} -> {member.member_epoch - 1}"}
            else:
                other = next((group.members[m] for m in live[1:] if group.members[m].assigned), None)
                if other is None:   # needs a second member holding partitions: scale up first
                    self.join(False)
                    self.shard.at(self.shard.now + 60000, self._retry, kind)
                    continue
                topic = sorted(other.assigned)[0]
                p = min(other.assigned[topic])
                extra = {t: dict(v) for t, v in member.assigned.items()}
                extra.setdefault(topic, {})[p] = member.member_epoch
                value["assignedPartitions"] = R.topic_partitions(extra, True)
                value["state"] = 0
                bad.fault = {"kind": kind, "member_id": member.member_id, "topic": self.topics[topic].name,
                             "topic_partition": p, "detail": f"also owned by {other.member_id}"}
            self.shard.emit([bad])
            self.shard.at(self.shard.now + 1, self._restore, member.member_id)

    def _retry(self, kind):
        self.faults = [kind]
        self.inject()

    def _restore(self, mid):
        if mid in self.group.members:
            self.shard.emit([R.consumer_current_assignment(self.group.group_id, self.group.members[mid])])

    def _early(self):
        """A scale-up whose target assignment is followed by a forced one inside the interval."""
        self.early_pending = True
        self.join(False)

    def after_emit(self) -> None:
        """Fault early_assignment: right after a target assignment, force another one inside the interval."""
        group = self.group
        if getattr(self, "early_pending", False) and group.assignment_ms == self.shard.now and group.interval_ms:
            self.early_pending = False
            self.shard.at(self.shard.now + max(1, group.interval_ms // 4), self.join, False, True)

    def state(self) -> dict:
        out = self.group.state()
        out["assignment_interval_ms"] = self.group.interval_ms
        out.update(super().state())
        if isinstance(self.group, SimulatedStreamsGroup):
            out["changelog_topics"] = [{"topic_id": t.topic_id, "name": t.name, "partitions": t.partitions}
                                       for _, t in sorted(self.group.changelogs.items())]
        return out


class HogActor(ModernActor):
    """The big group of ``SimConfig.hog_members``: its members join within a minute, then one joins or one leaves
    every ``hog_churn_mean_ms`` on average (a deployment that keeps scaling, crash-looping pods); all read the
    topic only they read, so every change moves partitions and, at interval 0, runs the assignor at once."""

    def __init__(self, shard, plan, topics, group):
        super().__init__(shard, plan, topics, group)
        self.subscription = (HOG_TOPIC,)

    def start(self) -> None:
        t0 = self.shard.now + self.rng.randrange(0, 30000)
        for _ in range(self.shard.cfg.hog_members):
            t0 += self.rng.randrange(20, 200)
            self.shard.at(t0, self.join, False)
        self.shard.at(t0 + 5000, self.churn)

    def churn(self) -> None:
        live = sorted(self.live)
        if len(live) < self.shard.cfg.hog_members or self.rng.random() < 0.5:
            self.join(False)
        else:
            self.leave(self.rng.choice(live))
        mean = self.shard.cfg.hog_churn_mean_ms
        self.shard.at(self.shard.now + int(self.rng.expovariate(1.0 / mean)) + 100, self.churn)


class ShareActor(ModernActor):
    commits = False

    def join(self, static=False, force_early=False):
        first = not self.group.created
        member = self.new_member(False)
        records = self.group.heartbeat(self.shard.now, member.member_id, join=member)
        pending = self.group.uninitialized_topics()
        if pending:
            records.append(R.share_state_partition_metadata(self.group_id, pending, []))
            self.shard.at(self.shard.now + self.rng.randrange(200, 1500), self.initialized, pending)
        self.shard.emit(records)
        self.live.add(member.member_id)
        self.poke()
        del first

    def initialized(self, pending):
        self.shard.emit(self.group.initialize(pending))
        self.poke()

    def churn(self):
        live = sorted(self.live)
        if self.rng.random() < 0.5 or len(live) < 2:
            self.join()
        else:
            self.leave(self.rng.choice(live))
        self.shard.at(self.churn_time(), self.churn)


class StreamsActor(ModernActor):
    #: the Kafka Streams processes (``process_id``s) its members are spread over; ``make_actor`` sets them
    processes: list[str]

    def commit_interval_ms(self) -> int:
        return self.shard.cfg.streams_commit_interval_ms

    def commit(self, mid):
        if mid not in self.live:
            return
        member = self.group.members[mid]
        pairs = [(self.group.subtopologies[s], p) for s in sorted(member.assigned) for p in sorted(member.assigned[s])]
        recs = self.commit_records(pairs)
        self.apply_commits(recs)
        self.shard.emit(recs)
        self.shard.at(self.next_commit(), self.commit, mid)

    def churn(self):
        live = sorted(self.live)
        roll = self.rng.random()
        if roll < 0.4 or len(live) < 2:
            self.join()
        elif roll < 0.75:
            self.leave(self.rng.choice(live))
        else:
            self.crash(self.rng.choice(live))
        self.shard.at(self.churn_time(), self.churn)

    def new_member(self, static, instance_id=None):
        member = super().new_member(False)
        member.process_id = self.processes[len(self.group.members) % len(self.processes)]
        return member


class ClassicActor(Actor):
    """A classic consumer group: eager rebalances, generations, commits only while Stable."""

    churn_factor = 2

    def __init__(self, shard, plan, topics):
        super().__init__(shard, plan, topics)
        self.group = SimulatedClassicGroup(plan.group_id, topics, self.rng.choice(["range", "roundrobin"]))
        self.rebalance_at = None
        self.commit_scheduled: set = set()

    def start(self):
        t0 = self.shard.now + self.rng.randrange(0, 60000)
        self.shard.at(t0, self.create)
        for _ in range(self.rng.randint(1, 3)):
            self.shard.at(t0 + self.rng.randrange(0, 2000), self.join)
        self.shard.at(self.churn_time() + 120000, self.churn)

    def create(self):
        self.shard.emit(self.group.create(self.shard.now))
        self.rebalance(CLASSIC_INITIAL_REBALANCE_DELAY_MS)

    def rebalance(self, delay=None):
        self.group.stable = False
        if self.rebalance_at is None:
            self.rebalance_at = self.shard.now + (delay or self.rng.randrange(300, 3000))
            self.shard.at(self.rebalance_at + 100, self.sync)

    def sync(self):
        state_ms = self.rebalance_at
        self.rebalance_at = None
        self.shard.emit(self.group.complete_rebalance(state_ms))
        for mid in self.group.members:
            if mid not in self.commit_scheduled:
                self.commit_scheduled.add(mid)
                self.shard.at(self.next_commit(), self.commit, mid)

    def join(self):
        mid = f"client-JoinGroup-{kafka_uuid(self.rng)}"
        self.group.members[mid] = ClassicMember(mid, "client-JoinGroup", self.subscription)
        self.rebalance()

    def leave(self, mid):
        self.group.members.pop(mid, None)
        self.rebalance()

    def commit(self, mid):
        member = self.group.members.get(mid)
        if member is None:
            self.commit_scheduled.discard(mid)
            return
        if self.group.stable:
            pairs = [(t, p) for t in sorted(member.assignment) for p in member.assignment[t]]
            recs = self.commit_records(pairs)
            self.apply_commits(recs)
            self.shard.emit(recs)
        self.shard.at(self.next_commit(), self.commit, mid)

    def churn(self):
        members = sorted(self.group.members)
        roll = self.rng.random()
        if roll < 0.4 or not members:
            self.join()
        elif roll < 0.8:
            self.leave(self.rng.choice(members))
        else:
            mid = self.rng.choice(members)
            self.shard.at(self.shard.now + SESSION_TIMEOUT_MS, self.leave, mid)
        self.shard.at(self.churn_time(), self.churn)

    def state(self):
        out = self.group.state()
        out.update(super().state())
        return out


class SimpleActor(Actor):
    """Commit-only groups (generation -1, e.g. Connect sinks); ``txn`` ones commit through transactions
    (TxnOffsetCommit batches, then a COMMIT or ABORT marker); some are deleted at the end (DeleteGroups)."""

    COORDINATOR_EPOCH = 3

    def __init__(self, shard, plan, topics, transactional: bool):
        super().__init__(shard, plan, topics)
        self.transactional = transactional
        self.producer_id = 4000 + abs(java_string_hash(plan.group_id)) % 100000
        self.producer_epoch = 0
        topic = self.by_name[self.subscription[0]]
        self.pairs = [(topic.name, p) for p in range(topic.partitions)]
        self.delete = self.rng.random() < 0.2
        self.deleted = False

    def start(self):
        self.shard.at(self.shard.now + self.rng.randrange(0, 60000), self.commit)
        if self.delete:
            cfg = self.shard.cfg
            self.shard.at(cfg.end_ms - self.rng.randrange(60000, 300000), self.delete_group)

    def commit_interval_ms(self) -> int:
        cfg = self.shard.cfg
        return cfg.commit_interval_ms if self.transactional else cfg.connect_flush_interval_ms

    def commit(self):
        if self.deleted:
            return
        if self.transactional:
            recs = self.commit_records(self.pairs, metadata="tx")
            self.shard.emit(recs, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            transactional=True)
            abort = self.rng.random() < 0.1
            self.shard.at(self.shard.now + self.rng.randrange(20, 500), self.end_txn, recs, abort)
        else:
            recs = self.commit_records(self.pairs)
            self.apply_commits(recs)
            self.shard.emit(recs)
        self.shard.at(self.next_commit(), self.commit)

    def end_txn(self, recs, abort):
        if self.deleted:
            abort = True
        self.shard.emit([], producer_id=self.producer_id, producer_epoch=self.producer_epoch, transactional=True,
                        control="ABORT" if abort else "COMMIT", coordinator_epoch=self.COORDINATOR_EPOCH)
        if not abort:
            self.apply_commits(recs)

    def delete_group(self):
        self.deleted = True
        out = [R.offset_tombstone(self.group_id, t, p) for (t, p) in sorted(self.committed)]
        out.append(R.group_tombstone(self.group_id))
        self.committed = {}
        self.shard.emit(out)

    def state(self):
        out = {"type": "simple", "exists": not self.deleted, "transactional": self.transactional}
        out.update(super().state())
        return out


def make_actor(shard: Shard, plan: GroupPlan, topics: dict) -> Actor:
    rng = random.Random(f"{shard.cfg.seed}:{plan.group_id}:config")
    interval = rng.choice([1000, 1000, 1000, 0, 3000])
    if plan.kind == "consumer":
        group = SimulatedConsumerGroup(plan.group_id, topics, interval)
        group.assignor = rng.choice(["uniform", "uniform", "uniform", "range"])
        return ModernActor(shard, plan, topics, group)
    if plan.kind == "hog":
        group = SimulatedConsumerGroup(plan.group_id, topics, shard.cfg.hog_interval_ms)
        group.assignor = "uniform"
        return HogActor(shard, plan, topics, group)
    if plan.kind == "share":
        return ShareActor(shard, plan, topics, SimulatedShareGroup(plan.group_id, topics, interval))
    if plan.kind == "streams":
        names = sorted(t.name for t in topics.values())
        sources = rng.sample(names, rng.choice([1, 2, 3]))
        by_name = {t.name: t for t in topics.values()}
        changelogs = {}
        for i, name in enumerate(sources):
            if rng.random() < 0.7:
                changelog = f"{plan.group_id}-store-{i}-changelog"
                changelogs[str(i)] = Topic(kafka_uuid(rng), changelog, by_name[name].partitions)
        streams_group = SimulatedStreamsGroup(plan.group_id, topics, interval,
                                              {str(i): n for i, n in enumerate(sources)}, changelogs,
                                              standby_replicas=shard.cfg.num_standby_replicas)
        actor = StreamsActor(shard, plan, topics, streams_group)
        actor.processes = [kafka_uuid(rng) for _ in range(rng.choice([1, 2, 3]))]
        return actor
    if plan.kind == "classic":
        return ClassicActor(shard, plan, topics)
    return SimpleActor(shard, plan, topics, transactional=plan.kind == "txn")


def simulate_partition(cfg: SimConfig, partition: int, plans: list, topics: dict, states: dict):
    """Yield the appends of one ``__consumer_offsets`` partition in log order; fill ``states`` (group id ->
    final model state) when the iteration ends."""
    shard = Shard(cfg, partition)
    actors = []
    for plan in plans:
        if plan.partition == partition:
            actor = make_actor(shard, plan, topics)
            actor.start()
            actors.append(actor)
    yield from shard.run()
    for actor in actors:
        states[actor.group_id] = actor.state()


# -- scripted scenarios: one operator story each, for the rebalance-cause audit (audit/causes.py) -----------

#: scenario name -> the causes of each group-epoch bump it writes, in log order (docs/rules.md)
SCRIPTED_SCENARIOS = {
    "scale_up": [["member_joined"], ["member_joined"], ["member_joined"]],
    "rolling_restart": [["member_joined"], ["member_joined"], ["member_left"], ["member_joined"],
                        ["member_left"], ["member_joined"]],
    "crash": [["member_joined"], ["member_joined"], ["member_left"]],
    "subscription_change": [["member_joined"], ["member_joined"], ["subscription_changed"]],
    "topic_growth": [["member_joined"], ["member_joined"], ["topic_metadata_changed"]],
    # a static member that comes back under a new member id takes over its assignment: no rebalance
    "static_replacement": [["member_joined"], ["member_joined"]],
}


def scripted_scenario(name: str, group_id: str = "causes-app", start_ms: int = START_MS) -> list:
    """The appends of one scripted consumer-group story (``SCRIPTED_SCENARIOS``), from the same coordinator
    model as the random scenarios: every member action is one ``CoordinatorResult``, and members
    heartbeat until the group is stable before the next action."""
    if name not in SCRIPTED_SCENARIOS:
        from offsets_audit.errors import UserError
        raise UserError(f"unknown scripted scenario {name!r}", fix=f"use one of {', '.join(SCRIPTED_SCENARIOS)}")
    rng = random.Random(f"scripted:{name}")
    orders = Topic(kafka_uuid(rng), "orders", 6)
    group = SimulatedConsumerGroup(group_id, {orders.topic_id: orders}, 0)
    appends: list = []
    clock = [start_ms]
    static = name == "static_replacement"

    def emit(records):
        if records:
            appends.append(R.Append(clock[0], list(records)))
        clock[0] += 100

    def settle():
        for _ in range(10):
            for mid in sorted(group.members):
                if group.members[mid].member_epoch >= 0:
                    emit(group.heartbeat(clock[0], mid))
            if all(group.settled(m) for m in group.members.values() if m.member_epoch >= 0):
                return

    def join(instance=None, client="orders-app", host_index=0):
        member = Member(kafka_uuid(rng), f"{client}-{host_index}", ("orders",), instance_id=instance,
                        rack_id=f"rack-{host_index % 3}")
        emit(group.heartbeat(clock[0], member.member_id, join=member))
        settle()
        return member.member_id

    first = join(instance="instance-0" if static else None)
    second = join(instance="instance-1" if static else None, host_index=1)
    if name == "scale_up":
        join(host_index=2)
    elif name == "rolling_restart":
        for index, mid in enumerate((first, second)):
            emit(group.remove_member(clock[0], mid))   # the consumer closes: leave with epoch -1
            settle()
            join(host_index=index)
    elif name == "crash":
        clock[0] += SESSION_TIMEOUT_MS                 # the session timeout fences the silent member
        emit(group.remove_member(clock[0], second))
        settle()
    elif name == "subscription_change":
        payments = Topic(kafka_uuid(rng), "payments", 3)
        group.topics[payments.topic_id] = payments
        emit(group.heartbeat(clock[0], first, subscription=("orders", "payments")))
        settle()
    elif name == "topic_growth":
        orders.partitions = 12                         # kafka-topics --alter --partitions 12
        emit(group.heartbeat(clock[0], first))
        settle()
    elif name == "static_replacement":
        emit(group.static_leave(clock[0], first))
        new = Member(kafka_uuid(rng), "orders-app-0", ("orders",), instance_id="instance-0", rack_id="rack-0")
        emit(group.static_rejoin(clock[0], first, new))
        settle()
    return appends
