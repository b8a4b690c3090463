"""The resolved offset-commit log: ``OffsetMetadataManager``'s rules as Spark SQL over columns.

One row per offset-commit record (types 0/1), never a Python object: what the coordinator did with it.
The batch replay's ``offsets`` table, the incremental replay's offsets snapshot (``replay.spark.merge_offsets``)
and the audit's offset rules (``audit.offsets_spark``) all read this one resolution. The pure core
(``replay.offsets.OffsetStore``) is the reference it is tested against.

Kafka's rules (``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker``):

* a plain commit (producer id -1) is stored at once (``committed``);
* a tombstone (deletion or expiry) removes the stored commit and every pending one of its key (``deleted``);
* a transactional commit waits for the first marker of its (``__consumer_offsets`` partition, producer id)
  after it: COMMIT stores it if its record offset is above the stored commit's (``txn_committed``, ``applied``),
  ABORT drops it (``txn_aborted``), no marker yet leaves it pending (``txn_pending``); a tombstone of its key
  between the commit and its marker clears it (``txn_cleared``); a later commit of the same key by the same
  producer before the marker replaces it (``txn_replaced``: the pending map holds one commit per key).

Two sort-based passes, no joins over the whole log:

1. per (partition, producer id), transactional commits and markers only (a small share of the log), in
   descending offset order: each commit picks up the nearest marker after it (a running ``last`` over a
   frame ending at the current row: linear, where a frame running to the end of the partition would be
   quadratic);
2. per offset key (group, topic, partition), every commit in the order the coordinator applied them
   (plain commits and tombstones at their record, transactional ones at their marker, pending ones last):
   the last tombstone before a row clears a transactional commit it follows, tombstones cut the key into
   segments, and a running maximum of ``(segment, record offset)`` decides ``applied``. The rows are
   hash-partitioned by group id, so the audit's per-group and per-key windows need no further shuffle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from offsets_audit.codec.packing import packed_ddl
from offsets_audit.plans import by_group

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Columns of ``resolve_commits``' output (docs/replay.md, "offset commit log").
COMMIT_LOG_DDL = (
    "group_id string, topic string, topic_partition int, record_partition int, record_offset long, timestamp long, "
    "producer_id long, committed_offset long, committed_leader_epoch int, metadata string, commit_timestamp long, "
    "topic_id string, outcome string, resolved_offset long, resolved_timestamp long, effective_at long, "
    "applied boolean, segment long, previous_committed_offset long, previous_partition int, previous_offset long, "
    "carried boolean"
)
#: Columns of ``commit_records``: each decodable offset-commit record of the log, typed.
COMMIT_RECORDS_DDL = (
    "group_id string, topic string, topic_partition int, record_partition int, record_offset long, timestamp long, "
    "producer_id long, is_tombstone boolean, committed_offset long, committed_leader_epoch int, metadata string, "
    "commit_timestamp long, topic_id string"
)
#: ``commit_runs``' ``commits``: what each record keeps of its own, as the codec packed it (``codec.packing``: a list
#: per field); the columns ``commit_records`` has of them come of it per record (``run_commit``), where a run is
#: taken apart.
_RUN_COMMITS_TYPE = packed_ddl({"offset": "bigint", "timestamp": "timestamp"})
#: Columns of ``commit_runs``: the records of one packed row (``codec.packing``), ``explode_runs`` gives them back.
COMMIT_RUNS_DDL = ("group_id string, topic string, topic_partition int, record_partition int, producer_id long, "
                   "is_tombstone boolean, metadata string, topic_id string, first_offset long, last_offset long, "
                   "commits " + _RUN_COMMITS_TYPE)
#: Fields of the commit stored at a key's end (``key_end``) besides its position, segment and committed offset.
_STORED_AT_END = ("committed_leader_epoch", "metadata", "commit_timestamp", "producer_id")
#: Columns of ``resolve_commits(..., digest=True)``: the log's columns, and on each key's last row the commit
#: stored at the end of the log (null when none is: nothing applied, or a tombstone since), the latest time of the
#: key's records and its first record naming a topic id (``_key_summaries``).
COMMIT_DIGEST_DDL = COMMIT_LOG_DDL + (
    ", last_of_key boolean, key_end struct<segment: bigint, committed_offset: bigint, committed_leader_epoch: int, "
    "metadata: string, commit_timestamp: bigint, producer_id: bigint, record_partition: int, record_offset: bigint, "
    "effective_at: bigint>, key_latest_time long, key_first_topic_id struct<p: int, o: bigint, id: string>"
)
#: ``outcome`` values.
OUTCOMES = ("committed", "deleted", "txn_committed", "txn_aborted", "txn_cleared", "txn_replaced", "txn_pending")
NO_PRODUCER_ID = -1
_KEY = ["group_id", "topic", "topic_partition"]
_VALUE = ["committed_offset", "committed_leader_epoch", "metadata", "commit_timestamp", "topic_id"]


def commit_records(decoded, *, runs_apart: bool = False):
    """Decodable offset-commit records of the codec's output as typed columns, one row per record (packed rows
    unpacked: ``codec.packing``).

    The codec hands each commit's value over typed (``offset_commit_value``, ``codec.spark``): nothing here
    parses ``value_json``, which was the largest single cost of the commit log (``from_json`` of ~90 % of
    the log). Absent fields take ``OffsetCommitValue``'s defaults the coordinator reads (leader epoch -1).

    ``runs_apart``: the records of packed rows are left out; ``commit_runs`` gives them, a row per packed row.
    """
    from pyspark.sql import functions as F

    from offsets_audit.codec.packing import unpacked
    from offsets_audit.codec.spark import PACKED_COLUMN

    if PACKED_COLUMN not in decoded.columns:
        return _records(decoded)
    return _records(decoded.filter(F.col(PACKED_COLUMN).isNull()) if runs_apart else unpacked(decoded))


def _records(decoded):
    """``commit_records`` of rows none of which is packed."""
    from pyspark.sql import functions as F

    return decoded.filter(F.col("error_code").isNull() & _is_commit()).select(*_commit_columns(decoded))


def commit_runs(decoded):
    """The commit records of the codec's packed rows (``codec.packing``), a row each (``COMMIT_RUNS_DDL``): what the
    records have in common, the first and last record offset, and ``commits``, each record's own columns as the
    codec's packed row holds them (``run_commit`` reads one). ``explode_runs`` gives the ``commit_records`` rows they
    stand for. Empty when ``decoded`` is not packed (Spark's optimizer then drops every plan over it).

    Every record of a run is a plain commit of one key in one partition, applied at its record unless its group's
    commits lie in two partitions (``codec.commit_runs``): a reader that only needs positions judges a run by its
    first and last (``ResolvedCommits.applied_runs``), and nothing is computed per record until a run is taken
    apart."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import PACKED_COLUMN

    if PACKED_COLUMN not in decoded.columns:
        return decoded.sparkSession.createDataFrame([], COMMIT_RUNS_DDL)
    packed = F.col(PACKED_COLUMN)
    rows = decoded.filter(packed.isNotNull() & F.col("error_code").isNull() & _is_commit())
    shared = [column for name, column in _commit_columns(rows, named=True) if name in _RUN_SHARED]
    return rows.select(*shared, packed["offset"][0].cast("long").alias("first_offset"),
                       F.element_at(packed["offset"], -1).cast("long").alias("last_offset"), packed.alias("commits"))


def run_commit(element) -> dict:
    """``commit_records``' columns that differ between the records of a run, by name, of one element of
    ``codec.packing.elements`` of ``commit_runs``' ``commits`` (a column). The value's metadata and topic id are the
    run's (``commit_runs``' own columns)."""
    from pyspark.sql import functions as F

    value = {"offset": element["committed_offset"], "leader_epoch": element["leader_epoch"],
             "commit_timestamp": element["commit_timestamp"], "metadata": F.lit(None), "topic_id": F.lit(None)}
    return {name: column.alias(name) for name, column in _record_columns(
        element["offset"], record_time_ms(element["timestamp"]), value) if name not in _RUN_SHARED}


def explode_runs(runs):
    """The ``commit_records`` rows (``COMMIT_RECORDS_DDL``) that ``commit_runs`` rows stand for."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.packing import elements

    names = [c.split()[0] for c in COMMIT_RECORDS_DDL.split(", ")]
    own = run_commit(F.col("_c"))
    exploded = runs.select(*_RUN_SHARED, F.explode(elements(F.col("commits"))).alias("_c"))
    return exploded.select(*[own.get(c, F.col(c)) for c in names])


def _digest_commits(decoded):
    """``commit_records(decoded)`` less the commits the segments reader marked mid-run (``COMMIT_MID_RUN_COLUMN``,
    ``codec.commit_runs``): the rows of the log's digest come out the same without them.

    Except in a group whose commits lie in two record partitions: there a later partition's commit can fail to
    apply below an earlier partition's (a digest row), which a segment alone cannot see. Such groups keep every
    commit. Which they are is one small aggregate over the kept commits, run here: a healthy log has none, and a
    union with an empty join in the digest's plan would still cost its scan."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import COMMIT_MID_RUN_COLUMN

    if COMMIT_MID_RUN_COLUMN not in decoded.columns:
        return commit_records(decoded)
    mid = F.coalesce(F.col(COMMIT_MID_RUN_COLUMN), F.lit(False))
    kept = _records(decoded.filter(~mid))  # a packed row is marked mid-run: none is left
    # Every segment keeps each key's first commit in it, so the kept rows show every partition a group commits in.
    spread = [r["group_id"] for r in kept.groupBy("group_id").agg(
        F.min("record_partition").alias("_lo"), F.max("record_partition").alias("_hi")).filter(
        F.col("_lo") != F.col("_hi")).select("group_id").collect()]
    if not spread:
        return kept
    return kept.unionByName(commit_records(decoded.filter(mid & F.col("group_id").isin(spread))))


def _is_commit():
    from pyspark.sql import functions as F

    from offsets_audit.codec.offset_commits import OFFSET_COMMIT_TYPE_IDS

    return F.col("record_type").isin(*OFFSET_COMMIT_TYPE_IDS) & ~F.coalesce(F.col("is_control"), F.lit(False))


#: ``commit_runs``' columns the records of a run share (each one's own are in ``commits``).
_RUN_SHARED = ("group_id", "topic", "topic_partition", "record_partition", "producer_id", "is_tombstone", "metadata",
               "topic_id")


def _commit_columns(decoded, *, named: bool = False) -> list:
    """``commit_records``' columns, as expressions over rows of the codec's output (``named``: as (name, expression)
    pairs)."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import tombstone

    pairs = [
        ("group_id", F.col("group_id")), ("topic", F.col("topic_name")),
        ("topic_partition", F.col("topic_partition").cast("int")), ("record_partition", F.col("partition").cast("int")),
        ("producer_id", F.coalesce(F.col("producer_id"), F.lit(NO_PRODUCER_ID)).cast("long")),
        ("is_tombstone", tombstone(decoded)),
        *_record_columns(F.col("offset"), _millis(decoded), F.col("offset_commit_value")),
    ]
    order = [c.split()[0] for c in COMMIT_RECORDS_DDL.split(", ")]
    pairs.sort(key=lambda pair: order.index(pair[0]))
    named_columns = [(name, column.alias(name)) for name, column in pairs]
    return named_columns if named else [column for _, column in named_columns]


def _record_columns(offset, time, value) -> list:
    """The (name, expression) pairs of ``commit_records``' columns that differ between the records of one key: from a
    record's offset, time (epoch ms) and ``offset_commit_value``."""
    from pyspark.sql import functions as F

    return [
        ("record_offset", offset.cast("long")), ("timestamp", time),
        ("committed_offset", value["offset"]),
        ("committed_leader_epoch", F.coalesce(value["leader_epoch"], F.lit(-1))),
        ("metadata", F.coalesce(value["metadata"], F.lit(""))),
        ("commit_timestamp", value["commit_timestamp"]),
        ("topic_id", value["topic_id"]),
    ]


def record_time_ms(timestamp=None):
    """A decoded record's Kafka timestamp (``timestamp``, a column: the record's own without it) as epoch
    milliseconds (long): the unit of every replay and audit time."""
    from pyspark.sql import functions as F

    return (F.unix_micros(F.col("timestamp") if timestamp is None else timestamp) / 1000).cast("long")


def _millis(decoded):
    from pyspark.sql import functions as F

    return record_time_ms() if "timestamp" in decoded.columns else F.lit(None).cast("long")


def resolve_commits(decoded, previous=None, *, digest: bool = False):
    """The commit log (``COMMIT_LOG_DDL``) of ``decoded``, given the offsets snapshot ``previous`` before it
    (``replay.spark.OFFSETS_STATE_DDL`` rows; ``None`` at the start of the log). Rows of ``previous`` come
    back with ``carried`` true: its committed winners as ``committed``, its pending commits resolved again.

    With ``digest``, the log's digest instead (``COMMIT_DIGEST_DDL``): the same resolution, of which only the rows
    the offsets snapshot and the offset rules cannot take from the commit records themselves are kept
    (``_kept_in_digest``), each key's last row with the commit stored at its end (``key_end``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import tombstone

    commits = _digest_commits(decoded) if digest and previous is None else commit_records(decoded)
    commits = commits.withColumn("carried", F.lit(False))
    settled = commits.filter(F.col("is_tombstone") | (F.col("producer_id") == NO_PRODUCER_ID)).withColumn(
        "marker_offset", F.lit(None).cast("long")).withColumn("control_type", F.lit(None).cast("string")) \
        .withColumn("marker_timestamp", F.lit(None).cast("long"))
    # Pass 1's input, transactional commits and COMMIT/ABORT markers, in one scan of the log: a marker row has the
    # commit columns of a control record (null or defaults: none is read) and its marker in ``_m``.
    is_marker = F.coalesce(F.col("is_control"), F.lit(False))
    is_txn = _is_commit() & ~tombstone(decoded) & (
        F.coalesce(F.col("producer_id"), F.lit(NO_PRODUCER_ID)) != NO_PRODUCER_ID)
    marker = F.when(is_marker, F.struct(F.col("offset").cast("long").alias("marker_offset"), "control_type",
                                        _millis(decoded).alias("marker_timestamp")))
    stream = decoded.filter(F.col("error_code").isNull() & (is_marker | is_txn)).select(
        *_commit_columns(decoded), F.lit(False).alias("carried"), marker.alias("_m"))
    txn_columns = commits.columns
    if previous is not None:
        old = previous.select(*_KEY, "record_partition", "record_offset", F.lit(None).cast("long").alias("timestamp"),
                              "producer_id", F.lit(False).alias("is_tombstone"), "committed_offset",
                              "committed_leader_epoch", "metadata", "commit_timestamp",
                              F.lit(None).cast("string").alias("topic_id"), F.lit(True).alias("carried"),
                              "status", "effective_at")
        stream = old.filter(F.col("status") == "pending").drop("status", "effective_at").withColumn(
            "_m", F.lit(None).cast(stream.schema["_m"].dataType)).unionByName(stream)
        # A committed winner of an earlier batch: applied at the position it became effective.
        settled = settled.withColumn("_carried_at", F.lit(None).cast("long")).unionByName(
            old.filter(F.col("status") == "committed").drop("status")
            .withColumnRenamed("effective_at", "_carried_at")
            .withColumn("marker_offset", F.lit(None).cast("long")).withColumn("control_type", F.lit(None).cast("string"))
            .withColumn("marker_timestamp", F.lit(None).cast("long")))
    else:
        settled = settled.withColumn("_carried_at", F.lit(None).cast("long"))

    # Pass 1: each transactional commit finds the first marker of its producer after it.
    behind = Window.partitionBy("record_partition", "producer_id").orderBy(F.col("record_offset").desc()) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    txn = (stream.withColumn("_next", F.last("_m", ignorenulls=True).over(behind))
           .filter(F.col("_m").isNull())
           .select(*txn_columns, F.col("_next.marker_offset").alias("marker_offset"),
                   F.col("_next.control_type").alias("control_type"),
                   F.col("_next.marker_timestamp").alias("marker_timestamp"))
           .withColumn("_carried_at", F.lit(None).cast("long")))

    # Pass 2: per offset key, in the order the coordinator applied them. Partitioned by group id (the audit's
    # per-group windows read the log as it is), four tasks per core on a local session (``by_group``): the rows are
    # far from even across groups, and with one task per core one core sat idle for most of the stage.
    rows = by_group(settled.unionByName(txn.select(*settled.columns)))
    is_txn = (F.col("producer_id") != NO_PRODUCER_ID) & ~F.col("is_tombstone") & ~F.col("carried") \
        | (F.col("carried") & F.col("_carried_at").isNull())
    rows = rows.withColumn("_txn", is_txn).withColumn(
        "_pos", F.when(F.col("_carried_at").isNotNull(), F.col("_carried_at"))
        .when(F.col("_txn"), F.col("marker_offset")).otherwise(F.col("record_offset")))
    # The order is plain columns (the tie-break computed once): every window below then shares one sort, and
    # Spark collapses the independent ones into one Window operator, where an expression in the order would be
    # re-aliased per window and re-sorted each time (seven sorts of the whole commit log).
    rows = rows.withColumn("_pending_producer", F.when(F.col("_pos").isNull(), F.col("producer_id")))
    order = [F.col("record_partition"), F.col("_pos").asc_nulls_last(), F.col("_pending_producer"),
             F.col("record_offset")]
    key = Window.partitionBy(*_KEY).orderBy(*order)
    upto = key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = key.rowsBetween(Window.unboundedPreceding, -1)
    # Two Window operators over the one sort: each window column of a ``select`` shares one operator (a chain of
    # ``withColumn``s puts a projection between them and gets one operator, one buffering of the rows, each).
    rows = rows.select(
        "*", F.sum(F.col("is_tombstone").cast("long")).over(upto).alias("segment"),
        F.last(F.when(F.col("is_tombstone"), F.col("record_offset")), ignorenulls=True).over(upto)
        .alias("_last_tombstone"),
        F.lead("_pos").over(key).alias("_next_pos"), F.lead("producer_id").over(key).alias("_next_producer"),
        F.lead("_txn").over(key).alias("_next_txn"), *(_key_summaries(upto) if digest else []))
    cleared = F.col("_txn") & F.col("_last_tombstone").isNotNull() & (F.col("_last_tombstone") > F.col("record_offset"))
    same_marker = F.col("_next_txn") & (F.col("_next_producer") == F.col("producer_id")) & (
        (F.col("_next_pos") == F.col("_pos")) | (F.col("_pos").isNull() & F.col("_next_pos").isNull()))
    outcome = (F.when(F.col("is_tombstone"), F.lit("deleted"))
               .when(~F.col("_txn"), F.lit("committed"))
               .when(cleared, F.lit("txn_cleared"))
               .when(same_marker, F.lit("txn_replaced"))
               .when(F.col("control_type").isNull(), F.lit("txn_pending"))
               .when(F.col("control_type") == "COMMIT", F.lit("txn_committed"))
               .otherwise(F.lit("txn_aborted")))
    rows = rows.withColumn("outcome", outcome)
    effective = F.col("outcome").isin("committed", "txn_committed")
    # The stored commit before a row is the effective one with the highest (segment, record offset) before it: a
    # commit is applied when its record offset beats the stored one of its segment, so the applied commits of a
    # segment rise in record offset and the highest effective one before a row is also the last applied one (the
    # ``previous_*`` columns). On a tie (a group's records in two partitions) the earlier partition stored first.
    stored = F.struct(F.col("segment").alias("segment"), F.col("record_offset").alias("record_offset"),
                      (-F.col("record_partition")).alias("_tie"), F.col("committed_offset").alias("committed_offset"),
                      F.col("record_partition").alias("partition"), F.col("_pos").alias("offset"),
                      *([F.col(c) for c in _STORED_AT_END] if digest else []))
    previous_one = F.max(F.when(effective, stored)).over(before).alias("_previous")
    # The key's last row: nothing follows it in the key's order (``lead`` falls back to its default there).
    last = [F.lead(F.lit(False), 1, True).over(key).alias("last_of_key")] if digest else []
    rows = rows.select("*", previous_one, *last).withColumn(
        "applied", F.when(effective, F.col("_previous").isNull() | (F.col("_previous.segment") != F.col("segment"))
                          | (F.col("record_offset") > F.col("_previous.record_offset"))))
    same_segment = F.col("_previous.segment") == F.col("segment")
    if digest:
        # The digest's ``previous_*`` only where the rules read them, on applied rows: a transactional commit resolved
        # between two rows of a run the segments reader thinned sees the nearest row kept before it, not the one
        # stored (``codec.commit_runs.thin_runs``), and is never applied there.
        same_segment = same_segment & F.coalesce(F.col("applied"), F.lit(False))
    resolved = F.when(F.col("outcome") == "txn_cleared", F.col("_last_tombstone")).otherwise(F.col("marker_offset"))
    if digest:
        # The commit stored after the key's last row: that row if it was applied, else the one stored before it (an
        # applied commit beats the stored one, so the greater of the two by segment and record offset).
        at_end = F.greatest(F.col("_previous"), F.when(F.col("applied"), stored))
        rows = rows.withColumn("key_end", F.when(F.col("last_of_key"), F.struct(
            *[at_end[c].alias(c) for c in ("segment", "committed_offset", *_STORED_AT_END)],
            at_end["partition"].alias("record_partition"), at_end["record_offset"].alias("record_offset"),
            at_end["offset"].alias("effective_at"))))
    log = rows.select(
        *_KEY, "record_partition", "record_offset", "timestamp", "producer_id", "committed_offset",
        "committed_leader_epoch", "metadata", "commit_timestamp", "topic_id", "outcome",
        F.when(F.col("_txn"), resolved).alias("resolved_offset"),
        F.when(F.col("_txn") & (F.col("outcome") != "txn_cleared"), F.col("marker_timestamp")).alias("resolved_timestamp"),
        F.when(effective, F.col("_pos")).alias("effective_at"), "applied", "segment",
        F.when(same_segment, F.col("_previous.committed_offset")).alias("previous_committed_offset"),
        F.when(same_segment, F.col("_previous.partition")).alias("previous_partition"),
        F.when(same_segment, F.col("_previous.offset")).alias("previous_offset"),
        "carried", *(["last_of_key", "key_end", F.when(F.col("last_of_key"), F.col("_latest")).alias("key_latest_time"),
                      F.when(F.col("last_of_key"), F.col("_first_named")).alias("key_first_topic_id")]
                     if digest else []),
    )
    return log.filter(_kept_in_digest()) if digest else log


def below_stored_commit():
    """A commit log row below the commit stored before it since the key's last tombstone (on ``applied`` rows: the
    ``offset_committed_backwards`` rule)."""
    from pyspark.sql import functions as F

    return F.col("previous_committed_offset").isNotNull() & F.col("committed_offset").isNotNull() & (
        F.col("committed_offset") < F.col("previous_committed_offset"))


def _kept_in_digest():
    """The commit log rows its digest keeps: transactional commits (``txn_*``), plain commits not applied, applied
    commits below the stored one, and each key's last row. The others, the bulk of a healthy log, are plain
    commits applied at their record, neither backwards nor the last of their key: the commit records themselves
    say all the offset rules read of them (``ResolvedCommits``)."""
    from pyspark.sql import functions as F

    return (F.col("outcome").startswith("txn_") | ((F.col("outcome") == "committed") & ~F.col("applied"))
            | (F.col("applied") & below_stored_commit()) | F.col("last_of_key"))


def _first_named_topic():
    """A commit record naming a topic id (not a tombstone, not the zero id) as (``p``, ``o``, ``id``), its position
    first: the least over a group's records is the first that named the topic; null for the others."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.schema import ZERO_UUID

    named = ~F.col("is_tombstone") & F.col("topic_id").isNotNull() & ~F.col("topic_id").isin(ZERO_UUID, "")
    return F.when(named, F.struct(F.col("record_partition").alias("p"), F.col("record_offset").alias("o"),
                                  F.col("topic_id").alias("id")))


def _key_summaries(upto) -> list:
    """What a digest's last row of a key says of all the key's records (running over ``upto``, the key's rows up to
    each one): its latest record time, and its first record (by position) naming a topic id, not a tombstone."""
    from pyspark.sql import functions as F

    record = ~F.col("carried")
    return [F.max(F.when(record, F.col("timestamp"))).over(upto).alias("_latest"),
            F.min(F.when(record, _first_named_topic())).over(upto).alias("_first_named")]


def offsets_snapshot(commit_log):
    """The offsets snapshot (``replay.spark.OFFSETS_STATE_DDL``) at the end of a commit log: per key the last
    applied commit after the key's last tombstone (``committed``) and the pending transactional commits."""
    from pyspark.sql import functions as F

    columns = [*_KEY, *_SNAPSHOT_VALUES]
    # One aggregate per key (the log is hash-partitioned by group id already: no shuffle, no join). The stored commit
    # is the applied one with the highest (segment, record offset), the earlier partition's first on a tie: the
    # order ``applied`` is decided in. (The highest effective position is the same commit for a key in one
    # partition, but not when a later partition's plain commit follows an earlier partition's late marker.)
    latest = F.when(F.col("applied"), F.struct("segment", "record_offset", (-F.col("record_partition")).alias("_tie")))
    winners = (commit_log.groupBy(*_KEY)
               .agg(F.max("segment").alias("_last_segment"),
                    F.max_by(F.struct(*columns[3:], "effective_at", "segment"), latest).alias("w"))
               .filter(F.col("w").isNotNull() & (F.col("w.segment") == F.col("_last_segment")))
               .select(*_KEY, "w.*")
               .select(*columns, F.lit("committed").alias("status"), "effective_at"))
    return winners.unionByName(_pending_rows(commit_log))


#: The commit's columns in an offsets snapshot, after its key.
_SNAPSHOT_VALUES = ["committed_offset", "committed_leader_epoch", "metadata", "commit_timestamp", "record_partition",
                    "record_offset", "producer_id"]


def _pending_rows(log):
    """The pending transactional commits of a commit log (whole or digest) as offsets snapshot rows."""
    from pyspark.sql import functions as F

    return log.filter(F.col("outcome") == "txn_pending").select(
        *_KEY, *_SNAPSHOT_VALUES, F.lit("pending").alias("status"), F.lit(None).cast("long").alias("effective_at"))


def digest_snapshot(digest):
    """``offsets_snapshot`` of a log from its digest (``resolve_commits(..., digest=True)``): each key's last row
    holds the commit stored at the end (``key_end``), a winner when no tombstone came after it; pending
    transactional commits are digest rows as they are. The same rows as ``offsets_snapshot`` of the whole log."""
    from pyspark.sql import functions as F

    winners = digest.filter(F.col("last_of_key") & (F.col("key_end.segment") == F.col("segment"))).select(
        *_KEY, *[F.col(f"key_end.{c}").alias(c) for c in _SNAPSHOT_VALUES], F.lit("committed").alias("status"),
        F.col("key_end.effective_at").alias("effective_at"))
    return winners.unionByName(_pending_rows(digest))


#: The columns of a commit record the offset rules read (``ResolvedCommits.records``).
RECORD_COLUMNS = ["group_id", "topic", "topic_partition", "record_partition", "record_offset", "timestamp",
                  "producer_id", "is_tombstone", "committed_offset", "topic_id"]


#: Where a commit record sits in the log (what ``ResolvedCommits.applied`` matches a failed plain commit by).
_POSITION = ("group_id", "record_partition", "record_offset")


@dataclass(frozen=True)
class ResolvedCommits:
    """The resolved commit log as the offset rules read it: ``rows``, the whole log (``COMMIT_LOG_DDL``) or its
    digest (``COMMIT_DIGEST_DDL``), and ``records``, every offset-commit record of the log as it was read
    (``RECORD_COLUMNS``).

    A batch run keeps only the digest (``resolve_commits(..., digest=True)``): each key's last row, the
    transactional commits and the few plain ones the rules report or skip. It reads the rest from the decoded
    records it holds anyway: caching the whole log (22 columns of ~90 % of the records) cost as much as resolving
    it. The rules see the same rows either way:

    * ``applied``: a plain commit is applied unless the digest says it was not; a transactional one is a digest row;
    * backwards and transactional commits: digest rows, all of them;
    * ``first_topic_ids``, ``latest_time``: from each key's last row (``key_first_topic_id``, ``key_latest_time``);
    * ``events``: each record's position and time, and each resolved transaction's marker.

    ``runs``: with a digest, the packed rows' records (``commit_runs``), which ``records`` then leaves out; every
    method reads them as the records they stand for, but ``applied_runs``, whose caller judges a run whole."""

    rows: DataFrame
    records: DataFrame
    whole: bool
    runs: DataFrame | None = None

    @classmethod
    def of_log(cls, log) -> ResolvedCommits:
        """The whole log (``COMMIT_LOG_DDL`` rows, ``carried`` ones included) as the rules read it."""
        from pyspark.sql import functions as F

        records = log.filter(~F.col("carried")).select(
            *[(F.col("outcome") == "deleted").alias(c) if c == "is_tombstone" else c for c in RECORD_COLUMNS])
        return cls(rows=log, records=records, whole=True)

    @classmethod
    def of_digest(cls, digest, decoded_commits, runs=None) -> ResolvedCommits:
        """A digest and ``commit_records`` of the decoded log it was resolved from (no earlier snapshot); with
        ``runs`` (``commit_runs``), ``commit_records(..., runs_apart=True)``."""
        return cls(rows=digest, records=decoded_commits.select(*RECORD_COLUMNS), whole=False, runs=runs)

    def _every_record(self):
        """``records`` with the records of ``runs``."""
        if self.runs is None:
            return self.records
        return self.records.unionByName(explode_runs(self.runs).select(*RECORD_COLUMNS))

    def applied(self, groups=None, *, runs_apart: bool = False):
        """Applied commits (not carried) of the groups in ``groups`` (a DataFrame of ``group_id``; all without
        it): key, ``committed_offset``, ``topic_id``, where they took effect (``partition``, ``offset``) and when
        (``time``: a transactional commit's marker time). ``runs_apart``: less the records of the runs
        ``applied_runs`` gives."""
        from pyspark.sql import functions as F

        def columns(offset, time):
            return ["group_id", "topic", "topic_partition", "committed_offset", "topic_id",
                    F.col("record_partition").alias("partition"), offset.alias("offset"), time.alias("time")]

        rows = _of_groups(self.rows.filter(~F.col("carried") & F.col("applied")), groups)
        if self.whole:
            return rows.select(*columns(F.col("effective_at"), F.when(
                F.col("outcome") == "txn_committed", F.col("resolved_timestamp")).otherwise(F.col("timestamp"))))
        plain = _of_groups(self.records.filter(~F.col("is_tombstone") & (F.col("producer_id") == NO_PRODUCER_ID)),
                           groups)
        # Broadcast whatever the digest's size: a plain commit fails to apply only in a group spread over two
        # partitions, and a sort-merge join would shuffle every plain commit of the log.
        not_applied = self._not_applied()
        if self.runs is not None:
            # a run's records are plain commits, applied at their record unless their group has one that was not
            runs = _of_groups(self.runs, groups)
            if runs_apart:
                runs = runs.join(self._failed_groups(), "group_id", "left_semi")
            plain = plain.unionByName(explode_runs(runs).select(*RECORD_COLUMNS))
        plain = plain.join(F.broadcast(not_applied), list(_POSITION), "left_anti")
        return plain.select(*columns(F.col("record_offset"), F.col("timestamp"))).unionByName(
            rows.filter(F.col("outcome") == "txn_committed").select(
                *columns(F.col("effective_at"), F.col("resolved_timestamp"))))

    def applied_runs(self, groups=None):
        """The runs of packed records (``runs``) of the groups in ``groups`` (all without it) whose every record is
        applied at its record (its group has no plain commit that failed to apply: ``applied(..., runs_apart=True)``
        gives the others' records), or None without runs: ``applied``'s columns for the run's first record (``partition``,
        ``offset``; ``committed_offset``, ``topic_id`` and ``time`` null), its last one's offset (``_last``) and its
        records (``_run``: ``commit_runs``' ``commits``, each read with ``run_commit``)."""
        from pyspark.sql import functions as F

        if self.whole or self.runs is None:
            return None
        runs = _of_groups(self.runs, groups).join(self._failed_groups(), "group_id", "left_anti")
        return runs.select("group_id", "topic", "topic_partition", F.lit(None).cast("long").alias("committed_offset"),
                           F.lit(None).cast("string").alias("topic_id"), F.col("record_partition").alias("partition"),
                           F.col("first_offset").alias("offset"), F.lit(None).cast("long").alias("time"),
                           F.col("last_offset").alias("_last"), F.col("commits").alias("_run"))

    def _not_applied(self):
        """The plain commits that failed to apply, by position: digest rows (a group whose commits lie in two
        partitions; a healthy log has none)."""
        from pyspark.sql import functions as F

        return self.rows.filter((F.col("outcome") == "committed") & ~F.col("applied")).select(*_POSITION)

    def _failed_groups(self):
        """The groups of ``_not_applied``, for a broadcast join: their runs are taken apart (``applied``), the
        others' judged whole (``applied_runs``)."""
        from pyspark.sql import functions as F

        return F.broadcast(self._not_applied().select("group_id").distinct())

    def first_topic_ids(self, groups):
        """Per (group, topic) of the groups in ``groups`` (a DataFrame of ``group_id``) the first commit record (by
        position) naming a topic id, not a tombstone: ``_first`` = (``p``, ``o``, ``id``)."""
        from pyspark.sql import functions as F

        if self.whole:
            first = _first_named_topic()
            named = self.records.filter(first.isNotNull())
        else:  # each key's first one, from its last row: the digest's few rows, not the records
            first = F.col("key_first_topic_id")
            named = self.rows.filter(F.col("last_of_key") & first.isNotNull())
        return (named.join(F.broadcast(groups), "group_id", "left_semi").groupBy("group_id", "topic")
                .agg(F.min(first).alias("_first")))

    def events(self):
        """The offset events of the log as positions and times (``group_id, partition, offset, timestamp``): each
        commit's at its record, and a resolved transactional commit's at its marker too."""
        from pyspark.sql import functions as F

        at_marker = F.when(~F.col("carried") & F.col("outcome").isin(*RESOLVED), F.struct(
            F.col("record_partition").alias("partition"), F.col("resolved_offset").alias("offset"),
            F.col("resolved_timestamp").alias("timestamp")))
        if self.whole:
            # One scan: explode, then drop the null marker events. ``F.filter`` (a higher-order function) has no
            # generated code and made this slower than the union of two scans it replaced.
            at_record = F.struct(F.col("record_partition").alias("partition"), F.col("record_offset").alias("offset"),
                                 F.col("timestamp").alias("timestamp"))
            return (self.rows.filter(~F.col("carried"))
                    .select("group_id", F.explode(F.array(at_record, at_marker)).alias("_e"))
                    .filter(F.col("_e").isNotNull()).select("group_id", "_e.*"))
        records = self._every_record().select("group_id", F.col("record_partition").alias("partition"),
                                              F.col("record_offset").alias("offset"), "timestamp")
        return records.unionByName(self.rows.select("group_id", at_marker.alias("_e"))
                                   .filter(F.col("_e").isNotNull()).select("group_id", "_e.*"))

    def times(self):
        """One column, ``timestamp``, whose greatest value is the latest time of ``events`` (null rows aside): each
        row's record time (on a digest, each key's latest, on its last row) or its resolved marker's, the later."""
        from pyspark.sql import functions as F

        named = F.col("group_id").isNotNull()
        marker = F.when(~F.col("carried") & F.col("outcome").isin(*RESOLVED), F.col("resolved_timestamp"))
        if self.whole:
            return self.rows.filter(~F.col("carried") & named).select(
                F.greatest(F.col("timestamp"), marker).alias("timestamp"))
        return self.rows.filter(named).select(  # each key's latest record time is on its last row
            F.greatest(F.when(F.col("last_of_key"), F.col("key_latest_time")), marker).alias("timestamp"))

    def latest_time(self):
        """The latest time of ``events`` (epoch ms), or None: one Spark job."""
        from pyspark.sql import functions as F

        return self.times().agg(F.max("timestamp")).first()[0]


def _of_groups(df, groups):
    """``df``'s rows of the groups in ``groups`` (a DataFrame of ``group_id``, broadcast), all without it."""
    from pyspark.sql import functions as F

    return df if groups is None else df.join(F.broadcast(groups), "group_id", "left_semi")


#: Outcomes of a transactional commit whose marker the group's clock includes.
RESOLVED = ("txn_committed", "txn_aborted")
