"""KIP-1101 group metadata hash, as Kafka's ``Utils.computeTopicHash`` / ``Utils.computeGroupHash`` compute it.

The ``metadataHash`` stored in ``ConsumerGroupMetadataValue`` / ``ShareGroupMetadataValue`` /
``StreamsGroupMetadataValue`` lets the coordinator notice that subscribed topic metadata changed without
keeping the metadata itself. Kafka feeds a streaming XXH3-64 (seed 0, hash4j) with little-endian
primitives; here the same byte stream is built explicitly and hashed with ``xxhash.xxh3_64_intdigest``.

Stream of one topic:

* ``byte`` magic 0 (the hash version);
* ``int64`` most significant bits, ``int64`` least significant bits of the topic id;
* ``putString(name)``: each UTF-16 code unit as 2 bytes, then ``int32`` length in code units;
* ``int32`` partition count;
* per partition ``p`` (ascending): ``int32 p`` then, for each rack of the replicas sorted by
  ``String.compareTo`` (UTF-16 code-unit order, duplicates kept), ``int32`` rack length followed by
  ``putString(rack)`` -- the length therefore appears twice.

A group hash is the XXH3-64 of the topic hashes (``int64`` each) in topic-name order; no topic gives 0,
as does a topic that does not exist. Results are signed int64, as stored in the records.
"""

from __future__ import annotations

import base64
import struct
from typing import Iterable, Mapping, Sequence

import xxhash

TOPIC_HASH_MAGIC_BYTE = 0

_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")


def java_string_sort_key(s: str) -> bytes:
    """Sort key giving Java ``String.compareTo`` order (lexicographic over UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def uuid_bits(topic_id: str | tuple[int, int]) -> tuple[int, int]:
    """``(msb, lsb)`` as signed longs of a Kafka ``Uuid`` string (22 chars, URL-safe base64, no padding)."""
    if isinstance(topic_id, tuple):
        return topic_id
    raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {topic_id!r} is not a Kafka Uuid (expected 16 bytes, got {len(raw)})")
    msb, lsb = struct.unpack(">qq", raw)
    return msb, lsb


def _to_signed64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def _put_string(out: bytearray, s: str) -> None:
    units = s.encode("utf-16-le", "surrogatepass")
    out += units
    out += _INT32.pack(len(units) // 2)


def topic_hash_input(topic_id: str | tuple[int, int], name: str, partition_count: int,
                     partition_racks: Sequence[Iterable[str] | None] | None = None) -> bytes:
    """The exact byte stream Kafka's ``computeTopicHash`` feeds to XXH3-64 for an existing topic.

    ``partition_racks[p]`` lists the racks of partition ``p``'s replicas (any order, duplicates
    allowed); ``None`` (for the whole topic or one partition) means no rack information.
    """
    msb, lsb = uuid_bits(topic_id)
    out = bytearray()
    out.append(TOPIC_HASH_MAGIC_BYTE)
    out += _INT64.pack(msb)
    out += _INT64.pack(lsb)
    _put_string(out, name)
    out += _INT32.pack(partition_count)
    for partition in range(partition_count):
        out += _INT32.pack(partition)
        racks = partition_racks[partition] if partition_racks is not None and partition < len(partition_racks) else None
        for rack in sorted(racks or (), key=java_string_sort_key):
            out += _INT32.pack(len(rack.encode("utf-16-le", "surrogatepass")) // 2)
            _put_string(out, rack)
    return bytes(out)


def compute_topic_hash(topic_id: str | tuple[int, int] | None, name: str, partition_count: int | None,
                       partition_racks: Sequence[Iterable[str] | None] | None = None) -> int:
    """``Utils.computeTopicHash``: signed int64 hash of one topic; 0 if the topic does not exist
    (``topic_id`` or ``partition_count`` is ``None``)."""
    if topic_id is None or partition_count is None:
        return 0
    data = topic_hash_input(topic_id, name, partition_count, partition_racks)
    return _to_signed64(xxhash.xxh3_64_intdigest(data, seed=0))


def compute_group_hash(topic_hashes: Mapping[str, int]) -> int:
    """``Utils.computeGroupHash``: signed int64 hash of ``{topic name: topic hash}``; 0 for no topics."""
    if not topic_hashes:
        return 0
    data = b"".join(_INT64.pack(topic_hashes[name]) for name in sorted(topic_hashes, key=java_string_sort_key))
    return _to_signed64(xxhash.xxh3_64_intdigest(data, seed=0))


def compute_metadata_hash(subscribed_topic_names: Iterable[str], topics: Iterable[Mapping]) -> int:
    """``ModernGroup.computeMetadataHash``: group hash over the subscribed topics that exist.

    ``topics`` are dicts ``{"topic_id", "name", "partitions", "partition_racks"}`` (the golden layout).
    """
    by_name = {topic["name"]: topic for topic in topics}
    hashes = {}
    for name in set(subscribed_topic_names):
        topic = by_name.get(name)
        if topic is not None:
            hashes[name] = compute_topic_hash(topic["topic_id"], name, topic["partitions"],
                                              topic.get("partition_racks"))
    return compute_group_hash(hashes)
