"""The simulator's classic group: JoinGroup/SyncGroup generations stored as ``GroupMetadataValue`` with the embedded
consumer protocol subscription/assignment, client-side range/roundrobin assignment."""

from __future__ import annotations

from dataclasses import dataclass, field

import offsets_audit.simulate.records as R


@dataclass
class ClassicMember:
    member_id: str
    client_id: str
    topics: tuple
    instance_id: str | None = None
    assignment: dict = field(default_factory=dict)   # topic name -> sorted partitions


class ProtocolBytes:
    """Embedded consumer protocol payload, encoded by the writer with ``codec.encode_consumer_protocol``."""

    __slots__ = ("kind", "version", "data")

    def __init__(self, kind: str, version: int, data: dict):
        self.kind, self.version, self.data = kind, version, data

    def __eq__(self, other):
        return isinstance(other, ProtocolBytes) and (self.kind, self.version, self.data) == (
            other.kind, other.version, other.data)


def client_assignment(protocol: str, members: list, topics_by_name: dict) -> dict:
    """The consumer's own ``RangeAssignor`` / ``RoundRobinAssignor`` (classic protocol, run by the leader)."""
    out: dict[str, dict] = {m.member_id: {} for m in members}
    if protocol == "range":
        for name in sorted({t for m in members for t in m.topics}):
            if name not in topics_by_name:
                continue
            subs = sorted(m.member_id for m in members if name in m.topics)
            n = topics_by_name[name].partitions
            per, extra = divmod(n, len(subs))
            start = 0
            for i, mid in enumerate(subs):
                count = per + (1 if i < extra else 0)
                if count:
                    out[mid][name] = list(range(start, start + count))
                start += count
    else:
        ordered = sorted(members, key=lambda m: m.member_id)
        i = 0
        for name in sorted({t for m in members for t in m.topics}):
            if name not in topics_by_name:
                continue
            for p in range(topics_by_name[name].partitions):
                while name not in ordered[i % len(ordered)].topics:
                    i += 1
                out[ordered[i % len(ordered)].member_id].setdefault(name, []).append(p)
                i += 1
    return out


class SimulatedClassicGroup:
    """Classic (JoinGroup/SyncGroup) consumer group as ``ClassicGroup`` stores it in ``GroupMetadataValue``."""

    kind = "classic"

    def __init__(self, group_id: str, topics: dict, protocol: str):
        self.group_id = group_id
        self.topics_by_name = {t.name: t for t in topics.values()}
        self.protocol = protocol
        self.generation = 0
        self.leader = None
        self.members: dict = {}
        self.stable = False
        self.deleted = False

    def create(self, now: int) -> list:
        return [R.group_metadata(self.group_id, "", 0, None, None, now, [])]

    def complete_rebalance(self, state_ms: int) -> list:
        """SyncGroup from the leader: the new generation with every member's subscription and assignment."""
        self.generation += 1
        if not self.members:
            self.stable = False
            self.leader = None
            return [R.group_metadata(self.group_id, "consumer", self.generation, None, None, state_ms, [])]
        members = list(self.members.values())
        if self.leader not in self.members:
            self.leader = members[0].member_id
        assignment = client_assignment(self.protocol, members, self.topics_by_name)
        entries = []
        for m in members:
            m.assignment = assignment[m.member_id]
            entries.append({
                "memberId": m.member_id, "groupInstanceId": m.instance_id, "clientId": m.client_id,
                "clientHost": "localhost/127.0.0.1", "rebalanceTimeout": 30000, "sessionTimeout": 45000,
                "subscription": ProtocolBytes("subscription", 3, {
                    "topics": list(m.topics), "userData": None, "ownedPartitions": [], "generationId": -1,
                    "rackId": None}),
                "assignment": ProtocolBytes("assignment", 3, {
                    "assignedPartitions": [{"topic": t, "partitions": p} for t, p in m.assignment.items()],
                    "userData": None}),
            })
        self.stable = True
        return [R.group_metadata(self.group_id, "consumer", self.generation, self.protocol, self.leader,
                                 state_ms, entries)]

    def state(self) -> dict:
        return {"type": "classic", "exists": not self.deleted, "generation": self.generation,
                "protocol": self.protocol if self.members else None, "leader": self.leader,
                "members": {m.member_id: {"assigned": m.assignment} for m in self.members.values()}}
