"""Read and decode in one Python pass: the ``kafka-segments`` source wrapped with the codec.

``decode(sources.read(...))`` moves every record across the Python/JVM boundary three times: the source's
Python worker hands its Arrow batches to the JVM as rows, ``mapInArrow`` turns the rows back into Arrow for a
second Python worker, and the decoded batches come back as rows again, much of a no-op read and decode's time.

``kafka-segments+decoded`` is a Python Data Source whose reader is ``kafka-segments``' own, and which decodes
each Arrow batch where it is read (``codec.spark.decode_batches``): the rows equal ``decode(read(...))``'s,
column for column, with one crossing. It takes ``kafka-segments``' options plus ``decodedRecord`` (``true``: also
``DECODED_RECORD_COLUMN`` and ``MARK_COLUMNS``, what the replay's fold and the commit log's digest read; the marks
only here, where each Arrow batch holds whole Kafka batches and a segment is read in one piece) and ``compact``
(``true``: the columns ``codec.spark.compact`` drops come null on decoded rows, and their JSON texts are never
built: a run that does not write the ``decoded`` table; the rows after ``compact`` are the same) and ``packCommits``
(``true``, with both others: the commits marked mid-run after a commit come packed, ``codec.packing``; the rows
after ``codec.packing.unpacked`` are the same). ``read_decoded``
picks it where the source is segments; Parquet dumps and Spark's own ``kafka`` source are JVM readers and still decode with ``mapInArrow``.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader

from offsets_audit.codec.packing import pack_batch, packed_ddl
from offsets_audit.codec.spark import (COALESCE_ROWS, DECODED_COLUMNS, DECODED_RECORD_COLUMN, MARK_COLUMNS, PACKED_COLUMN,
                                      compact_batch, decode, decode_batches, mark_batch, mark_range)
from offsets_audit.sources.schema import SOURCE_SCHEMA
from offsets_audit.sources.segments_spark import PackedRanges, SegmentRange, SegmentsReader

DECODED_SEGMENTS_FORMAT = "kafka-segments+decoded"
#: The options this wrapper reads itself (lower-case, as Spark hands options over); the rest go to the source.
DECODED_RECORD_OPTION = "decodedrecord"
COMPACT_OPTION = "compact"
PACK_OPTION = "packcommits"
#: The segments source's option for the rows of its Arrow batches (lower-case, as ``_split_options`` gives it).
ROWS_PER_BATCH_OPTION = "rowsperbatch"


def _split_options(options) -> tuple[dict, bool, bool, bool]:
    """(the source's options, ``decodedRecord``, ``compact``, ``packCommits``: only with both others)."""
    options = {str(k).lower(): v for k, v in dict(options).items()}

    def flag(name):
        return str(options.pop(name, "false")).strip().lower() == "true"

    with_record, compact, pack = flag(DECODED_RECORD_OPTION), flag(COMPACT_OPTION), flag(PACK_OPTION)
    return options, with_record, compact, pack and with_record and compact


class DecodedSegmentsDataSource(DataSource):
    """``kafka-segments`` rows with the codec's columns added (``codec.spark.output_schema``), decoded in the
    reading task."""

    @classmethod
    def name(cls) -> str:
        return DECODED_SEGMENTS_FORMAT

    def schema(self) -> str:
        # DDL text: this runs in a Python worker, where no session can parse DDL into types.
        fields = [(f.name, f.dataType.simpleString()) for f in SOURCE_SCHEMA.fields]
        fields += [(name, ddl) for name, (_, ddl) in DECODED_COLUMNS.items()]
        _, with_record, _, pack = _split_options(self.options)
        if with_record:
            fields.append((DECODED_RECORD_COLUMN, "binary"))
            fields.extend((name, "boolean") for name in MARK_COLUMNS)
        if pack:
            fields.append((PACKED_COLUMN, packed_ddl(dict(fields))))
        return ", ".join(f"`{name}` {ddl}" for name, ddl in fields)

    def reader(self, schema) -> DecodingReader:
        options, with_record, compact, pack = _split_options(self.options)
        # The decoder joins its input into batches of ``COALESCE_ROWS`` (``decode_batches``): read them that size,
        # unless asked otherwise, so that no batch is copied only to be joined (``kafka-segments`` alone hands Spark
        # its ``rowsPerBatch``, 10,000 by default).
        options.setdefault(ROWS_PER_BATCH_OPTION, str(COALESCE_ROWS))
        return DecodingReader(SegmentsReader(options), with_record, compact, pack)


#: The most bytes of decoded batches the reader holds to mark a segment across (``mark_range``); a larger segment is
#: marked batch by batch as it is read. Decoded rows take several times their segment's bytes, so this bounds a
#: Python worker's memory, which a cluster's container counts in its memory overhead.
RANGE_BYTES_LIMIT = 512 * 1024 * 1024


class DecodingReader(DataSourceReader):
    """A source's reader whose Arrow batches are decoded before Spark sees them (``compact_batch``-ed with
    ``compact``, after the marks, which read the batch fields; then packed with ``pack``)."""

    def __init__(self, inner: SegmentsReader, with_decoded_record: bool, compact: bool = False, pack: bool = False):
        self.inner, self.with_decoded_record, self.compact = inner, with_decoded_record, compact
        self.pack = pack and with_decoded_record and compact

    def partitions(self):
        return self.inner.partitions()

    def read(self, partition: SegmentRange | PackedRanges) -> Iterator:  # type: ignore[override]
        json_text = not self.compact
        if not self.with_decoded_record:
            decoded = decode_batches(self.inner.read(partition), False, json_text)
        else:
            # What the fold and the commit log's digest read (``codec.spark.MARK_COLUMNS``): each batch holds whole
            # Kafka batches (``segments_spark._Columns``); a whole segment is marked as one.
            decoded = (batch for batches, whole in self.inner.read_ranges(partition)
                       for batch in _marked(decode_batches(batches, True, json_text), whole))
        if self.pack:
            yield from (pack_batch(compact_batch(batch)) for batch in decoded)
        else:
            yield from (compact_batch(batch) for batch in decoded) if self.compact else decoded


def _marked(batches: Iterator, whole: bool) -> Iterator:
    """The decoded batches of one range with their marks: across the range when it is ``whole`` (a segment no other
    range shares offsets with) and its decoded batches take at most ``RANGE_BYTES_LIMIT``, else batch by batch."""
    if whole:
        held, size = [], 0
        for batch in batches:
            held.append(batch)
            size += batch.nbytes
            if size > RANGE_BYTES_LIMIT:
                break
        else:
            yield from mark_range(held)
            return
        for batch in held:
            yield mark_batch(batch)
    for batch in batches:
        yield mark_batch(batch)


def register(spark) -> None:
    """Register ``DecodedSegmentsDataSource`` on ``spark`` (once per session)."""
    from offsets_audit.sources import register as register_source

    register_source(spark, DecodedSegmentsDataSource)


def read_decoded(spark, source_config, *, report: dict | None = None, with_decoded_record: bool = False,
                 compact: bool = False, pack_commits: bool = False):
    """``decode(sources.read(spark, source_config))``, in one Python pass where the source allows it.

    Log segments are read through ``kafka-segments+decoded`` (below), which decodes each batch in the
    task that reads it (a small log: on the driver, ``sources.DRIVER_READ_MAX_BYTES``); other sources (Parquet,
    Spark's ``kafka`` source, ``kafka-python``) are read as they are and decoded with ``mapInArrow``. The rows and
    columns are the same either way.

    ``compact``: the caller keeps only ``codec.spark.compact`` of the rows (a run that does not write the ``decoded``
    table): the columns it drops come null on decoded rows, their JSON texts never built (the segments reader
    and ``decode`` alike). ``compact`` of the rows is the same as without it.

    ``pack_commits`` (with both others; segments only, the one reader that marks): commits marked mid-run after a
    commit come packed, several of a key to a row (``codec.packing``); ``unpacked`` of the rows is the same as
    without it. Other sources never pack."""
    from offsets_audit.sources import read

    kind = str(source_config.get("kind") or "").strip().lower() if hasattr(source_config, "get") else ""
    if kind == "segments":
        formats = {"kafka-segments": (DecodedSegmentsDataSource,
                                      {DECODED_RECORD_OPTION: str(bool(with_decoded_record)).lower(),
                                       COMPACT_OPTION: str(bool(compact)).lower(),
                                       PACK_OPTION: str(bool(pack_commits)).lower()})}
        return read(spark, source_config, report=report, formats=formats)
    return decode(read(spark, source_config, report=report), with_decoded_record=with_decoded_record,
                  json_text=not compact)
