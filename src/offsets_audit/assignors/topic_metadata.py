"""Topic metadata for assignor re-runs: snapshots, the deprecated partition-metadata records, inference.

Since KIP-1101 the group coordinator no longer writes the subscribed topics' metadata to
``__consumer_offsets``; it reads the metadata image of the cluster and stores only a hash of it
(``metadataHash`` in ``ConsumerGroupMetadataValue`` / ``ShareGroupMetadataValue`` /
``StreamsGroupMetadataValue``, see ``metadata_hash``). To re-run an assignor we therefore need the
topics from elsewhere, in this order of trust:

1. a snapshot the user supplies (JSON / JSON Lines / Parquet; ``offsets-audit capture-topics`` writes
   one from a live cluster); entries may carry ``valid_from_ms`` so one file can describe a topic that
   grew over time;
2. the deprecated partition-metadata records (types 4, 9, 18) that brokers before KIP-1101 wrote;
3. lower bounds inferred from the recorded assignments (highest partition seen + 1).

Whatever the source, ``verify_metadata_hash`` recomputes the group's hash the way
``ModernGroup.computeMetadataHash`` does and compares it with the hash in the log; a match means the
re-run sees exactly the topics the coordinator saw (partition counts and racks included).

The in-memory layout of one topic is the golden assignor layout: ``{"id", "name", "partitions",
"partition_racks"}`` (``partition_racks[p]`` = racks of partition ``p``'s replicas, or ``None``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from offsets_audit.assignors.metadata_hash import compute_group_hash, compute_topic_hash
from offsets_audit.errors import UserError

#: Spark schema of a topic-metadata table (``read_topic_metadata``).
TOPIC_METADATA_DDL = ("name string, topic_id string, partitions int, partition_racks array<array<string>>, "
                      "valid_from_ms long")
TOPIC_METADATA_COLUMNS = ("name", "topic_id", "partitions", "partition_racks", "valid_from_ms")

_NAME_KEYS = ("name", "topic", "topic_name", "topicName")
_ID_KEYS = ("topic_id", "id", "topicId")
_PARTITION_KEYS = ("partitions", "num_partitions", "numPartitions", "partition_count")
_RACK_KEYS = ("partition_racks", "racks")
_VALID_FROM_KEYS = ("valid_from_ms", "captured_at_ms", "time_ms")


def _first(entry: Mapping, keys: Sequence[str]) -> Any:
    for key in keys:
        if key in entry and entry[key] is not None:
            return entry[key]
    return None


def normalize_topic(entry: Mapping, where: str = "topic metadata") -> dict:
    """One topic in the golden layout (plus ``valid_from_ms``) from any of the accepted spellings.

    Accepted: ``name``/``topic``/``topicName``, ``id``/``topic_id``/``topicId``, ``partitions`` (a count,
    or a list of partition entries as kafka-python's describe_topics returns), ``partition_racks``.
    """
    name = _first(entry, _NAME_KEYS)
    if not isinstance(name, str):
        raise UserError(f"{where}: entry {dict(entry)!r} has no topic name",
                        fix="give every topic a 'name' (or 'topic') field")
    partitions = _first(entry, _PARTITION_KEYS)
    if isinstance(partitions, (list, tuple)):
        partitions = len(partitions)
    try:
        partitions = int(partitions)
    except (TypeError, ValueError):
        raise UserError(f"{where}: topic {name!r} has no partition count (got {partitions!r})",
                        fix="give every topic an integer 'partitions' field") from None
    racks = _first(entry, _RACK_KEYS)
    if racks is not None:
        racks = [None if r is None else [str(x) for x in r] for r in racks]
        if not any(racks):
            racks = None
    valid_from = _first(entry, _VALID_FROM_KEYS)
    topic_id = _first(entry, _ID_KEYS)
    return {"id": None if topic_id in (None, "", "AAAAAAAAAAAAAAAAAAAAAA") else str(topic_id), "name": name,
            "partitions": partitions, "partition_racks": racks,
            "valid_from_ms": None if valid_from is None else int(valid_from)}


def parse_topics(obj: Any, where: str = "topic metadata") -> list[dict]:
    """Topics from parsed JSON: a list of topics, or an object with ``topics`` (as ``*.state.json`` has)."""
    if isinstance(obj, Mapping) and "topics" not in obj and _first(obj, _NAME_KEYS) is not None:
        obj = [obj]
    if isinstance(obj, Mapping):
        if "topics" not in obj:
            raise UserError(f"{where}: a JSON object needs a 'topics' list",
                            fix='write {"topics": [{"name": ..., "id": ..., "partitions": ...}]}')
        obj = obj["topics"]
    if not isinstance(obj, list):
        raise UserError(f"{where}: expected a list of topics, got {type(obj).__name__}",
                        fix="write a JSON list of topic objects")
    return [normalize_topic(entry, where) for entry in obj]


def load_topics(path: str | Path) -> list[dict]:
    """Read a snapshot file: JSON, JSON Lines (one topic per line) or Parquet (file or folder)."""
    p = Path(str(path).replace("file://", ""))
    if not p.exists():
        raise UserError(f"topic-metadata snapshot {p} does not exist",
                        fix="pass a file written by 'offsets-audit capture-topics' or a JSON/Parquet snapshot")
    if p.is_dir() or p.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [normalize_topic(row, str(p)) for row in pq.read_table(str(p)).to_pylist()]
    text = p.read_text(encoding="utf-8")
    try:
        return parse_topics(json.loads(text), str(p))
    except json.JSONDecodeError:
        pass
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(normalize_topic(json.loads(line), f"{p} line {number}"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{p} line {number} is neither JSON nor JSON Lines ({exc})",
                            fix="write the snapshot as JSON, JSON Lines or Parquet") from None
    return rows


def write_topics(topics: Iterable[Mapping], path: str | Path) -> Path:
    """Write a snapshot as JSON ``{"topics": [...]}`` in the golden layout (what ``load_topics`` reads)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    rows = [normalize_topic(t) for t in topics]
    for row in rows:
        if row["valid_from_ms"] is None:
            del row["valid_from_ms"]
    p.write_text(json.dumps({"topics": rows}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return p


def read_topic_metadata(spark, path: str):
    """A snapshot as a Spark DataFrame with the columns of ``TOPIC_METADATA_DDL`` (read on the driver:
    snapshots are one row per topic)."""
    rows = load_topics(path)
    return spark.createDataFrame([tuple(row.get(c if c != "topic_id" else "id") for c in TOPIC_METADATA_COLUMNS)
                                  for row in rows], TOPIC_METADATA_DDL)


def topics_from_rows(rows: Iterable[Mapping]) -> list[dict]:
    """Topics from rows of a topic-metadata DataFrame (``Row.asDict()`` or pandas records)."""
    return [normalize_topic(dict(r)) for r in rows]


class TopicMetadata:
    """A snapshot of topics, possibly with several versions of a topic (``valid_from_ms``).

    ``as_of(time_ms)`` gives ``{name: topic}`` with, per topic name, the latest version whose
    ``valid_from_ms`` is at or before ``time_ms`` (a version without ``valid_from_ms`` is valid from the
    beginning). ``None`` as time gives the latest version of every topic.
    """

    def __init__(self, topics: Iterable[Mapping] = ()):
        versions: dict[str, list[dict]] = {}
        for t in topics:
            t = normalize_topic(t)
            versions.setdefault(t["name"], []).append(t)
        for name in versions:
            versions[name].sort(key=lambda t: -1 if t["valid_from_ms"] is None else t["valid_from_ms"])
        self._versions = versions

    def __bool__(self) -> bool:
        return bool(self._versions)

    def names(self) -> list[str]:
        return sorted(self._versions)

    def as_of(self, time_ms: int | None = None) -> dict[str, dict]:
        out = {}
        for name, versions in self._versions.items():
            chosen = None
            for t in versions:
                if time_ms is None or t["valid_from_ms"] is None or t["valid_from_ms"] <= time_ms:
                    chosen = t
            if chosen is not None:
                out[name] = chosen
        return out


def topics_from_partition_metadata(topics_value: Iterable[Mapping] | None) -> list[dict]:
    """Topics from a deprecated ``ConsumerGroupPartitionMetadataValue`` (type 4) /
    ``ShareGroupPartitionMetadataValue`` (9) / ``StreamsGroupPartitionMetadataValue`` (18) ``topics`` list."""
    out = []
    for t in topics_value or ():
        count = int(t.get("numPartitions") or 0)
        racks: list | None = None
        per_partition = t.get("partitionMetadata") or ()
        if per_partition:
            racks = [None] * count
            for pm in per_partition:
                p = pm.get("partition")
                if isinstance(p, int) and 0 <= p < count:
                    racks[p] = list(pm.get("racks") or ())
            if not any(racks):
                racks = None
        out.append({"id": t.get("topicId"), "name": t.get("topicName"), "partitions": count,
                    "partition_racks": racks, "valid_from_ms": None})
    return out


def group_metadata_hash(subscribed_topic_names: Iterable[str], topics_by_name: Mapping[str, Mapping]) -> int:
    """``ModernGroup.computeMetadataHash``: group hash of the subscribed topics that exist in ``topics_by_name``
    (a topic without an id cannot be hashed and counts as missing)."""
    hashes = {}
    for name in set(subscribed_topic_names):
        t = topics_by_name.get(name)
        if t is not None and t.get("id"):
            hashes[name] = compute_topic_hash(t["id"], name, t["partitions"], t.get("partition_racks"))
    return compute_group_hash(hashes)


def verify_metadata_hash(recorded_hash: int | None, subscribed_topic_names: Iterable[str],
                         topics_by_name: Mapping[str, Mapping]) -> bool | None:
    """Does the snapshot reproduce the hash the coordinator wrote? ``None`` when the log holds no hash
    (``recorded_hash`` missing, or 0 from a broker before KIP-1101 while the topics hash to something)."""
    computed = group_metadata_hash(subscribed_topic_names, topics_by_name)
    if recorded_hash is None or (recorded_hash == 0 and computed != 0):
        return None
    return computed == recorded_hash


def repair_partition_counts(recorded_hash: int, subscribed_topic_names: Iterable[str],
                            topics_by_name: Mapping[str, Mapping], *, lower_bounds: Mapping[str, int] | None = None,
                            max_extra: int = 256) -> dict[str, dict] | None:
    """Look for the partition counts the coordinator saw, guided by the recorded metadata hash.

    A snapshot taken later than an assignment often differs only in the partition count of one topic
    (partitions were added since). Each subscribed topic is tried alone with every count from its lower
    bound (highest partition seen in the assignment + 1, at least 1) up to ``max_extra`` past the snapshot's
    count; the topic may also not have existed yet. Returns the repaired ``{name: topic}`` map when exactly
    that reproduces ``recorded_hash``, else ``None``. Racks of added partitions are unknown (none).
    """
    names = sorted({n for n in subscribed_topic_names if n in topics_by_name and topics_by_name[n].get("id")})
    hashes = {n: compute_topic_hash(topics_by_name[n]["id"], n, topics_by_name[n]["partitions"],
                                    topics_by_name[n].get("partition_racks")) for n in names}
    lower_bounds = lower_bounds or {}
    for name in names:
        t = topics_by_name[name]
        others = {n: h for n, h in hashes.items() if n != name}
        if compute_group_hash(others) == recorded_hash and lower_bounds.get(name, 0) == 0:
            return {n: dict(v) for n, v in topics_by_name.items() if n != name}
        low = max(1, lower_bounds.get(name, 1))
        for count in range(low, max(t["partitions"], low) + max_extra + 1):
            if count == t["partitions"]:
                continue
            racks = t.get("partition_racks")
            racks = None if racks is None else (list(racks[:count]) + [None] * max(0, count - len(racks)))
            trial = dict(others)
            trial[name] = compute_topic_hash(t["id"], name, count, racks)
            if compute_group_hash(trial) == recorded_hash:
                repaired = {n: dict(v) for n, v in topics_by_name.items()}
                repaired[name] = dict(t, partitions=count, partition_racks=racks)
                return repaired
    return None


# ---------------------------------------------------------------------------------------------------------------
# capture from a live cluster

def capture_topics(bootstrap_server: str, topics: Sequence[str] | None = None, *, include_internal: bool = False,
                   timeout_ms: int = 30_000, admin_client=None) -> list[dict]:
    """Describe the cluster's topics with kafka-python's admin client: name, topic id (Metadata v10+),
    partition count and, per partition, the racks of its replicas (from the brokers' ``rack``)."""
    if admin_client is None:
        from kafka.admin import KafkaAdminClient

        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap_server, request_timeout_ms=timeout_ms,
                                     client_id="offsets-audit-capture-topics")
        except Exception as exc:  # kafka-python raises NoBrokersAvailable and friends
            raise UserError(f"cannot reach Kafka at {bootstrap_server} ({type(exc).__name__}: {exc})",
                            fix="check --bootstrap-server HOST:PORT and that the cluster is up") from None
    else:
        admin = admin_client
    try:
        racks_by_broker = {}
        try:
            cluster = admin.describe_cluster()
            racks_by_broker = {b.get("broker_id", b.get("node_id")): b.get("rack") for b in cluster.get("brokers") or ()}
        except Exception:  # not every broker implements DescribeCluster; racks are then unknown
            racks_by_broker = {}
        described = admin.describe_topics(list(topics) if topics else None)
    finally:
        if admin_client is None:
            admin.close()
    out = []
    for t in described:  # kafka-python 3 names fields as the protocol does (name, partition_index, replica_nodes)
        name = t.get("name", t.get("topic"))
        if t.get("error_code", 0) not in (0, None) or name is None:
            continue
        if t.get("is_internal") and not include_internal:
            continue
        parts = sorted(t.get("partitions") or (), key=lambda p: p.get("partition_index", p.get("partition", 0)))
        racks = [[racks_by_broker[r] for r in p.get("replica_nodes", p.get("replicas")) or () if racks_by_broker.get(r)]
                 for p in parts]
        topic_id = t.get("topic_id")
        if isinstance(topic_id, str) and len(topic_id) == 36:
            import uuid

            topic_id = _uuid_to_kafka_string(uuid.UUID(topic_id))
        elif topic_id is not None and not isinstance(topic_id, str):
            topic_id = _uuid_to_kafka_string(topic_id)
        out.append(normalize_topic({"name": name, "id": topic_id, "partitions": len(parts),
                                    "partition_racks": racks if any(racks) else None}))
    return sorted(out, key=lambda t: t["name"])


def _uuid_to_kafka_string(value) -> str | None:
    """Kafka's ``Uuid.toString`` (URL-safe base64 of the 16 bytes, no padding) of a ``uuid.UUID`` or bytes."""
    import base64
    import uuid

    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(raw) != 16 or raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
