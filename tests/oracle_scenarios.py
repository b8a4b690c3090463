"""Random but legal scenarios for Kafka's coordinator (the oracle in ``tests/kafka/java/**/oracle``), from a seed.

``scenario(seed, index)`` is one history: one ``__consumer_offsets`` partition (``partition`` = ``index`` unless
given) with one to four groups of mixed kinds on the history's own topics (names prefixed ``h<index>.``, so many
histories can share one folder and one Spark job). What a history can hold:

* KIP-848 consumer groups: members joining and leaving at random times, static members (with rolling restarts:
  a temporary leave, then the same instance id under a new member id), crashes that the session timeout ends,
  racks, server assignors named or not, subscriptions by name or by regular expression and their changes, commits
  with member epochs, groups deleted once empty and born again under the same id;
* classic groups (JoinGroup/SyncGroup with Kafka's client-side ``range``, ``roundrobin`` and
  ``cooperative-sticky`` assignors) and their online upgrade to a consumer group when a KIP-848 member joins, and
  downgrade when the last KIP-848 member leaves;
* share groups (KIP-932) and, from Kafka 4.2 on, streams groups (KIP-1071);
* simple groups: commits without group management, transactional commits ended by COMMIT or ABORT markers,
  offset deletes, group deletes;
* partitions added to topics, topics created half-way (found by regular expressions), broker racks;
* KIP-1263 assignment intervals from Kafka 4.4 on: the broker's and per-group overrides.

Every scenario is legal: each step names a client that exists, deletes only groups that are empty by then, and
keeps a group id to one kind for its life. The scenario format is the oracle's (docs/oracle.md).
"""
from __future__ import annotations

import hashlib
import random
from typing import Any

START_MS = 1_754_000_000_000


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _rng(seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _uuid(rng: random.Random) -> str:
    """A Kafka ``Uuid`` string (22 url-safe base64 characters) that is neither zero nor Kafka's reserved ids."""
    import base64

    raw = rng.getrandbits(128).to_bytes(16, "big")
    if raw[:8] == bytes(8):
        raw = b"\x01" + raw[1:]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class _History:
    def __init__(self, seed: int, index: int, version: str, partition: int | None):
        self.rng = _rng(seed, index)
        self.index = index
        self.version = _version_key(version)
        self.prefix = f"h{index:05d}"
        self.partition = index if partition is None else partition
        self.duration = self.rng.choice((90_000, 150_000, 240_000, 360_000))
        self.steps: list[dict[str, Any]] = []
        self.group_configs: dict[str, dict[str, str]] = {}
        self.broker: dict[str, str] = {}
        self.topics: list[dict[str, Any]] = []
        self.late_topics: list[str] = []
        self.brokers: list[dict[str, Any]] = []
        self.producer_ids = iter(range(1000 + index * 100, 1000 + index * 100 + 100))

    def at(self, lo: float, hi: float) -> int:
        return int(self.rng.uniform(lo, hi))

    def step(self, at: int, op: str, **fields: Any) -> None:
        self.steps.append({"at": int(at), "op": op, **fields})

    def topic_names(self) -> list[str]:
        return [t["name"] for t in self.topics]

    def pick_topics(self) -> list[str]:
        names = self.topic_names()
        return sorted(self.rng.sample(names, self.rng.randint(1, len(names))))

    def rack(self) -> str | None:
        if not self.brokers or self.brokers[0].get("rack") is None or self.rng.random() < 0.4:
            return None
        return self.rng.choice(self.brokers)["rack"]


def scenario(seed: int, index: int, *, kafka_version: str = "4.4.0", partition: int | None = None,
             kinds: tuple[str, ...] | None = None, broker_configs: bool = True) -> dict[str, Any]:
    """The ``index``-th history of ``seed`` for Kafka ``kafka_version`` (the same arguments give the same history).

    ``broker_configs`` false keeps the brokers' defaults (every history of a batch then shares one broker config,
    as one cluster's ``__consumer_offsets`` partitions do); per-group configs stay."""
    h = _History(seed, index, kafka_version, partition)
    rng = h.rng
    racks = rng.random() < 0.5
    h.brokers = [{"id": b, "rack": f"rack-{b % 3}" if racks else None} for b in range(rng.choice((1, 3, 4)))]
    for t in range(rng.randint(2, 4)):
        h.topics.append({"name": f"{h.prefix}.t{t}", "id": _uuid(rng), "partitions": rng.randint(1, 12)})
    if h.version >= (4, 4):
        interval = rng.choice((None, None, 0, 1000, 3000))
        if interval is not None and broker_configs:
            h.broker["group.consumer.assignment.interval.ms"] = str(interval)
    if rng.random() < 0.2 and broker_configs:
        h.broker["group.consumer.assignors"] = "range,uniform"
    available = ["consumer", "consumer", "consumer", "classic", "classic", "simple", "share"]
    if h.version >= (4, 2):
        available.append("streams")
    if kinds:
        available = [k for k in available if k in kinds] or list(kinds)
    for g in range(rng.randint(1, 4)):
        kind = rng.choice(available)
        group = f"{h.prefix}.{kind}-{g}"
        {"consumer": _consumer_group, "classic": _classic_group, "simple": _simple_group, "share": _share_group,
         "streams": _streams_group}[kind](h, group)
    _topic_changes(h)
    steps = sorted(h.steps, key=lambda s: s["at"])
    return {"name": h.prefix, "partition": h.partition, "seed": rng.getrandbits(31), "start_ms": START_MS,
            "end": h.duration + 60_000, "broker": h.broker, "brokers": h.brokers, "topics": h.topics,
            "group_configs": h.group_configs, "steps": steps, "kafka_version": kafka_version}


def _topic_changes(h: _History) -> None:
    rng = h.rng
    for t in h.topics:
        if rng.random() < 0.3:
            h.step(h.at(0.1 * h.duration, 0.8 * h.duration), "topic.grow", name=t["name"],
                   partitions=t["partitions"] + rng.randint(1, 6))
    for name in h.late_topics:
        h.step(h.at(0.2 * h.duration, 0.7 * h.duration), "topic.create", name=name, id=_uuid(rng),
               partitions=rng.randint(1, 6))


def _commits(h: _History, group: str, member: str, op: str, start: int, end: int) -> None:
    t = start + h.rng.randint(3_000, 20_000)
    while t < end:
        h.step(t, op, group=group, member=member)
        t += h.rng.randint(5_000, 40_000)


def _interval_override(h: _History, group: str, kind: str) -> None:
    if h.version >= (4, 4) and h.rng.random() < 0.25:
        configs = h.group_configs.setdefault(group, {})
        configs[f"{kind}.assignment.interval.ms"] = str(h.rng.choice((0, 500, 2000, 5000)))
        if h.rng.random() < 0.3:
            configs[f"{kind}.assignor.offload.enable"] = "true"


def _consumer_members(h: _History, group: str, start: int, end: int, first: int, regex_ok: bool,
                      must_leave: bool) -> int:
    """Consumer members living within [start, end]; returns the time the last one is gone (left or timed out)."""
    rng = h.rng
    homogeneous = rng.random() < 0.6
    shared = h.pick_topics()
    regex = None
    if regex_ok and rng.random() < 0.2:
        if rng.random() < 0.5:
            late = f"{h.prefix}.t{len(h.topics) + len(h.late_topics)}"
            h.late_topics.append(late)
        regex = rng.choice((f"{h.prefix}\\.t[0-9]+", f"{h.prefix}\\.t[02468]"))
    assignor = rng.choice((None, None, "uniform", "range"))
    gone = start
    for m in range(first, first + rng.randint(1, 5)):
        name = f"m{m}"
        joined = h.at(start, start + 0.5 * (end - start))
        static = rng.random() < 0.25
        fields: dict[str, Any] = {"group": group, "member": name, "client_id": f"{group}-{name}"}
        if static:
            fields["instance"] = f"{group}-instance-{m}"
        rack = h.rack()
        if rack:
            fields["rack"] = rack
        if regex is not None and rng.random() < 0.7:
            fields["regex"] = regex
        else:
            fields["topics"] = shared if homogeneous else h.pick_topics()
        if assignor:
            fields["assignor"] = assignor
        fields["rebalance_timeout_ms"] = rng.choice((30_000, 60_000, 300_000))
        h.step(joined, "consumer.join", **fields)
        life_end = h.at(joined + 5_000, end) if end > joined + 5_000 else end
        _commits(h, group, name, "consumer.commit", joined, life_end)
        if rng.random() < 0.2 and life_end > joined + 10_000:
            change = {"topics": h.pick_topics()} if "topics" in fields else {"topics": h.pick_topics()}
            h.step(h.at(joined + 5_000, life_end), "consumer.subscribe", group=group, member=name, **change)
        if static and rng.random() < 0.5 and life_end > joined + 20_000:
            restart = h.at(joined + 5_000, life_end - 10_000)
            h.step(restart, "consumer.leave", group=group, member=name, temporary=True)
            rejoin = restart + rng.randint(500, 8_000)
            again = {k: v for k, v in fields.items()}
            h.step(rejoin, "consumer.join", **again)
        ending = "leave" if must_leave else rng.choice(("leave", "leave", "stop", "stay"))
        if ending == "leave":
            h.step(life_end, "consumer.leave", group=group, member=name)
            gone = max(gone, life_end + 1)
        elif ending == "stop":
            h.step(life_end, "consumer.stop", group=group, member=name)
            gone = max(gone, life_end + 50_000)
        else:
            gone = max(gone, h.duration + 120_000)
    return gone


def _consumer_group(h: _History, group: str) -> None:
    rng = h.rng
    _interval_override(h, group, "consumer")
    rebirth = rng.random() < 0.2
    if rebirth:
        half = h.duration // 2
        gone = _consumer_members(h, group, 0, half - 5_000, 0, True, must_leave=True)
        h.step(gone + 500, "group.delete", groups=[group])
        _consumer_members(h, group, gone + 2_000, h.duration, 10, True, must_leave=False)
    else:
        _consumer_members(h, group, 0, h.duration, 0, True, must_leave=False)


def _classic_group(h: _History, group: str) -> None:
    rng = h.rng
    assignors = rng.choice((["range"], ["roundrobin"], ["cooperative-sticky"], ["range", "roundrobin"]))
    shared = h.pick_topics()
    homogeneous = rng.random() < 0.6
    upgrade = rng.random() < 0.35
    count = rng.randint(1, 4)
    for m in range(count):
        name = f"c{m}"
        joined = h.at(0, 0.4 * h.duration)
        fields: dict[str, Any] = {"group": group, "member": name, "client_id": f"{group}-{name}",
                                  "assignors": assignors, "topics": shared if homogeneous else h.pick_topics(),
                                  "session_timeout_ms": rng.choice((10_000, 30_000, 45_000)),
                                  "rebalance_timeout_ms": rng.choice((30_000, 60_000))}
        if rng.random() < 0.2:
            fields["instance"] = f"{group}-instance-{m}"
        h.step(joined, "classic.join", **fields)
        life_end = h.at(joined + 10_000, h.duration) if h.duration > joined + 10_000 else h.duration
        _commits(h, group, name, "classic.commit", joined + 5_000, life_end)
        if rng.random() < 0.15:
            h.step(h.at(joined + 5_000, life_end), "classic.subscribe", group=group, member=name,
                   topics=h.pick_topics())
        ending = rng.choice(("leave", "stop", "stay", "stay"))
        if ending == "leave":
            h.step(life_end, "classic.leave", group=group, member=name)
        elif ending == "stop":
            h.step(life_end, "classic.stop", group=group, member=name)
    if upgrade:
        joined = h.at(0.4 * h.duration, 0.6 * h.duration)
        for m in range(rng.randint(1, 2)):
            name = f"u{m}"
            at = joined + m * rng.randint(0, 3_000)
            h.step(at, "consumer.join", group=group, member=name, client_id=f"{group}-{name}",
                   topics=shared, rebalance_timeout_ms=60_000,
                   **({"assignor": rng.choice(("uniform", "range"))} if rng.random() < 0.5 else {}))
            _commits(h, group, name, "consumer.commit", at, h.duration)
            if rng.random() < 0.6:
                h.step(h.at(at + 15_000, h.duration + 30_000), "consumer.leave", group=group, member=name)
    if rng.random() < 0.15:
        h.step(h.duration + 20_000, "offsets.delete", group=group, topics={shared[0]: [0]})


def _simple_group(h: _History, group: str) -> None:
    rng = h.rng
    committed: set[tuple[str, int]] = set()
    for _ in range(rng.randint(1, 6)):
        topic = rng.choice(h.topics)
        offsets = [{"topic": topic["name"], "partition": p}
                   for p in sorted(rng.sample(range(topic["partitions"]), rng.randint(1, topic["partitions"])))]
        committed.update((o["topic"], o["partition"]) for o in offsets)
        at = h.at(0, h.duration)
        if rng.random() < 0.4:
            pid = next(h.producer_ids)
            h.step(at, "txn.commit", group=group, producer_id=pid, producer_epoch=rng.randint(0, 3), offsets=offsets,
                   transactional_id=f"{group}-txn-{pid}")
            end = rng.choice(("COMMIT", "COMMIT", "ABORT"))
            step = h.steps[-1]
            h.step(at + rng.randint(10, 5_000), "txn.end", producer_id=pid, producer_epoch=step["producer_epoch"],
                   result=end)
        else:
            h.step(at, "commit", group=group, offsets=offsets, client_id=f"{group}-admin")
    if committed and rng.random() < 0.3:
        topic, partition = sorted(committed)[0]
        h.step(h.duration + 10_000, "offsets.delete", group=group, topics={topic: [partition]})
    if rng.random() < 0.2:
        h.step(h.duration + 15_000, "group.delete", groups=[group])


def _share_group(h: _History, group: str) -> None:
    rng = h.rng
    _interval_override(h, group, "share")
    shared = h.pick_topics()
    for m in range(rng.randint(1, 4)):
        name = f"s{m}"
        joined = h.at(0, 0.5 * h.duration)
        fields: dict[str, Any] = {"group": group, "member": name, "client_id": f"{group}-{name}", "topics": shared}
        rack = h.rack()
        if rack:
            fields["rack"] = rack
        h.step(joined, "share.join", **fields)
        life_end = h.at(joined + 5_000, h.duration) if h.duration > joined + 5_000 else h.duration
        if rng.random() < 0.15:
            h.step(h.at(joined + 2_000, life_end), "share.subscribe", group=group, member=name, topics=h.pick_topics())
        ending = rng.choice(("leave", "stop", "stay"))
        if ending == "leave":
            h.step(life_end, "share.leave", group=group, member=name)
        elif ending == "stop":
            h.step(life_end, "share.stop", group=group, member=name)


def _streams_group(h: _History, group: str) -> None:
    rng = h.rng
    app = group.replace(".", "-")
    sources = h.pick_topics()
    subtopologies = []
    for i, topic in enumerate(sources[:2]):
        sub: dict[str, Any] = {"id": str(i), "source_topics": [topic]}
        if rng.random() < 0.6:
            sub["changelog_topics"] = [f"{app}-store-{i}-changelog"]
        subtopologies.append(sub)
    topology = {"epoch": 0, "subtopologies": subtopologies}
    processes = [f"p{p}" for p in range(rng.randint(1, 3))]
    for m in range(rng.randint(1, 4)):
        name = f"t{m}"
        joined = h.at(0, 0.5 * h.duration)
        fields: dict[str, Any] = {"group": group, "member": name, "client_id": f"{app}-{name}",
                                  "process": rng.choice(processes), "topology": topology}
        rack = h.rack()
        if rack:
            fields["rack"] = rack
        h.step(joined, "streams.join", **fields)
        life_end = h.at(joined + 5_000, h.duration) if h.duration > joined + 5_000 else h.duration
        ending = rng.choice(("leave", "stop", "stay"))
        if ending == "leave":
            h.step(life_end, "streams.leave", group=group, member=name)
        elif ending == "stop":
            h.step(life_end, "streams.stop", group=group, member=name)


def scenarios(seed: int, count: int, *, kafka_version: str = "4.4.0", first: int = 0,
              broker_configs: bool = True) -> list[dict[str, Any]]:
    """``count`` histories of ``seed``, indices ``first`` to ``first + count - 1`` (each on its own partition)."""
    return [scenario(seed, i, kafka_version=kafka_version, broker_configs=broker_configs)
            for i in range(first, first + count)]
