"""Read broker log segment files (``<dir>/__consumer_offsets-N/<base offset>.log``) record by record.

Mirrors how Kafka's ``FileRecords.batches()`` walks a segment (the reader behind ``kafka-dump-log``):

* magic 2 record batches (``DefaultRecordBatch`` / ``DefaultRecord``): 61-byte header, CRC32C over everything
  from the attributes on, records with zig-zag varint fields and headers, control batches whose single record
  key is ``int16 version + int16 type`` (``ControlRecordType``) and, for COMMIT/ABORT, a value of
  ``int16 version + int32 coordinator epoch`` (``EndTransactionMarker``);
* legacy magic 0/1 message sets (``LegacyRecord`` / ``AbstractLegacyRecordBatch``): CRC32 from the magic byte
  on; a compressed wrapper message holds an inner message set whose offsets are relative to the wrapper's
  offset (magic 1) or absolute (magic 0). A legacy "batch" is one shallow entry.

Unlike Kafka, bad bytes never raise. Each unreadable stretch becomes one *quarantine entry* (a dict):

``file``, ``partition``, ``position`` (byte position of the first skipped byte), ``error_code``
(``truncated_batch``, ``crc_mismatch``, ``bad_length``, ``unknown_magic``, ``unknown_compression``,
``decompression_failed``, ``bad_record``, ``offset_overlap``), ``message`` (names file, position, offsets, the fix),
``base_offset`` / ``last_offset`` (as claimed by the batch header, None when not readable),
``skipped_bytes`` (how many bytes the entry covers), ``raw_bytes`` (the first ``RAW_BYTES_CAP`` of them) and
the offsets the stretch cost: ``lost_from`` / ``lost_to`` / ``records_lost``. Where the framing is lost the
header's claim cannot be trusted, so the lost offsets run from the offset after the last good batch (or the
segment's base offset, from its file name) to the offset before the next good batch (or the next segment's
base offset); only at the very end of a partition, where nothing follows, does the damaged header's own
claim (its last offset delta and record count, whichever is smaller) say how many records were lost, and an
unreadable claim there is 0 lost with a message saying the count is unknown (so too where the offsets around a
stretch are too far apart to believe, unless its header's claim is readable). Several stretches between the
same two good batches share one lost range: the first carries it, the others say they are counted there.
Batches out of offset order (two swapped neighbours) are read; counting goes on from the first offset no read
batch holds, and a damaged batch whose claimed offsets turn out to be a hole between read batches that no read
batch or other row covers counts them (its row is reported when the walk of the range ends).

Pass ``quarantine`` as a list (entries are appended) or as a callable (called with each entry). Reading then
resumes at the next readable batch: right after the bad batch when its length is trustworthy, else at the
next position holding a plausible batch header (sane length, known magic, matching CRC). Every byte of the
file is covered by exactly one read batch or one quarantine entry, so every batch is either read whole or
quarantined (no partial batches are ever yielded).
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator, cast

from crc32c import crc32c

from offsets_audit.errors import UserError
from offsets_audit.sources.compression import COMPRESSION_NAMES, DecompressionError, decompress

if TYPE_CHECKING:
    import numpy as np

try:  # the compiled walk of plain batches (setup.py); absent without a C compiler or from a --py-files zip
    import offsets_audit.sources._segments_kernel as _KERNEL  # type: ignore[import-not-found, unused-ignore]  # setup.py builds it
except ImportError:  # pragma: no cover - depends on the install
    _KERNEL = None

#: Bytes before a batch's magic byte: base offset, length, partition leader epoch (v2) / crc (legacy).
LOG_OVERHEAD = 12
_V2_HEADER = struct.Struct(">qiiBIhiqqqhii")
V2_HEADER_SIZE = _V2_HEADER.size  # 61
_LEGACY_HEADER = struct.Struct(">qiIBB")  # offset, size, crc, magic, attributes
_OFFSET_LENGTH = struct.Struct(">qi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CONTROL_VALUE = struct.Struct(">hi")

#: Smallest legal value of the length field per magic (bytes after the length field).
_MIN_LENGTH = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}
#: The range of a Java long: a record's offset and timestamp outside it cannot be a Kafka record's.
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: Refuse batch lengths above this when resyncing; Kafka's message.max.bytes is far below.
MAX_BATCH_LENGTH = 1 << 30

CONTROL_TYPE_NAMES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}

#: Keys of every record dict ``read_segment`` yields, in order.
RECORD_FIELDS = (
    "offset", "timestamp", "timestamp_type", "partition", "batch_base_offset", "batch_last_offset",
    "batch_magic", "compression", "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
    "is_transactional", "is_control", "control_type", "coordinator_epoch", "key", "value", "headers",
)

#: Where a batch header could start: non-negative base offset, length below 1 GiB, magic 0-2. A C-speed
#: prefilter for resyncing; ``_plausible_header`` then checks length and CRC.
_HEADER_CANDIDATE = re.compile(rb"(?s)(?=[\x00-\x7f].{7}[\x00-\x3f].{7}[\x00-\x02])")

_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")
_TOPIC_PARTITION = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
#: How Kafka names a segment (``LogFileUtils.logFile``): its base offset as 20 digits, then ``.log``.
KAFKA_SEGMENT_NAME = re.compile(r"^(?P<base_offset>\d{20})\.log$")
#: ``segmentNames`` option values: only Kafka's own names (default), or every ``*.log`` file.
SEGMENT_NAME_MODES = ("kafka", "any")
#: A segment-level quarantine entry keeps at most this many of the bytes it covers (``raw_bytes``).
RAW_BYTES_CAP = 64 * 1024
#: ``plan_ranges`` checks the CRC of at most this many of a file's last batches to find its last offset.
_VERIFY_LAST = 16
#: A lost offset range longer than this is not believed: a batch's base offset is not covered by its CRC, so a
#: damaged one can look readable; the stretch then says the count is unknown rather than claim billions lost.
_MAX_LOST_OFFSETS = 1 << 31
#: A partition's tail claim above this many records is not believed (a damaged header, not a real batch).
_MAX_CLAIMED_RECORDS = 1 << 20

Quarantine = list | Callable[[dict], None] | None


class BadBatch(Exception):
    """A batch that cannot be read; ``code`` is the quarantine error code."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(slots=True)
class RecordBatch:
    """One batch (magic 2) or shallow legacy entry (magic 0/1), fully decoded.

    ``records`` holds ``(offset, timestamp, key, value, headers)`` tuples; ``controls`` (control batches only)
    holds a ``(control_type, coordinator_epoch)`` pair per record.
    """

    position: int
    size: int
    base_offset: int
    last_offset: int
    magic: int
    compression: str
    timestamp_type: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    records: list
    controls: list | None = None


class BatchRun:
    """Consecutive magic-2 batches the compiled kernel read (``_segments_kernel.walk_v2``): uncompressed, no
    record headers, each one exactly what ``_decode_v2`` would make of it. Columns are numpy arrays: per batch
    ``positions``, ``base_offsets``, ``last_offsets``, ``producer_ids``, ``producer_epochs``, ``attributes``,
    ``counts``; per record ``offsets``, ``timestamps``, ``key_lengths``/``value_lengths`` (-1: null),
    ``control_types`` (an index into ``CONTROL_TYPE_NAMES``, ``CONTROL_UNKNOWN`` for UNKNOWN, ``NOT_CONTROL``
    outside control batches), ``coordinator_epochs`` (``NO_EPOCH``: none) and the keys' and values' bytes end to
    end (``key_data``, ``value_data``). Only ``iter_batch_runs`` yields these."""

    positions: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    producer_ids: np.ndarray
    producer_epochs: np.ndarray
    attributes: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray
    timestamps: np.ndarray
    key_lengths: np.ndarray
    value_lengths: np.ndarray
    control_types: np.ndarray
    coordinator_epochs: np.ndarray
    key_data: bytes
    value_data: bytes
    __slots__ = ("positions", "base_offsets", "last_offsets", "producer_ids", "producer_epochs", "attributes",
                 "counts", "offsets", "timestamps", "key_lengths", "value_lengths", "control_types",
                 "coordinator_epochs", "key_data", "value_data")
    NOT_CONTROL, CONTROL_UNKNOWN, NO_EPOCH = -2, -1, -(1 << 63)

    def __init__(self, columns: tuple):
        import numpy as np

        types = (np.int64, np.int64, np.int64, np.int64, np.int32, np.int32, np.int32, np.int64, np.int64, np.int32,
                 np.int32, np.int16, np.int64)
        for name, data, dtype in zip(self.__slots__, columns, types):
            setattr(self, name, np.frombuffer(data, dtype=dtype))
        self.key_data, self.value_data = columns[-2], columns[-1]

    @property
    def records(self) -> int:
        return len(self.offsets)


def partition_of(path: str | os.PathLike) -> int | None:
    """Partition number from a ``<topic>-N`` parent directory (e.g. ``__consumer_offsets-7``), else None."""
    match = _TOPIC_PARTITION.match(Path(path).parent.name)
    return int(match.group("partition")) if match else None


def segment_base_offset(path: str | os.PathLike) -> int | None:
    """The base offset a Kafka segment file name states (``00000000000000001234.log`` -> 1234), else None."""
    match = KAFKA_SEGMENT_NAME.match(Path(path).name)
    return int(match.group("base_offset")) if match else None


@dataclass(slots=True)
class SegmentFile:
    """One segment file to read: its partition, the base offset its name states and, when another segment of
    the same partition follows it, that segment's base offset (where this one's offsets must end)."""

    path: str
    partition: int | None
    base_offset: int | None
    next_base_offset: int | None = None


@dataclass(slots=True)
class SegmentScan:
    """What ``scan_segments`` found: the files to read, the ``*.log`` files it skipped (path, why) and notes for a
    person (e.g. a partition that had to be assumed)."""

    files: list
    skipped: list
    notes: list


def scan_segments(root: str | os.PathLike, topic: str | None = "__consumer_offsets", *, names: str = "kafka",
                  partition: int | None = None) -> SegmentScan:
    """The segment files under ``root`` (a file, a partition folder or a log dir), sorted, with what was skipped.

    ``names="kafka"`` (the default) reads only files named as Kafka names segments (20-digit base offset +
    ``.log``): a ``backup-of-segment.log`` or ``notes.log`` beside them would otherwise be read as more of the
    partition. A file given as ``root`` itself is read whatever its name. The partition is ``partition`` when
    given, else the ``<topic>-N`` parent folder's number, else 0 (and a note says so).
    """
    if names not in SEGMENT_NAME_MODES:
        raise UserError(f"segmentNames={names!r} is unknown", fix="use segmentNames kafka (the default) or any")
    root_path = Path(root)
    if not root_path.exists():
        raise UserError(f"log segment path {str(root_path)!r} does not exist",
                        fix="pass a broker log dir, a __consumer_offsets-N folder or a .log file")
    skipped: list[tuple[str, str]] = []
    if root_path.is_file():
        found = [root_path]
    else:
        found = _log_files(root_path)
        if topic is not None:
            of_topic = [p for p in found if _is_topic_folder(p.parent.name, topic)]
            if of_topic:
                found = of_topic
        if names == "kafka":
            for p in found:
                if not KAFKA_SEGMENT_NAME.match(p.name):
                    skipped.append((str(p), "not a Kafka segment name (20-digit base offset + .log)"))
            found = [p for p in found if KAFKA_SEGMENT_NAME.match(p.name)]
    found.sort(key=lambda p: (str(p.parent), p.name))
    notes: list[str] = []
    files = []
    unplaced = []
    for p in found:
        number = partition if partition is not None else partition_of(p)
        if number is None:
            number = 0
            unplaced.append(str(p))
        files.append(SegmentFile(str(p), number, segment_base_offset(p)))
    if unplaced:
        shown = unplaced[0] if len(unplaced) == 1 else f"{len(unplaced)} files (e.g. {unplaced[0]})"
        notes.append(f"{shown} not in a <topic>-N folder: read as partition 0; "
                     "set source.options.partition to name its partition")
    by_partition: dict = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    for group in by_partition.values():
        named = sorted((f for f in group if f.base_offset is not None), key=lambda f: f.base_offset)
        for this, following in zip(named, named[1:]):
            if following.base_offset > this.base_offset:
                this.next_base_offset = following.base_offset
    return SegmentScan(files, skipped, notes)


def _log_files(root: Path) -> list[Path]:
    """Every ``*.log`` file under ``root``, following symbolic links to folders (a log dir whose partition folders
    link to other disks is read whole, not silently in part); a folder reached twice through links is walked once."""
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for folder, dirs, names in os.walk(root, followlinks=True):
        info = os.stat(folder)
        if (info.st_dev, info.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirs.sort()
        found += [Path(folder) / n for n in names if n.endswith(".log") and os.path.isfile(os.path.join(folder, n))]
    return found


def list_segments(root: str | os.PathLike, topic: str | None = "__consumer_offsets", *,
                  names: str = "kafka") -> list[tuple[str, int | None]]:
    """``(path, partition)`` of every segment ``scan_segments`` reads under ``root``, sorted.

    Index, snapshot and checkpoint files are ignored, and so (by default) are ``*.log`` files not named as Kafka
    names segments. When ``root`` is a whole broker log dir holding ``<topic>-N`` folders, only those are listed
    (other topics' segments are skipped); a folder without any is read entirely. A file outside a ``<topic>-N``
    folder has partition None here (the Spark source reads it as partition 0 unless told otherwise).
    """
    scan = scan_segments(root, topic, names=names)
    return [(f.path, partition_of(f.path)) for f in scan.files]


def _is_topic_folder(name: str, topic: str) -> bool:
    match = _TOPIC_PARTITION.match(name)
    return match is not None and match.group("topic") == topic


def check_overlaps(files: list, ends: dict) -> None:
    """Raise a ``UserError`` naming both files when two segments of one partition hold the same offsets.

    ``ends`` maps a path to the last offset its final batch holds (checked by CRC, None when unknown). Two copies
    of one partition (two brokers' replicas under one root, a restored backup beside the original) would
    otherwise be read twice and every record counted double.
    """
    by_partition: dict = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    for partition, group in by_partition.items():
        spans = []
        for f in group:
            first = f.base_offset
            if first is None or os.path.getsize(f.path) == 0:
                continue
            last = ends.get(f.path)
            # a non-empty segment holds at least the offset its name states, whatever its end
            spans.append((first, last if last is not None and last >= first else first, f.path))
        spans.sort()
        for (first_a, last_a, path_a), (first_b, last_b, path_b) in zip(spans, spans[1:]):
            if first_b <= last_a and (first_a == first_b or _holds_copy_of_last_batch(path_b, path_a)):
                raise UserError(
                    f"partition {partition}: offsets {first_b}-{min(last_a, last_b)} are in both {path_a} and "
                    f"{path_b}, so they would be read twice",
                    fix="point the input at one copy of each partition (one broker's log dir), or remove the "
                        "duplicate file")


def _holds_copy_of_last_batch(path: str, other: str) -> bool:
    """Whether ``path`` holds a byte-identical copy of the last readable batch of ``other``.

    Replicas and copies hold the very same batch bytes (Kafka replicates batches as they are), so this tells a
    second copy of a partition from a segment whose last batch merely claims offsets past its successor's start
    because its base offset was damaged (no CRC covers it): that is damage, quarantined when read.
    """
    wanted = None
    for position, size, _ in _headers_of(other):
        wanted = (position, size)
    if wanted is None:
        return False
    with open(other, "rb") as handle:
        handle.seek(wanted[0])
        data = handle.read(wanted[1])
    if _try_batch(data, 0, len(data)) is None:
        return False
    (base_offset,) = _INT64.unpack_from(data)
    with open(path, "rb") as handle:
        for position, size, base in _headers_of(path):
            if base == base_offset and size == len(data):
                handle.seek(position)
                if handle.read(size) == data:
                    return True
            if base > base_offset:
                break
    return False


def _headers_of(path: str) -> Iterator[tuple[int, int, int]]:
    """``(position, size, base offset)`` of each batch header while the length chain holds."""
    size = os.path.getsize(path)
    pos = 0
    with open(path, "rb") as handle:
        while pos + LOG_OVERHEAD + 5 <= size:
            handle.seek(pos)
            head = handle.read(LOG_OVERHEAD + 5)
            base, length = _OFFSET_LENGTH.unpack_from(head)
            magic = head[16]
            if magic not in _MIN_LENGTH or length < _MIN_LENGTH[magic] or pos + LOG_OVERHEAD + length > size:
                return
            yield pos, LOG_OVERHEAD + length, base
            pos += LOG_OVERHEAD + length


def read_segment(path: str | os.PathLike, partition: int | None = None, quarantine: Quarantine = None,
                 start: int = 0, end: int | None = None, *, first_offset: int | None = None,
                 next_base_offset: int | None = None, previous_batch: int | None = None) -> Iterator[dict]:
    """Yield one dict per record (control records included) of a segment file, in log order.

    Keys are ``RECORD_FIELDS``: the golden ``*.expected.jsonl`` fields with ``key``/``value`` as bytes (value None
    for a tombstone) plus ``headers`` (a list of ``(str, bytes | None)``). ``partition`` defaults to the one named
    by the parent directory. ``start``/``end`` restrict reading to a byte range that begins at a batch boundary
    (see ``batch_boundaries``). Bad bytes go to ``quarantine`` (see module doc), never raise; the keyword-only
    arguments say where lost offsets end (see ``iter_batches``).
    """
    if partition is None:
        partition = partition_of(path)
    for batch in iter_batches(path, quarantine, start, end, partition=partition, first_offset=first_offset,
                              next_base_offset=next_base_offset, previous_batch=previous_batch):
        base = {
            "offset": None, "timestamp": None, "timestamp_type": batch.timestamp_type, "partition": partition,
            "batch_base_offset": batch.base_offset, "batch_last_offset": batch.last_offset,
            "batch_magic": batch.magic, "compression": batch.compression, "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
            "partition_leader_epoch": batch.partition_leader_epoch,
            "is_transactional": batch.is_transactional, "is_control": batch.is_control,
            "control_type": None, "coordinator_epoch": None, "key": None, "value": None, "headers": None,
        }
        copy = base.copy
        if batch.controls is None:
            for offset, timestamp, key, value, headers in batch.records:
                row = copy()
                row["offset"] = offset
                row["timestamp"] = timestamp
                row["key"] = key
                row["value"] = value
                row["headers"] = headers
                yield row
        else:
            for (offset, timestamp, key, value, headers), (control_type, epoch) in zip(batch.records, batch.controls):
                row = copy()
                row["offset"] = offset
                row["timestamp"] = timestamp
                row["key"] = key
                row["value"] = value
                row["headers"] = headers
                row["control_type"] = control_type
                row["coordinator_epoch"] = epoch
                yield row


def iter_batches(path: str | os.PathLike, quarantine: Quarantine = None, start: int = 0,
                 end: int | None = None, partition: int | None = None, *, first_offset: int | None = None,
                 next_base_offset: int | None = None, previous_batch: int | None = None) -> Iterator[RecordBatch]:
    """Yield every readable batch of ``path`` within ``[start, end)``; unreadable bytes go to ``quarantine``.

    Lost offsets (see the module doc) are counted from ``first_offset`` (default: the base offset the file name
    states, when ``start`` is 0) to the next good batch, looked for past ``end`` in the same file too, else to
    ``next_base_offset`` (the next segment of the partition). A range that starts mid-file passes
    ``previous_batch``, the position of the batch that ends at ``start``: when that batch is readable its last
    offset starts the count; when it is not, the range before this one already counted the offsets up to this
    range's first good batch, so this range's leading stretches count none.
    """
    return cast(Iterator[RecordBatch], iter_batch_runs(path, quarantine, start, end, partition, 0,
                                                       first_offset=first_offset, next_base_offset=next_base_offset,
                                                       previous_batch=previous_batch))


def iter_batch_runs(path: str | os.PathLike, quarantine: Quarantine = None, start: int = 0,
                    end: int | None = None, partition: int | None = None, run_records: int = 0, *,
                    first_offset: int | None = None, next_base_offset: int | None = None,
                    previous_batch: int | None = None) -> Iterator[RecordBatch | BatchRun]:
    """``iter_batches``, with the plain batches as ``BatchRun`` s of about ``run_records`` records read by the
    compiled kernel (when it is built and ``run_records`` > 0); every other batch, and every unreadable
    stretch, as ``iter_batches`` has them."""
    path = str(path)
    report = _reporter(quarantine)
    if not os.path.isfile(path):
        raise UserError(f"log segment {path!r} does not exist or is not a file",
                        fix="pass an existing .log file (see list_segments for a directory)")
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if end is None or end > size:
            end = size
        if start >= end:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            counted_before = False
            if start == 0 and first_offset is None:
                first_offset = segment_base_offset(path)
            elif start > 0 and first_offset is None and previous_batch is not None and previous_batch < start:
                before = _try_batch(buf, previous_batch, start)
                if before is None:
                    counted_before = True
                else:
                    first_offset = before.last_offset + 1
            yield from _walk(buf, path, partition, start, end, report, first_offset, next_base_offset, counted_before,
                             run_records if _KERNEL is not None else 0)


def batch_boundaries(path: str | os.PathLike, max_bytes: int) -> list[tuple[int, int]]:
    """Split a segment into ``[start, end)`` byte ranges of about ``max_bytes`` that start at batch boundaries."""
    return [(start, end) for start, end, _ in plan_ranges(path, max_bytes)[0]]


def plan_ranges(path: str | os.PathLike, max_bytes: int) -> tuple[list[tuple[int, int, int | None]], int | None]:
    """``([(start, end, previous_batch), ...], last_offset)``: byte ranges of about ``max_bytes`` that start at
    batch boundaries, each with the position of the batch ending at its start, and the file's last known offset.

    Walks batch headers only (12 bytes each). Where a header is not plausible (corruption, truncated tail) the
    walk stops and the rest of the file becomes the last range; the reader resyncs inside it. ``last_offset`` is
    the last offset of the file's final batch when the walk reached the end and that batch's CRC holds, else
    None (the overlap check then relies on the file names alone).
    """
    size = os.path.getsize(path)
    ranges: list[tuple[int, int, int | None]] = []
    if size == 0:
        return ranges, None
    with open(path, "rb") as handle:
        cuts, recent = _header_walk(handle, size, max_bytes)
        last_offset = None
        for position, length in reversed(recent):  # the last walked batch whose CRC holds
            handle.seek(position)
            batch = _try_batch(handle.read(length), 0, length)
            if batch is not None:
                last_offset = batch.last_offset
                break
    range_start, range_previous = 0, None
    for cut, previous in cuts:
        ranges.append((range_start, cut, range_previous))
        range_start, range_previous = cut, previous
    ranges.append((range_start, size, range_previous))
    return ranges, last_offset


def _header_walk(handle: BinaryIO, size: int, max_bytes: int,
                 kernel: bool = True) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``plan_ranges``' walk of the batch headers of an open segment of ``size`` bytes: ``(cuts, recent)``, the
    positions where a range of at least ``max_bytes`` ends (before ``size``), each with the position of the batch
    ending there, and the last ``_VERIFY_LAST`` batches walked as (position, size).

    The compiled kernel walks the headers when it is built (``kernel``), a chunk of ``_KERNEL_CHUNK`` bytes at a
    time (no file is held in memory), and numpy finds the cuts among the batch ends: a log of millions of records
    has millions of batches, whose headers cost the driver seconds in Python before any Spark work. The
    Python walk (``complete_batch_ends``) is the reference it is tested against."""
    walk = getattr(_KERNEL, "batch_ends", None) if kernel else None
    if walk is None:
        cuts: list[tuple[int, int]] = []
        recent: list[tuple[int, int]] = []
        range_start = pos = 0
        for end in complete_batch_ends(handle, 0, size):
            recent.append((pos, end - pos))
            if len(recent) > _VERIFY_LAST:
                del recent[0]
            previous, pos = pos, end
            if pos - range_start >= max_bytes and pos < size:
                cuts.append((pos, previous))
                range_start = pos
        return cuts, recent
    import numpy as np

    ends = _kernel_batch_ends(walk, handle, size)
    starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
    cuts = []
    range_start = 0
    while True:  # the first batch end at least max_bytes past the range's start, before the file's end
        i = int(np.searchsorted(ends, range_start + max_bytes))
        if i >= len(ends) or ends[i] >= size:
            break
        cuts.append((int(ends[i]), int(starts[i])))
        range_start = int(ends[i])
    tail = slice(max(0, len(ends) - _VERIFY_LAST), len(ends))
    return cuts, [(int(a), int(b - a)) for a, b in zip(starts[tail], ends[tail])]


#: Bytes of a segment the kernel's header walk reads at once (``_header_walk``); a longer batch grows it.
_KERNEL_CHUNK = 1 << 20


def _kernel_batch_ends(walk, handle: BinaryIO, size: int):
    """The end positions of the consecutive batches from the start of the segment (``complete_batch_ends``' walk),
    by the kernel's ``batch_ends`` over chunks read one after another, as an int64 numpy array."""
    import numpy as np

    parts = []
    want = _KERNEL_CHUNK
    pos = 0
    while size - pos >= _HEADER_READ:
        handle.seek(pos)
        chunk = handle.read(min(want, size - pos))
        n = len(chunk)
        if n < _HEADER_READ:
            break
        packed, stop, invalid = walk(chunk, 0, n)
        if packed:
            parts.append(np.frombuffer(packed, dtype=np.int64) + pos)
        if invalid or pos + n >= size:  # a header that is no batch's, or the file's end (a cut batch: its tail)
            break
        if stop == 0:  # a batch longer than the chunk: read it whole, unless the file ends before it does
            batch_end = _header_end(chunk, 0, pos, size)
            if batch_end <= pos:
                break
            want = batch_end - pos
            continue
        want = _KERNEL_CHUNK
        pos += stop
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _try_batch(buf, pos: int, end: int) -> RecordBatch | None:
    """The batch at ``buf[pos:end]`` if it is exactly one readable batch, else None."""
    if end - pos < LOG_OVERHEAD + 5:
        return None
    _, length = _OFFSET_LENGTH.unpack_from(buf, pos)
    magic = buf[pos + 16]
    if magic not in _MIN_LENGTH or LOG_OVERHEAD + length != end - pos:
        return None
    try:
        data = buf[pos:end]
        return _decode_v2(data, pos) if magic == 2 else _decode_legacy(data, pos, magic)
    except BadBatch:
        return None


def _reporter(quarantine: Quarantine) -> Callable[[dict], None]:
    if quarantine is None:
        return lambda entry: None
    if callable(quarantine):
        return quarantine
    return quarantine.append


def _walk(buf, path: str, partition, start: int, end: int, report, first_offset: int | None = None,
          next_base_offset: int | None = None, counted_before: bool = False,
          run_records: int = 0) -> Iterator[RecordBatch | BatchRun]:
    pos = start
    floor = segment_base_offset(path)  # a segment holds no offset below the base offset its name states
    expected = first_offset  # the first offset no read batch or quarantine entry has accounted for yet
    stretches: list[dict] = []
    spans: list[tuple[int, int]] = []  # offsets of the batches read, to catch a damaged base offset
    # (stretch, entry) of the rows that counted no offsets though their header claims some: reported when the walk
    # ends, once it is known whether the claimed offsets are a hole no read batch filled (see _fill_holes)
    unsettled: list[tuple[dict, dict]] = []
    counted: list[tuple[int, int]] = []  # the offsets quarantine rows already counted lost
    try:
        yield from _walk_batches(buf, path, partition, pos, end, report, expected, next_base_offset, counted_before,
                                 floor, stretches, spans, unsettled, counted, run_records)
        _fill_holes(buf, path, partition, unsettled, spans, counted, floor, next_base_offset)
    finally:
        for _, entry in unsettled:
            report(entry)


def _walk_batches(buf, path: str, partition, pos: int, end: int, report, expected: int | None,
                  next_base_offset: int | None, counted_before: bool, floor: int | None, stretches: list,
                  spans: list, unsettled: list, counted: list, run_records: int = 0) -> Iterator[RecordBatch | BatchRun]:
    def settle(following, where):
        for stretch, entry in _settle(buf, path, partition, stretches, expected, following, where, counted_before):
            base, last = stretch["claimed"][:2]
            if entry["records_lost"] == 0 and base is not None and last is not None:
                unsettled.append((stretch, entry))
            else:
                if entry["records_lost"]:
                    counted.append((entry["lost_from"], entry["lost_to"]))
                report(entry)

    while pos < end:
        if run_records and not stretches:
            # The kernel reads the plain batches from here on; it stops before any batch this loop must judge.
            found = _KERNEL.walk_v2(buf, pos, end, expected, floor, next_base_offset, run_records)
            if found is not None:
                pos, run = found[0], BatchRun(found[2:])
                spans.extend(zip(run.base_offsets.tolist(), run.last_offsets.tolist()))
                expected = int(run.last_offsets[-1]) + 1
                counted_before = False
                yield run
                continue
        remaining = end - pos
        claimed: tuple[int | None, ...] = (None, None, None, None)  # base offset, last offset, record count, magic as the header says
        size = None
        try:
            if remaining < LOG_OVERHEAD + 5:
                raise BadBatch("truncated_batch", f"only {remaining} bytes left, less than a batch header")
            base_offset, length = _OFFSET_LENGTH.unpack_from(buf, pos)
            magic = buf[pos + 16]
            claimed = (base_offset, None, None, magic)
            if magic == 2 and remaining >= 27:
                claimed = (base_offset, base_offset + _INT32.unpack_from(buf, pos + 23)[0],
                           _INT32.unpack_from(buf, pos + 57)[0] if remaining >= V2_HEADER_SIZE else None, magic)
            if magic not in _MIN_LENGTH:
                raise BadBatch("unknown_magic", f"magic byte {magic} is not 0, 1 or 2")
            if length < _MIN_LENGTH[magic] or length > MAX_BATCH_LENGTH:
                raise BadBatch("bad_length", f"batch length {length} is impossible for magic {magic}")
            size = LOG_OVERHEAD + length
            if size > remaining:
                raise BadBatch("truncated_batch",
                               f"batch of {size} bytes but only {remaining} bytes left (segment cut mid-write?)")
            data = buf[pos:pos + size]
            if magic == 2:
                batch = _decode_v2(data, pos)
            else:
                batch = _decode_legacy(data, pos, magic)
            if ((floor is not None and batch.base_offset < floor)
                    or (next_base_offset is not None and batch.last_offset >= next_base_offset)):
                claimed = (batch.base_offset, batch.last_offset, len(batch.records), magic)
                raise BadBatch("offset_overlap",
                               f"its offsets {batch.base_offset}-{batch.last_offset} lie outside this segment's "
                               f"offsets (from {floor} to the next segment's {next_base_offset}); no CRC covers a "
                               "batch's base offset, so a damaged one still reads")
            if expected is not None and batch.base_offset < expected and _overlaps(spans, batch):
                claimed = (batch.base_offset, batch.last_offset, len(batch.records), magic)
                raise BadBatch("offset_overlap",
                               f"its offsets {batch.base_offset}-{batch.last_offset} repeat offsets already read "
                               "from this file (no CRC covers a batch's base offset, so a damaged one still reads)")
        except BadBatch as bad:
            skip = _skip_length(buf, pos, end, bad.code, size)
            code = bad.code
            if code == "truncated_batch" and pos + skip < end:
                code = "bad_length"
            stretches.append({"position": pos, "code": code, "detail": bad.detail, "claimed": claimed,
                              "skipped": skip, "to_end": pos + skip >= end})
            pos += skip
            continue
        if stretches:
            settle(batch.base_offset, "the next readable batch")
            stretches.clear()
        counted_before = False
        spans.append((batch.base_offset, batch.last_offset))
        if expected is None or batch.base_offset >= expected:
            expected = batch.last_offset + 1
        else:
            expected = _first_unread_after(spans, batch.last_offset)
        yield batch
        pos += size
    if stretches:
        following, where = None, None
        if end < len(buf):  # a range of a split file: the next good batch may lie in a later range
            for later in _walk(buf, path, partition, end, len(buf), lambda entry: None):
                assert isinstance(later, RecordBatch)  # no runs asked for
                following, where = later.base_offset, "the next readable batch"
                break
        if following is None and next_base_offset is not None:
            following, where = next_base_offset, "the next segment's base offset"
        settle(following, where)


def _first_unread_after(spans: list, offset: int) -> int:
    """The first offset above ``offset`` no read batch holds. A batch read below the offsets already counted ran
    backwards: of two swapped batches the second (whose successor was read before it: count on after that one), or
    the batch after one whose damaged base offset (no CRC covers it) jumped far ahead (count on from this one)."""
    following = offset + 1
    moved = True
    while moved:
        moved = False
        for first, last in reversed(spans):
            if first <= following <= last:
                following, moved = last + 1, True
    return following


def _fill_holes(buf, path, partition, unsettled: list, spans: list, counted: list, floor: int | None,
                next_base_offset: int | None) -> None:
    """Count the offsets a damaged batch claims when no read batch holds them though read batches lie on both
    sides: its batch was read out of offset order (two batches swapped, then one damaged), so the stretch between
    its neighbours in the file cost nothing while its own offsets are a hole in what was read.

    The claim (the header's base offset and last offset delta, its record count at most that span) is believed
    only when every offset of it is such a hole: inside the segment's offsets, after one read batch and before
    another, held by no read batch and counted by no other quarantine row.
    """
    if not unsettled or len(spans) < 2:
        return
    lowest, highest = min(first for first, _ in spans), max(last for _, last in spans)
    for index, (stretch, _) in enumerate(unsettled):
        base, last, count, _ = stretch["claimed"]
        if (count is None or base is None or last is None or not 0 < count <= last - base + 1
                or last - base + 1 > _MAX_CLAIMED_RECORDS or not lowest < base <= last < highest
                or (floor is not None and base < floor)
                or (next_base_offset is not None and last >= next_base_offset)
                or any(first <= last and base <= end for first, end in spans + counted)):
            continue
        note = (f"no batch read from this file holds its claimed offsets {base}-{last}, though batches before and "
                "after them were read (its batch was out of offset order, e.g. swapped with a neighbour), so they "
                "are lost")
        unsettled[index] = (stretch, _quarantine_entry(buf, path, partition, stretch, base, last, last - base + 1,
                                                       note, 0))
        counted.append((base, last))


def _overlaps(spans: list, batch: RecordBatch) -> bool:
    """Whether ``batch`` repeats offsets of a batch read before it (checked only when it runs backwards, which a
    healthy log never does; two swapped batches run backwards without repeating anything and are read)."""
    return any(base <= batch.last_offset and batch.base_offset <= last for base, last in spans)


def _settle(buf, path, partition, stretches: list, expected: int | None, following: int | None,
            where: str | None, counted_before: bool) -> list[tuple[dict, dict]]:
    """``(stretch, quarantine entry)`` of the stretches found between two good batches, with the offsets they cost
    (see the module doc)."""
    first = stretches[0]
    if counted_before:
        lost_from = lost_to = None
        note = "its offsets are counted by the quarantine row that precedes it in this file"
    elif following is not None:
        lost_from = expected
        if lost_from is None:
            claim = first["claimed"][0]
            lost_from = claim if claim is not None and 0 <= claim <= following else following
        lost_to = following - 1
        note = f"offsets up to {where} ({following}) are lost"
    else:
        count = _claimed_records(first["claimed"], expected)
        if count is None:
            lost_from = lost_to = None
            note = ("nothing after it says which offsets it held, so the number of records lost is unknown "
                    "(counted as 0)")
        else:
            lost_from = expected if expected is not None else first["claimed"][0]
            lost_to = lost_from + count - 1
            note = "nothing follows it, so the damaged header's own claim gives the offsets lost"
    records_lost = 0 if lost_from is None or lost_to is None else max(0, lost_to - lost_from + 1)
    if records_lost > _MAX_LOST_OFFSETS and lost_to is not None:
        too_far = (f"the offsets around it ({lost_from} and {where} {lost_to + 1}) are too far apart to believe (a "
                   "damaged base offset, which no CRC covers, or a file named as a segment that holds none)")
        count = _claimed_records(first["claimed"], expected)
        if count is None:
            records_lost = 0
            note = f"{too_far}, so the number of records lost is unknown (counted as 0)"
        else:
            lost_from = expected if expected is not None else first["claimed"][0]
            lost_to = lost_from + count - 1
            records_lost = count
            note = f"{too_far}, so the damaged header's own claim gives the offsets lost"
    if records_lost == 0:
        lost_from = lost_to = None
    entries = []
    for index, stretch in enumerate(stretches):
        if index == 0:
            entries.append((stretch, _quarantine_entry(buf, path, partition, stretch, lost_from, lost_to,
                                                       records_lost, note, len(stretches) - 1)))
        else:
            entries.append((stretch, _quarantine_entry(
                buf, path, partition, stretch, None, None, 0,
                f"its offsets are counted by the quarantine row at byte {first['position']}", 0)))
    return entries


def _claimed_records(claimed: tuple, expected: int | None) -> int | None:
    """How many records a damaged header at a partition's end says its batch held, when it can be believed."""
    base, last, count, magic = claimed
    if base is not None and last is not None:
        delta_count = last - base + 1
        if base != expected and delta_count != count:
            return None  # neither the base offset nor the two counts agree: bytes that are not a batch header
        counts = [n for n in (delta_count, count) if n is not None and 0 < n <= _MAX_CLAIMED_RECORDS]
        return min(counts) if counts else None
    if magic in (0, 1) and base is not None and expected is not None:  # a legacy entry's offset is its last
        n = base - expected + 1
        return n if 0 < n <= _MAX_CLAIMED_RECORDS else None
    return None


def _skip_length(buf, pos: int, end: int, code: str, size: int | None) -> int:
    """How many bytes a bad batch at ``pos`` covers: its own size when trustworthy, else up to the next plausible
    batch header (or the end)."""
    if size is not None and code in ("decompression_failed", "bad_record", "unknown_compression", "offset_overlap"):
        return size  # the CRC matched, so the length is right
    if size is not None and code == "crc_mismatch":
        after = pos + size
        if after == end or _plausible_header(buf, after, end):
            return size
    for match in _HEADER_CANDIDATE.finditer(buf, pos + 1, end):
        candidate = match.start()
        if _plausible_header(buf, candidate, end):
            return candidate - pos
    return end - pos


def _plausible_header(buf, pos: int, end: int) -> bool:
    if pos + LOG_OVERHEAD + 5 > end:
        return False
    magic = buf[pos + 16]
    if magic > 2:
        return False
    base_offset, length = _OFFSET_LENGTH.unpack_from(buf, pos)
    if base_offset < 0 or length < _MIN_LENGTH[magic] or pos + LOG_OVERHEAD + length > end:
        return False
    batch_end = pos + LOG_OVERHEAD + length
    if magic == 2:
        return _INT32.unpack_from(buf, pos + 17)[0] & 0xFFFFFFFF == crc32c(memoryview(buf)[pos + 21:batch_end])
    return struct.unpack_from(">I", buf, pos + 12)[0] == zlib.crc32(memoryview(buf)[pos + 16:batch_end])


_FIXES = {
    "truncated_batch": "if the broker is still writing this segment, copy it again once it is rolled; otherwise "
                       "restore the segment from another replica",
    "crc_mismatch": "restore the segment from another replica (kafka-dump-log --verify-index-only finds bad copies)",
}
_DEFAULT_FIX = "restore the segment from another replica, or read it with segmentNames any only if it is a segment"


def _quarantine_entry(buf, path, partition, stretch, lost_from, lost_to, records_lost, note, shared) -> dict:
    pos, code, skipped = stretch["position"], stretch["code"], stretch["skipped"]
    base_offset, last_offset, count, _ = stretch["claimed"]
    claims = ""
    if base_offset is not None and last_offset is not None:
        claims = f" (its header claims offsets {base_offset}-{last_offset}" + (
            f", {count} records)" if count is not None else ")")
    elif base_offset is not None or last_offset is not None:
        claims = f" (its header claims offset {base_offset if base_offset is not None else last_offset})"
    where = "to the end of the file" if stretch["to_end"] else "to the next readable batch"
    if records_lost:
        lost = f"{records_lost:,} records lost, offsets {lost_from}-{lost_to}" + (
            f" (with the next {shared} quarantine row{'s' if shared > 1 else ''})" if shared else "")
    else:
        lost = "no records lost here" if "counted by" in note else "0 records counted lost"
    raw_bytes = bytes(buf[pos:pos + min(skipped, RAW_BYTES_CAP)])
    kept = (f"raw_bytes holds all {skipped} bytes" if skipped <= RAW_BYTES_CAP
            else f"raw_bytes holds the first {RAW_BYTES_CAP:,} of {skipped:,} bytes (cap {RAW_BYTES_CAP:,})")
    message = (f"{code} in {path} (partition {partition}) at byte {pos}{claims}: {stretch['detail']}; "
               f"skipped {skipped} bytes {where}; {lost}: {note}; {kept}; "
               f"fix: {_FIXES.get(code, _DEFAULT_FIX)}")
    return {
        "file": path, "partition": partition, "position": pos, "error_code": code, "message": message,
        "base_offset": base_offset, "last_offset": last_offset, "skipped_bytes": skipped,
        "lost_from": lost_from, "lost_to": lost_to, "records_lost": records_lost, "raw_bytes": raw_bytes,
    }


# ---------------------------------------------------------------------------------------------- magic 2

def _decode_v2(data: bytes, position: int) -> RecordBatch:
    (base_offset, length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(data)
    computed = crc32c(memoryview(data)[21:])
    if computed != crc:
        raise BadBatch("crc_mismatch", f"stored CRC32C {crc:#010x}, computed {computed:#010x}")
    codec = attributes & 0x07
    if codec >= len(COMPRESSION_NAMES):
        raise BadBatch("unknown_compression", f"compression codec id {codec} is not known")
    log_append_time = max_timestamp if attributes & 0x08 else None
    is_control = bool(attributes & 0x20)
    if count < 0:
        raise BadBatch("bad_record", f"negative record count {count}")
    if base_offset + last_offset_delta > _INT64_MAX:
        raise BadBatch("bad_record", f"last offset {base_offset} + {last_offset_delta} is beyond a long")
    if codec == 0:
        payload, pos = data, V2_HEADER_SIZE
    else:
        try:
            payload = decompress(codec, data[V2_HEADER_SIZE:])
        except DecompressionError as exc:
            raise BadBatch("decompression_failed", str(exc)) from None
        pos = 0
    try:
        records = _decode_v2_records(payload, pos, count, base_offset, base_timestamp, log_append_time)
    except (IndexError, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise BadBatch("bad_record", f"record data does not parse: {exc}") from None
    controls = [_control_of(key, value) for _, _, key, value, _ in records] if is_control else None
    return RecordBatch(
        position, LOG_OVERHEAD + length, base_offset, base_offset + last_offset_delta, 2,
        COMPRESSION_NAMES[codec], "LogAppendTime" if log_append_time is not None else "CreateTime",
        producer_id, producer_epoch, base_sequence, leader_epoch, bool(attributes & 0x10), is_control,
        records, controls,
    )


def _decode_v2_records(data: bytes, pos: int, count: int, base_offset: int, base_timestamp: int,
                       log_append_time: int | None) -> list:
    """Decode ``count`` ``DefaultRecord``s from ``data[pos:]``; the fast path inlines one-byte varints."""
    records: list = []
    append = records.append
    end = len(data)
    # Every field repeats the one-byte varint fast path inline instead of calling
    # ``_zigzag``, because this loop runs once per record of every batch and the call is its main cost.
    for _ in range(count):
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        record_end = pos + ((raw >> 1) ^ -(raw & 1))
        if record_end > end or record_end <= pos:
            raise ValueError(f"record length overruns the batch at byte {pos}")
        pos += 1  # record attributes (unused)
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        timestamp = base_timestamp + ((raw >> 1) ^ -(raw & 1))
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        offset = base_offset + ((raw >> 1) ^ -(raw & 1))
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        size = (raw >> 1) ^ -(raw & 1)
        if size < 0:
            key = None
        else:
            key = data[pos:pos + size]
            pos += size
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        size = (raw >> 1) ^ -(raw & 1)
        if size < 0:
            value = None
        else:
            value = data[pos:pos + size]
            pos += size
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            raw, pos = _varint(data, pos)
        header_count = (raw >> 1) ^ -(raw & 1)
        if header_count:
            headers, pos = _headers(data, pos, header_count)
        else:
            headers = []
        if pos != record_end:
            raise ValueError(f"record ends at byte {pos}, its length says {record_end}")
        if log_append_time is None and not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise ValueError(f"record timestamp {timestamp} is beyond a long")
        if not _INT64_MIN <= offset <= _INT64_MAX:
            raise ValueError(f"record offset {offset} is beyond a long")
        append((offset, log_append_time if log_append_time is not None else timestamp, key, value, headers))
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the {count} records the header declares")
    return records


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint at ``pos`` (up to 10 bytes, i.e. a varlong); returns (value, next position).

    Not ``codec.wire``'s: the sources sit below the codec (they may not import it), and
    a batch's bad varint is a ``ValueError`` that makes an unreadable stretch, not a record's ``DecodeError``."""
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _varint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _headers(data: bytes, pos: int, count: int) -> tuple[list, int]:
    if count < 0:
        raise ValueError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        size, pos = _zigzag(data, pos)
        if size < 0:
            raise ValueError("null header key")
        name = data[pos:pos + size].decode("utf-8")
        pos += size
        size, pos = _zigzag(data, pos)
        if size < 0:
            value = None
        else:
            value = data[pos:pos + size]
            pos += size
        headers.append((name, value))
    return headers, pos


def _control_of(key: bytes | None, value: bytes | None) -> tuple[str, int | None]:
    """``(control_type, coordinator_epoch)`` of a control record, as ``ControlRecordType`` and
    ``EndTransactionMarker`` read it; an unparsable or unknown key is ``UNKNOWN``."""
    if key is None or len(key) < 4:
        return "UNKNOWN", None
    version, type_id = struct.unpack_from(">hh", key)
    if version < 0:
        return "UNKNOWN", None
    name = CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    epoch = None
    if type_id in (0, 1) and value is not None and len(value) >= 6:
        epoch = _CONTROL_VALUE.unpack_from(value)[1]
    return name, epoch


# ------------------------------------------------------------------------------------------ magic 0 / 1

def _decode_legacy(data: bytes, position: int, magic: int) -> RecordBatch:
    offset, size, crc, _, attributes = _LEGACY_HEADER.unpack_from(data)
    computed = zlib.crc32(memoryview(data)[16:])
    if computed != crc:
        raise BadBatch("crc_mismatch", f"stored CRC32 {crc:#010x}, computed {computed:#010x}")
    try:
        timestamp, key, value = _legacy_fields(data, 16, len(data), magic)
    except (IndexError, ValueError, struct.error) as exc:
        raise BadBatch("bad_record", f"message does not parse: {exc}") from None
    codec = attributes & 0x07
    if magic == 0:
        timestamp_type = "NoTimestampType"
    else:
        timestamp_type = "LogAppendTime" if attributes & 0x08 else "CreateTime"
    if codec == 0:
        records: list = [(offset, timestamp, key, value, [])]
        base_offset = offset
    else:
        if codec > 3:
            raise BadBatch("unknown_compression", f"compression codec id {codec} is not valid for magic {magic}")
        if value is None:
            raise BadBatch("bad_record", "compressed wrapper message has a null value")
        try:
            inner = decompress(codec, value)
        except DecompressionError as exc:
            raise BadBatch("decompression_failed", str(exc)) from None
        try:
            records = _legacy_inner(inner, offset, magic, timestamp, timestamp_type)
        except (IndexError, ValueError, struct.error) as exc:
            raise BadBatch("bad_record", f"inner message set does not parse: {exc}") from None
        base_offset = records[0][0]
    return RecordBatch(position, len(data), base_offset, offset, magic, COMPRESSION_NAMES[codec],
                       timestamp_type, -1, -1, -1, -1, False, False, records)


def _legacy_fields(data: bytes, pos: int, end: int, magic: int) -> tuple[int, bytes | None, bytes | None]:
    """``(timestamp, key, value)`` of a ``LegacyRecord`` whose magic byte is at ``pos``."""
    pos += 2  # magic, attributes
    timestamp = -1
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(data, pos)
        pos += 8
    (size,) = _INT32.unpack_from(data, pos)
    pos += 4
    key = None
    if size >= 0:
        key = data[pos:pos + size]
        pos += size
    (size,) = _INT32.unpack_from(data, pos)
    pos += 4
    value = None
    if size >= 0:
        value = data[pos:pos + size]
        pos += size
    if pos != end:
        raise ValueError(f"message fields end at byte {pos}, its size says {end}")
    return timestamp, key, value


def _legacy_inner(inner: bytes, wrapper_offset: int, wrapper_magic: int, wrapper_timestamp: int,
                  wrapper_timestamp_type: str) -> list:
    """Records of a compressed wrapper, with Kafka's ``DeepRecordsIterator`` offset and timestamp rules."""
    entries = []
    pos, end = 0, len(inner)
    while pos + LOG_OVERHEAD <= end:
        offset, size, _, magic, attributes = _LEGACY_HEADER.unpack_from(inner, pos)
        message_end = pos + LOG_OVERHEAD + size
        if size < _MIN_LENGTH[0] or message_end > end:
            break  # Kafka's inner stream stops at a short read
        if magic not in (0, 1):
            raise ValueError(f"inner message with magic {magic}")
        if attributes & 0x07:
            raise ValueError("inner messages must not be compressed")
        timestamp, key, value = _legacy_fields(inner, pos + 16, message_end, magic)
        if magic == 0:
            timestamp = -1  # magic 0 has no timestamp
        elif wrapper_timestamp_type == "LogAppendTime":
            timestamp = wrapper_timestamp
        entries.append([offset, timestamp, key, value, []])
        pos = message_end
    if not entries:
        raise ValueError("compressed wrapper holds no inner messages")
    if wrapper_magic == 1:
        absolute_base = 0 if wrapper_offset == 0 else wrapper_offset - entries[-1][0]
        for entry in entries:
            entry[0] += absolute_base
    return [tuple(entry) for entry in entries]


def is_index_file(path: str | os.PathLike) -> bool:
    """True for the broker's side files a segment reader ignores (indexes, snapshots, checkpoints)."""
    name = Path(path).name
    return name.endswith(_INDEX_SUFFIXES) or name in ("leader-epoch-checkpoint", "partition.metadata")


#: What ``batch_end`` returns for a header that cannot start a batch (unknown magic, length below its minimum).
NOT_A_BATCH = -1
#: What ``batch_end`` reads of a batch header: base offset, length, partition leader epoch and magic.
_HEADER_READ = LOG_OVERHEAD + 5


def batch_end(handle: BinaryIO, pos: int, end: int) -> int:
    """Where the batch whose header starts at ``pos`` of the open segment ``handle`` ends, from its header alone.

    Reads the base offset, the length and the magic byte (17 bytes), as Kafka's ``FileLogInputStream`` does
    before reading a whole batch. Returns ``pos`` itself when the header or the batch it claims is cut short by
    ``end`` (a batch still being appended, or a truncated tail), ``NOT_A_BATCH`` when the header cannot be one.
    """
    if pos + _HEADER_READ > end:
        return pos
    handle.seek(pos)
    head = handle.read(_HEADER_READ)
    if len(head) < _HEADER_READ:
        return pos
    return _header_end(head, 0, pos, end)


def _header_end(buf: bytes, at: int, pos: int, end: int) -> int:
    """``batch_end`` of the header at ``pos`` of the file, its ``_HEADER_READ`` bytes at ``buf[at:]``."""
    _, length = _OFFSET_LENGTH.unpack_from(buf, at)
    magic = buf[at + 16]
    if magic not in _MIN_LENGTH or length < _MIN_LENGTH[magic]:
        return NOT_A_BATCH
    if pos + LOG_OVERHEAD + length > end:
        return pos
    return pos + LOG_OVERHEAD + length


#: Bytes ``complete_batch_ends`` reads at once: the headers it walks are read from memory, not one read each.
_WALK_CHUNK = 1 << 20


def complete_batch_ends(handle: BinaryIO, start: int, end: int) -> Iterator[int]:
    """End positions of the consecutive complete batches from ``start``, walking their headers as ``batch_end``
    reads them; stops at the first header that is cut short by ``end`` or cannot be a batch.

    The headers come from chunks of ``_WALK_CHUNK`` bytes read ahead (a batch of a few records is a few hundred
    bytes: one read and one seek per header made planning a large log slow)."""
    pos = start
    chunk, chunk_start = b"", start
    while pos < end:
        if pos + _HEADER_READ > end:
            return
        at = pos - chunk_start
        if at < 0 or at + _HEADER_READ > len(chunk):
            handle.seek(pos)
            chunk, chunk_start, at = handle.read(min(_WALK_CHUNK, end - pos)), pos, 0
            if len(chunk) < _HEADER_READ:
                return
        next_pos = _header_end(chunk, at, pos, end)
        if next_pos <= pos:  # cut short by ``end`` (itself) or not a batch (``NOT_A_BATCH``)
            return
        pos = next_pos
        yield pos
