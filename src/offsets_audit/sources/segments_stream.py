"""``spark.readStream.format("kafka-segments").load(path)``: broker log segments as a streaming source.

The stream offset is, per segment file, the byte position up to which its complete batches have been read:
``{"files": {"/logs/__consumer_offsets-7/00000000000000000000.log": 123456, ...}}``. A new micro-batch reads
``[previous position, new position)`` of every file that has grown and every new file, with the same decoder as
the batch source (``segments_spark.read_arrow``), so rows are identical to ``spark.read``'s.

What counts as read, mirroring how a broker writes a partition's log (only the newest segment of a partition is
*active*; rolled segments never change again):

* a rolled segment (not the last ``.log`` of its folder) is read to its end, a damaged tail included (it becomes
  a quarantine row exactly as in a batch read);
* the active segment is read up to the end of its last *complete* batch; a batch still being appended (its
  length runs past the end of the file) waits for a later micro-batch. A header that cannot be a batch at all
  (bad magic or length) is damage, not a write in progress, so the rest of the file is read and quarantined.

Extra options (besides the batch source's ``topic``, ``partition``, ``maxBytesPerPartition``, ``rowsPerBatch``):

* ``maxFilesPerTrigger``: at most this many segment files (with new bytes) per micro-batch;
* ``maxBytesPerTrigger``: about this many new bytes per micro-batch (whole batches; at least one batch).

Both are honoured under ``Trigger.AvailableNow`` too (the end offset is fixed when the query starts and reached
in several micro-batches).
"""

from __future__ import annotations

import os
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxFiles, SupportsTriggerAvailableNow,
)

from offsets_audit.sources.options import int_option as _int_option
from offsets_audit.sources.segments_spark import PackedRanges, SegmentRange, SegmentsReader, pack_ranges, read_arrow


def complete_end(path: str, start: int, active: bool) -> int:
    """Byte position after the last complete batch of ``path`` at or after ``start`` (see the module docstring)."""
    from offsets_audit.sources.segments import NOT_A_BATCH, batch_end, complete_batch_ends

    size = os.path.getsize(path)
    if not active:
        return max(size, start)
    with open(path, "rb") as handle:
        pos = max(complete_batch_ends(handle, start, size), default=start)  # the ends only grow
        if pos < size and batch_end(handle, pos, size) == NOT_A_BATCH:
            return size
    return pos


def batch_ends(path: str, start: int, end: int) -> Iterator[int]:
    """End positions of the batches in ``[start, end)`` (the last one is ``end`` even when unreadable)."""
    from offsets_audit.sources.segments import complete_batch_ends

    pos = start
    with open(path, "rb") as handle:
        for pos in complete_batch_ends(handle, start, end):
            yield pos
    if pos < end:
        yield end


#: Options only the streaming reader understands (lower-case).
STREAM_OPTIONS = ("maxfilespertrigger", "maxbytespertrigger")


class SegmentsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of new segment bytes; offsets are per-file byte positions of complete batches."""

    def __init__(self, options: dict):
        lowered = {str(k).lower(): v for k, v in options.items()}
        # the batch reader's option checks and defaults, for every option but the stream's own
        batch = SegmentsReader({k: v for k, v in lowered.items() if k not in STREAM_OPTIONS})
        self.path, self.topic, self.partition_override = batch.path, batch.topic, batch.partition_override
        self.max_bytes, self.rows_per_batch, self.names = batch.max_bytes, batch.rows_per_batch, batch.names
        self.min_partitions = batch.min_partitions
        self.max_files = _int_option(lowered, "maxfilespertrigger", None, minimum=1)
        self.max_bytes_per_trigger = _int_option(lowered, "maxbytespertrigger", None, minimum=1)
        self.target: dict | None = None

    # -- offsets -------------------------------------------------------------------------------

    def _latest(self, start: dict | None = None) -> dict:
        from offsets_audit.sources.segments import list_segments

        known = (start or {}).get("files", {})
        segments = list_segments(self.path, self.topic, names=self.names)
        last_of_folder = {}
        for path, _ in segments:
            last_of_folder[os.path.dirname(path)] = path
        files = {}
        for path, _ in segments:
            begin = int(known.get(path, 0))
            files[path] = complete_end(path, begin, active=last_of_folder[os.path.dirname(path)] == path)
        return {"files": files}

    def initialOffset(self) -> dict:
        return {"files": {}}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        done = dict((start or {}).get("files", {}))
        available = self._latest(start)["files"]
        if self.target is not None:
            available = {p: min(end, self.target["files"].get(p, 0)) for p, end in available.items()
                         if p in self.target["files"]}
        end = dict(done)
        files_left = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        bytes_left = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        for path in sorted(available):
            begin, stop = int(done.get(path, 0)), available[path]
            if stop <= begin:
                end.setdefault(path, begin)
                continue
            if files_left is not None:
                if files_left == 0:
                    break
                files_left -= 1
            if bytes_left is not None:
                if bytes_left <= 0:
                    break
                for position in batch_ends(path, begin, stop):
                    stop_here = position
                    bytes_left -= position - begin
                    begin = position
                    if bytes_left <= 0:
                        break
                stop = stop_here
            end[path] = stop
        return {"files": end}

    def partitions(self, start: dict, end: dict) -> list[SegmentRange] | list[PackedRanges]:
        """The new bytes of each file, a range each (split at batch boundaries past ``maxBytesPerPartition``); with
        ``minPartitions`` packed as the batch reader packs them (``segments_spark.pack_ranges``): a micro-batch
        that grew every partition's active segment by a little reads them in a few tasks, not one per file."""
        from offsets_audit.sources.segments import partition_of

        done = (start or {}).get("files", {})
        ranges = []
        for path, stop in sorted(end.get("files", {}).items()):
            begin = int(done.get(path, 0))
            if stop <= begin:
                continue
            partition = self.partition_override if self.partition_override is not None else partition_of(path)
            if partition is None:
                partition = 0  # as the batch source reads a file outside a <topic>-N folder
            range_start = begin
            for position in batch_ends(path, begin, stop):
                if position - range_start >= self.max_bytes and position < stop:
                    ranges.append(SegmentRange(path, partition, range_start, position))
                    range_start = position
            ranges.append(SegmentRange(path, partition, range_start, stop))
        if self.min_partitions:
            return pack_ranges(ranges, max_bytes=self.max_bytes, min_partitions=self.min_partitions)
        return ranges

    def read(self, partition: SegmentRange | PackedRanges) -> Iterator:
        for r in partition.ranges if isinstance(partition, PackedRanges) else [partition]:
            yield from read_arrow(r.path, r.partition, self.topic, r.start, r.end, self.rows_per_batch)

    def commit(self, end: dict) -> None:
        """Nothing to release: segment files are only read."""


def nothing_past(options: dict, committed) -> bool:
    """Whether a stream of ``options`` (``path`` included) resumed at ``committed``, an offset this reader made and
    a query's checkpoint kept, would plan no micro-batch: the segment files it lists now are those ``committed``
    names, each ending (to its last complete batch, as ``latestOffset`` reads it) where ``committed`` says. A file
    added, grown by a complete batch, rolled or removed answers False: the query then runs and decides, and so
    does a query that has read no file yet (a folder this process cannot see would list as empty too)."""
    files = committed.get("files") if isinstance(committed, dict) else None
    if not isinstance(files, dict) or not files:
        return False
    return SegmentsStreamReader(options)._latest(committed)["files"] == files
