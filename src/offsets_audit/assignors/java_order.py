"""Java collection iteration order, reproduced from first principles.

Kafka's assignors iterate ``java.util.HashMap``/``HashSet`` keyed by member ids and topic ids; where a
tie-break depends on that order, a bit-exact re-implementation must iterate the same way. A HashMap's
order is a pure function of its keys' ``hashCode``, the insertion order and the table capacity:

* ``String.hashCode`` is ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in int32 arithmetic;
* ``HashMap.hash`` spreads it as ``h ^ (h >>> 16)`` and the bucket is ``hash & (capacity - 1)``;
* the table starts at ``tableSizeFor(initialCapacity)`` (16 by default, allocated lazily) and doubles
  whenever the size exceeds ``0.75 * capacity``; a resize splits buckets keeping relative order, so
  within a bucket entries stay in insertion order;
* iteration walks buckets in index order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Iterable, Sequence

if TYPE_CHECKING:
    import numpy as np

_MASK32 = 0xFFFFFFFF


def _to_int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


#: ``java_string_hash`` of the strings seen last: the assignor re-runs hash the same member and topic ids for every
#: assignment of a group (many calls for few distinct strings).
_HASHES: dict[str, int] = {}
_MAX_HASHES = 1 << 16


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` as a signed int32 (over UTF-16 code units, so non-BMP chars count twice)."""
    h = _HASHES.get(s)
    if h is not None:
        return h
    h = _string_hash(s)
    if len(_HASHES) >= _MAX_HASHES:
        _HASHES.clear()
    _HASHES[s] = h
    return h


def _string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return _to_int32(h)


_POWERS_OF_31: dict[int, np.ndarray] = {}


def java_string_hashes(strings: Sequence[str]) -> list[int]:
    """``String.hashCode()`` of many strings at once: numpy sums ``c[i] * 31^(n-1-i)`` in wrapping uint32, per
    group of equal UTF-16 length (member ids of one group mostly share a length). Same values as
    :func:`java_string_hash`."""
    import numpy as np

    encoded = [s.encode("utf-16-be") for s in strings]
    by_length: dict[int, list[int]] = {}
    for index, data in enumerate(encoded):
        by_length.setdefault(len(data) // 2, []).append(index)
    hashes = [0] * len(encoded)
    for length, indices in by_length.items():
        if length == 0:
            continue
        powers = _POWERS_OF_31.get(length)
        if powers is None:
            powers = np.array([pow(31, length - 1 - i, 1 << 32) for i in range(length)], dtype=np.uint32)
            _POWERS_OF_31[length] = powers
        units = np.frombuffer(b"".join(encoded[i] for i in indices), dtype=">u2").astype(np.uint32)
        values = (units.reshape(len(indices), length) * powers).sum(axis=1, dtype=np.uint32)
        for i, value in zip(indices, values.astype(np.int32).tolist()):
            hashes[i] = value
    return hashes


def java_long_hash(value: int) -> int:
    """``Long.hashCode()``: ``(int)(value ^ (value >>> 32))``."""
    v = value & 0xFFFFFFFFFFFFFFFF
    return _to_int32((v ^ (v >> 32)) & _MASK32)


def java_uuid_hash(msb: int, lsb: int) -> int:
    """``Uuid.hashCode()`` of Kafka's ``org.apache.kafka.common.Uuid`` (xor of the two longs, folded)."""
    h = (msb ^ lsb) & 0xFFFFFFFFFFFFFFFF
    return _to_int32(((h >> 32) ^ h) & _MASK32)


def spread(h: int) -> int:
    """``HashMap.hash``: ``h ^ (h >>> 16)`` on the unsigned 32-bit pattern."""
    h &= _MASK32
    return h ^ (h >> 16)


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the next power of two >= capacity (at least 1)."""
    n = 1
    while n < capacity:
        n <<= 1
    return n


def final_capacity(size: int, initial_capacity: int = 16) -> int:
    """Table capacity after ``size`` insertions into a map built with ``initial_capacity``."""
    capacity = table_size_for(max(initial_capacity, 1))
    while size > capacity * 0.75:
        capacity <<= 1
    return capacity


def hashmap_order(keys: Iterable[Hashable], hash_codes: Sequence[int] | None = None,
                  initial_capacity: int = 16) -> list:
    """The iteration order of a HashMap/HashSet filled with ``keys`` in the given order.

    ``hash_codes`` are the keys' Java ``hashCode()`` values; by default keys are strings and
    ``String.hashCode`` is used. Duplicate keys keep their first insertion position, as in Java.
    """
    unique: list = []
    seen: set = set()
    codes: list[int] = []
    positions: list[int] = []
    for index, key in enumerate(keys):
        if key in seen:
            continue
        seen.add(key)
        unique.append(key)
        positions.append(index)
    if hash_codes is not None:
        codes = [hash_codes[i] for i in positions]
    elif len(unique) >= 64:
        codes = java_string_hashes(unique)
    else:
        codes = [java_string_hash(key) for key in unique]
    mask = final_capacity(len(unique), initial_capacity) - 1
    if len(unique) >= 64:
        # The same order with numpy: a stable sort on the bucket keeps insertion order within a bucket.
        import numpy as np

        hashes = np.array(codes, dtype=np.int64) & _MASK32
        buckets = (hashes ^ (hashes >> 16)) & mask
        return [unique[i] for i in np.argsort(buckets, kind="stable").tolist()]
    order = sorted(range(len(unique)), key=lambda i: (spread(codes[i]) & mask, i))
    return [unique[i] for i in order]
