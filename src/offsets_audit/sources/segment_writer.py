"""Write real magic-2 log segments, the way the group coordinator's log appends look on a broker's disk.

Mirrors ``MemoryRecordsBuilder`` with the settings Kafka's coordinator runtime uses: CreateTime, base sequence 0
for data batches (-1 for control batches), producer id/epoch -1 unless the batch is transactional, every record of
a batch sharing the append timestamp unless per-record timestamps are given, and no record headers. Control batches
hold one ``EndTransactionMarker`` record (key ``int16 0 + int16 type``, value ``int16 0 + int32 coordinator epoch``).

Usage::

    with SegmentWriter.create(log_dir, partition=7, base_offset=0) as writer:   # <log_dir>/__consumer_offsets-7/
        writer.append_batch([(key, value), (key2, None)], timestamp=1754000000000, compression="lz4")
        writer.append_batch([(key, value)], timestamp=..., producer_id=4000, producer_epoch=0, transactional=True)
        writer.append_control("COMMIT", producer_id=4000, producer_epoch=0, coordinator_epoch=3, timestamp=...)

``encode_batch`` / ``encode_control_batch`` return the bytes of one batch for in-memory use.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Sequence

from crc32c import crc32c

from offsets_audit.sources.compression import COMPRESSION_IDS, compress

DEFAULT_TOPIC = "__consumer_offsets"
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count
_HEAD = struct.Struct(">qiib")  # base offset, length, partition leader epoch, magic
_CONTROL_TYPES = {"ABORT": 0, "COMMIT": 1}


def segment_path(log_dir: str | os.PathLike, partition: int, base_offset: int = 0,
                 topic: str = DEFAULT_TOPIC) -> Path:
    """``<log_dir>/<topic>-<partition>/<20-digit base offset>.log``, the broker's segment file name."""
    return Path(log_dir) / f"{topic}-{partition}" / f"{base_offset:020d}.log"


def encode_batch(records: Sequence[tuple], base_offset: int, timestamp: int | Sequence[int],
                 compression: str = "none", producer_id: int = -1, producer_epoch: int = -1,
                 transactional: bool = False, base_sequence: int = 0, partition_leader_epoch: int = 0,
                 is_control: bool = False) -> bytes:
    """One magic-2 record batch. ``records`` are ``(key, value)`` or ``(key, value, headers)`` tuples (None value:
    tombstone; headers: list of ``(str, bytes | None)``); ``timestamp`` is one append time or one per record."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if compression not in COMPRESSION_IDS:
        raise ValueError(f"unknown compression {compression!r}; use one of {sorted(COMPRESSION_IDS)}")
    if isinstance(timestamp, int):
        timestamps = [timestamp] * len(records)
    else:
        timestamps = list(timestamp)
        if len(timestamps) != len(records):
            raise ValueError(f"{len(timestamps)} timestamps for {len(records)} records")
    base_timestamp = timestamps[0]
    parts = []
    for delta, (record, ts) in enumerate(zip(records, timestamps)):
        parts.append(_encode_record(record, ts - base_timestamp, delta))
    body = b"".join(parts)
    codec = COMPRESSION_IDS[compression]
    if codec:
        body = compress(codec, body)
    attributes = codec | (0x10 if transactional else 0) | (0x20 if is_control else 0)
    after_crc = _HEADER_AFTER_CRC.pack(
        attributes, len(records) - 1, base_timestamp, max(timestamps), producer_id, producer_epoch,
        base_sequence, len(records),
    ) + body
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    return _HEAD.pack(base_offset, length, partition_leader_epoch, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc


def encode_control_batch(control_type: str, base_offset: int, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int, partition_leader_epoch: int = 0) -> bytes:
    """A transaction marker batch (``EndTransactionMarker``): control + transactional, one record."""
    if control_type not in _CONTROL_TYPES:
        raise ValueError(f"control_type must be COMMIT or ABORT, not {control_type!r}")
    key = struct.pack(">hh", 0, _CONTROL_TYPES[control_type])
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch([(key, value)], base_offset, timestamp, "none", producer_id, producer_epoch,
                        transactional=True, base_sequence=-1, partition_leader_epoch=partition_leader_epoch,
                        is_control=True)


class SegmentWriter:
    """Appends batches to one segment file and tracks the next offset (the log end offset)."""

    def __init__(self, path: str | os.PathLike, base_offset: int = 0, partition_leader_epoch: int = 0,
                 append: bool = False):
        """Start a new segment at ``path`` (an existing file is replaced), or with ``append=True`` continue an
        existing one after its last readable batch (``next_offset`` = that batch's last offset + 1)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.next_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        if append and self.path.exists():
            from offsets_audit.sources.segments import iter_batches

            for batch in iter_batches(self.path):
                self.next_offset = batch.last_offset + 1
        self._file = open(self.path, "ab" if append else "wb")
        self.bytes_written = self._file.tell()

    @classmethod
    def create(cls, log_dir: str | os.PathLike, partition: int, base_offset: int = 0,
               partition_leader_epoch: int = 0, topic: str = DEFAULT_TOPIC, append: bool = False) -> SegmentWriter:
        """A writer for ``<log_dir>/<topic>-<partition>/<base offset>.log``."""
        return cls(segment_path(log_dir, partition, base_offset, topic), base_offset, partition_leader_epoch, append)

    def append_batch(self, records: Sequence[tuple], timestamp: int | Sequence[int], compression: str = "none",
                     producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False,
                     base_sequence: int = 0) -> tuple[int, int]:
        """Append one data batch at the log end; returns its ``(base_offset, last_offset)``."""
        base_offset = self.next_offset
        self._write(encode_batch(records, base_offset, timestamp, compression, producer_id, producer_epoch,
                                 transactional, base_sequence, self.partition_leader_epoch))
        self.next_offset = base_offset + len(records)
        return base_offset, self.next_offset - 1

    def append_control(self, control_type: str, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       timestamp: int) -> int:
        """Append a COMMIT/ABORT marker batch; returns its offset."""
        offset = self.next_offset
        self._write(encode_control_batch(control_type, offset, producer_id, producer_epoch, coordinator_epoch,
                                         timestamp, self.partition_leader_epoch))
        self.next_offset = offset + 1
        return offset

    def append_raw(self, batches: Iterable[bytes]) -> None:
        """Append already-encoded batches verbatim (e.g. to build corrupted test segments)."""
        for data in batches:
            self._write(data)

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self.bytes_written += len(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _encode_record(record: tuple, timestamp_delta: int, offset_delta: int) -> bytes:
    """One ``DefaultRecord``: varint length, attributes 0, deltas, key, value, headers."""
    key, value = record[0], record[1]
    headers = record[2] if len(record) > 2 else ()
    out = bytearray(b"\x00")
    out += _zigzag(timestamp_delta)
    out += _zigzag(offset_delta)
    out += _nullable_bytes(key)
    out += _nullable_bytes(value)
    out += _zigzag(len(headers))
    for name, header_value in headers:
        encoded = name.encode("utf-8")
        out += _zigzag(len(encoded))
        out += encoded
        out += _nullable_bytes(header_value)
    return bytes(_zigzag(len(out)) + out)


def _nullable_bytes(data: bytes | None) -> bytes:
    """A record's key, value or header value: zigzag length then the bytes, or length -1 (``0x01``) for null."""
    return b"\x01" if data is None else _zigzag(len(data)) + data


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    if raw < 0x80:
        return bytes((raw,))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
