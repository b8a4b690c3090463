"""Turn a shard's appends into bytes: broker log segments and a Parquet dump with ``SOURCE_SCHEMA`` columns.

Both outputs hold exactly the same records (same offsets, batches, producer ids, control markers), so the
segment and Parquet read paths of the job must agree on them.
"""

from __future__ import annotations

import os
from pathlib import Path

from offsets_audit.codec import encode_consumer_protocol, encode_record
from offsets_audit.codec.record_types import RecordType
from offsets_audit.simulate.classic import ProtocolBytes
from offsets_audit.sources.segment_writer import DEFAULT_TOPIC, SegmentWriter, encode_batch, segment_path

PARQUET_ROW_GROUP = 200_000


def _embed(value):
    """Replace embedded consumer-protocol payloads by their bytes (GroupMetadataValue members)."""
    if value is None or "members" not in value:
        return value
    members = []
    for m in value["members"]:
        m = dict(m)
        for name in ("subscription", "assignment"):
            if isinstance(m.get(name), ProtocolBytes):
                pb = m[name]
                m[name] = encode_consumer_protocol(pb.kind, pb.version, pb.data)
        members.append(m)
    return {**value, "members": members}


_OFFSET_KEYS: dict = {}


def encode(record) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a logical record; offset-commit keys repeat, so their bytes are cached."""
    if record.record_type == RecordType.OFFSET_COMMIT and record.value is not None:
        k = record.key
        cache_key = (k["group"], k["topic"], k["partition"])
        key = _OFFSET_KEYS.get(cache_key)
        if key is None:
            if len(_OFFSET_KEYS) > 1_000_000:
                _OFFSET_KEYS.clear()
            key = _OFFSET_KEYS[cache_key] = encode_record(1, k, None, None)[0]
        return key, encode_record(1, k, record.value, record.value_version)[1]
    return encode_record(record.record_type, record.key, _embed(record.value), record.value_version)


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
        ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()), ("control_type", pa.string()), ("coordinator_epoch", pa.int32()),
        ("batch_base_offset", pa.int64()), ("batch_last_offset", pa.int64()), ("batch_magic", pa.int16()),
        ("compression", pa.string()), ("source_file", pa.string()), ("file_position", pa.int64()),
        ("read_error_code", pa.string()), ("read_error_message", pa.string()),
    ])


class ParquetSink:
    """Rows of one partition into ``<dir>/partition=N/part-00000.parquet``, flushed in row groups."""

    def __init__(self, root: Path, partition: int):
        import pyarrow.parquet as pq

        self.schema = _arrow_schema()
        path = root / f"partition={partition}" / "part-00000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        # as Spark writes a table partitioned by ``partition``: the column lives only in the directory name
        self.writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")
        self.columns: dict[str, list] = {name: [] for name in self.schema.names}
        self.rows = 0

    def add(self, **row) -> None:
        for name, column in self.columns.items():
            column.append(row.get(name))
        self.rows += 1
        if self.rows >= PARQUET_ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.writer.write_table(pa.table(self.columns, schema=self.schema))
            self.columns = {name: [] for name in self.schema.names}
            self.rows = 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


class PartitionWriter:
    """Writes one ``__consumer_offsets`` partition: rolls segments at ``segment_bytes``, numbers offsets,
    optionally drops superseded records (``keep``: offsets that survive compaction), and collects the faults."""

    def __init__(self, out: Path, partition: int, formats=("segments", "parquet"), compression: str = "none",
                 segment_bytes: int = 64 * 1024 * 1024, keep: set | None = None):
        self.out = out
        self.partition = partition
        self.compression = compression
        self.segment_bytes = segment_bytes
        self.keep = keep
        self.next_offset = 0
        self.log_dir = out / "segments"
        self.segments = None
        if "segments" in formats:
            self.segments = SegmentWriter.create(self.log_dir, partition, 0)
        self.parquet = ParquetSink(out / "parquet", partition) if "parquet" in formats else None
        self.faults: list = []
        self.records = 0
        self.batches = 0

    def _roll(self) -> None:
        if self.segments is not None and self.segments.bytes_written >= self.segment_bytes:
            self.segments.close()
            self.segments = SegmentWriter(segment_path(self.log_dir, self.partition, self.next_offset),
                                          self.next_offset)

    def _source(self):
        if self.segments is None:
            return None, None
        return os.path.relpath(self.segments.path, self.out), self.segments.bytes_written

    def write(self, append) -> None:
        self._roll()
        if append.control:
            self._write_control(append)
            return
        base = self.next_offset
        encoded = [encode(r) for r in append.records]
        self.next_offset += len(encoded)
        runs = [list(range(len(encoded)))]
        if self.keep is not None:
            runs = []
            run: list[int] = []
            for i in range(len(encoded)):
                if base + i in self.keep:
                    if run and run[-1] != i - 1:
                        runs.append(run)
                        run = []
                    run.append(i)
            if run:
                runs.append(run)
        for run in runs:
            if not run:
                continue
            first = base + run[0]
            last = base + run[-1]
            source_file, position = self._source()
            if self.segments is not None:
                batch = encode_batch([encoded[i] for i in run], first, append.time_ms, self.compression,
                                     append.producer_id, append.producer_epoch, append.transactional, 0,
                                     self.segments.partition_leader_epoch)
                self.segments.append_raw([batch])
                self.segments.next_offset = self.next_offset
            self.batches += 1
            for i in run:
                record = append.records[i]
                self.records += 1
                if record.fault is not None:
                    self.faults.append({"group": record.group_id, "partition": self.partition,
                                        "offset": base + i, "record_type": record.record_type, **record.fault})
                if self.parquet is not None:
                    key, value = encoded[i]
                    self.parquet.add(key=key, value=value, topic=DEFAULT_TOPIC, partition=self.partition,
                                     offset=base + i, timestamp=append.time_ms * 1000, timestampType=0,
                                     producer_id=append.producer_id, producer_epoch=append.producer_epoch,
                                     is_transactional=append.transactional, is_control=False,
                                     batch_base_offset=first, batch_last_offset=last, batch_magic=2,
                                     compression=self.compression, source_file=source_file, file_position=position)

    def _write_control(self, append) -> None:
        offset = self.next_offset
        self.next_offset += 1
        if self.keep is not None and offset not in self.keep:
            return
        source_file, position = self._source()
        if self.segments is not None:
            self.segments.next_offset = offset
            self.segments.append_control(append.control, append.producer_id, append.producer_epoch,
                                         append.coordinator_epoch, append.time_ms)
        self.batches += 1
        self.records += 1
        if self.parquet is not None:
            key = b"\x00\x00" + (b"\x00\x01" if append.control == "COMMIT" else b"\x00\x00")
            value = b"\x00\x00" + append.coordinator_epoch.to_bytes(4, "big", signed=True)
            self.parquet.add(key=key, value=value, topic=DEFAULT_TOPIC, partition=self.partition, offset=offset,
                             timestamp=append.time_ms * 1000, timestampType=0, producer_id=append.producer_id,
                             producer_epoch=append.producer_epoch, is_transactional=True, is_control=True,
                             control_type=append.control, coordinator_epoch=append.coordinator_epoch,
                             batch_base_offset=offset, batch_last_offset=offset, batch_magic=2,
                             compression="none", source_file=source_file, file_position=position)

    def close(self) -> None:
        if self.segments is not None:
            self.segments.close()
        if self.parquet is not None:
            self.parquet.close()


def surviving_offsets(appends) -> set:
    """Log compaction's view: the offsets of the last record per key (tombstones kept), plus control
    markers and transactional data (kept while their transaction markers are)."""
    last: dict = {}
    keep = set()
    offset = 0
    for append in appends:
        if append.control:
            keep.add(offset)
            offset += 1
            continue
        for record in append.records:
            if append.transactional:
                keep.add(offset)
            else:
                last[encode(record)[0]] = offset
            offset += 1
    keep.update(last.values())
    return keep
