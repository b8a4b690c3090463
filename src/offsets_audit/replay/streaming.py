"""Incremental replay: the batch replay's fold as Structured Streaming queries, state kept in a checkpoint.

``offsets-audit run --incremental --checkpoint PATH`` reads only what is new since the last run
(``Trigger.AvailableNow``: everything present when the run starts, in one or more micro-batches) and carries
the replay state forward, so a nightly run costs what a day of log costs, not the whole history. A run killed at
any point and started again gives the same tables as an uninterrupted run, and the same tables as the batch
replay (``replay.spark.replay``) over the same input.

Two queries read the source, each with its own Spark checkpoint under ``PATH``:

* ``fold``: group records (types 2-23, plus the offset commits that can (re)create a simple classic group) go
  through ``groupBy("group_id").transformWithStateInPandas`` with a ``ValueState`` holding
  ``GroupFold.to_bytes()``, the same per-group fold the batch replay runs (Kafka's
  ``GroupCoordinatorShard.replay`` one record at a time). A micro-batch's rows of a group are applied in
  (partition, offset) order. Each micro-batch's output rows (events, target assignments, the touched groups'
  state and members) are written to ``PATH/fold_rows/batch=N`` (overwritten if the batch is replayed).
* ``records``: every decoded record. Quarantined rows go to ``<output>/quarantine/batch=N``; offset commits
  and transaction markers are merged into a snapshot of the offsets table ``PATH/offsets_state/batch=N``
  (``OffsetMetadataManager`` rules as in ``replay.spark``: last commit by record offset wins after the last
  tombstone; a transactional commit waits for the first COMMIT/ABORT marker of its (partition, producer id),
  possibly in a later micro-batch, unless a tombstone for its key comes first). Pending transactional commits are
  part of the snapshot, so a marker in a later micro-batch or a later run still finds them.

Writing micro-batch N's output to a folder named after N, replaced as a whole, makes every write idempotent: a
micro-batch Spark replays after a crash writes the same rows to the same place.

After both queries have caught up, the output tables are materialised under ``<output>`` (Parquet):

* ``group_events`` (partitioned by ``query`` = fold|records and ``batch``), ``target_assignments`` (by
  ``batch``), ``quarantine`` (by ``batch``): appended per micro-batch;
* ``group_state``, ``members``, ``offsets``: the current state, replaced on every run.

Column layouts are those of the batch replay (docs/replay.md); the partition columns come on top. The output
folder must not be shared with batch runs (their tables are partitioned by ``run_id``).

Sources: ``segments`` (the ``kafka-segments`` stream: new segment files and grown active segments), ``parquet``
(Spark's file stream source: new files), ``kafka`` (Spark's own ``kafka`` stream format; needs its jar, not
available in this project's test environment). Rate limits come from ``source.options``:
``maxFilesPerTrigger`` (segments and parquet), ``maxBytesPerTrigger`` (segments), ``maxOffsetsPerTrigger``
(kafka).
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pandas as pd

from offsets_audit.codec.offset_commits import OFFSET_COMMIT_TYPE_IDS
from offsets_audit.errors import UserError
from offsets_audit.spark_api import default_parallelism
from offsets_audit.replay.spark import OFFSETS_STATE_DDL as _OFFSETS_STATE_DDL
from offsets_audit.replay.commit_log import offsets_snapshot, record_time_ms, resolve_commits
from offsets_audit.replay.spark import fold_frame, merge_offsets, offsets_table, state_rows  # noqa: F401 - merge_offsets: imported from here by callers
from offsets_audit.workers import fewer_collections

FOLD_OUTPUT_DDL = "group_id string, kind string, payload string"
_FOLD_ROWS_SCHEMA_DDL = "group_id string, payload string, batch long, kind string"


# -- the fold, one group's micro-batch at a time -----------------------------------------------------------

def ordered_group_rows(pdf: pd.DataFrame) -> pd.DataFrame:
    """Sort by (partition, offset) and drop an offset commit that follows another commit: the fold only needs a
    commit to (re)create a simple classic group, which can only happen right after a group record."""
    pdf = pdf.sort_values(["partition", "offset"], kind="stable")
    is_commit = pdf["record_type"].isin(OFFSET_COMMIT_TYPE_IDS)
    return pdf[~(is_commit & is_commit.shift(1, fill_value=False))]


def fold_processor_class(extension=None):
    """The ``transformWithStateInPandas`` processor of the ``fold`` query.

    ``extension`` (optional, picklable) carries more per-group state beside the fold, in the same state store and
    the same micro-batch commit: ``extension(group_id, rows, state_bytes_or_None) -> (more_rows, state_bytes)``
    gets the fold's ``(kind, group_id, payload)`` rows of the micro-batch (the audit feeds its events to the
    group's audit state there, ``offsets_audit.incremental``)."""
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    from offsets_audit.replay.fold import GroupFold

    class GroupFoldProcessor(StatefulProcessor):
        """Per group id: ``GroupFold`` state in a ValueState, fed each micro-batch's records in log order."""

        def init(self, handle) -> None:
            self.fold_state = handle.getValueState("group_fold", StructType([StructField("fold", BinaryType())]))
            self.extension_state = (handle.getValueState("group_extension",
                                                         StructType([StructField("state", BinaryType())]))
                                    if extension else None)

        def handleInputRows(self, key, rows, timerValues):
            group_id = key[0]
            pdf = ordered_group_rows(pd.concat(list(rows), ignore_index=True))
            fold = GroupFold.from_bytes(bytes(self.fold_state.get()[0])) if self.fold_state.exists() \
                else GroupFold(group_id)
            with fewer_collections():  # the fold and the audit's walk, as in the batch run's bodies
                out = fold_frame(fold, pdf) + state_rows(fold)
                if extension is not None:
                    stored = bytes(self.extension_state.get()[0]) if self.extension_state.exists() else None
                    more, stored = extension(group_id, out, stored)
                    out += more
                    self.extension_state.update((stored,))
            self.fold_state.update((fold.to_bytes(),))
            yield pd.DataFrame(out, columns=["kind", "group_id", "payload"])[["group_id", "kind", "payload"]]

        def close(self) -> None:
            pass

    return GroupFoldProcessor


def fold_input(decoded):
    """The rows the fold needs: decodable group records and non-tombstone offset commits of a group (the batch
    replay folds the decoded rows only; quarantined ones never reach the replay nor the audit)."""
    from pyspark.sql import functions as F

    rows = decoded.filter(
        (F.coalesce(F.col("is_control"), F.lit(False)) == F.lit(False))
        & F.col("error_code").isNull() & F.col("group_id").isNotNull())
    is_commit = F.col("record_type").isin(*OFFSET_COMMIT_TYPE_IDS)
    # batch_base_offset: which records one append wrote, as the batch replay's fold sees it (``_group_inputs``)
    batch = ["batch_base_offset"] if "batch_base_offset" in decoded.columns else []
    return rows.filter(~is_commit | F.col("value").isNotNull()).select(
        "group_id", "key", "value", "partition", "offset", "record_type",
        record_time_ms().alias("timestamp_ms"), *batch)


# -- offsets: a snapshot per micro-batch ---------------------------------------------------------------------

# -- the checkpoint folder -------------------------------------------------------------------------------------

def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _batches(folder: str) -> list[int]:
    """Batch ids of the complete (``_SUCCESS``) ``batch=N`` sub-folders of ``folder``, ascending."""
    root = Path(_local(folder))
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = re.fullmatch(r"batch=(\d+)", child.name)
        if match and (child / "_SUCCESS").exists():
            found.append(int(match.group(1)))
    return sorted(found)


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def _read_json(path: Path, default):
    return json.loads(path.read_text()) if path.is_file() else default


# -- the streams -----------------------------------------------------------------------------------------------

def read_stream(spark, source: dict, *, announce: bool = False):
    """A streaming DataFrame with SOURCE_SCHEMA's columns from a source config (see ``sources.read``);
    ``announce``: a note on stderr says which stream reads a kafka source."""
    from pyspark.sql import functions as F

    from offsets_audit.sources import register
    from offsets_audit.sources.options import required_path, text_options
    from offsets_audit.sources.schema import KAFKA_COLUMNS, KAFKA_SCHEMA, as_source_schema

    kind = str(source.get("kind") or "").lower()
    options = text_options({k: v for k, v in source.items() if k not in ("kind", "path", "reader") and v is not None})
    if kind == "segments":
        from offsets_audit.spark_api import default_parallelism

        path = required_path(source, kind)
        # As a batch read packs small segments (``sources.read``): four input partitions per core, not one per file
        options.setdefault("minPartitions", str(4 * default_parallelism(spark)))
        register(spark)
        return as_source_schema(spark.readStream.format("kafka-segments").options(**options).load(path))
    if kind == "parquet":
        from offsets_audit.sources.parquet import record_time, spark_reader_options

        path = required_path(source, kind)
        schema = spark.read.parquet(path).schema
        df = record_time(spark.readStream.schema(schema).options(**spark_reader_options(options)).parquet(path))
        for field in KAFKA_SCHEMA.fields:
            if field.name not in df.columns:
                df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
        return as_source_schema(df)
    if kind == "kafka":
        from offsets_audit.sources import spark_kafka_available, spark_kafka_options
        from offsets_audit.sources.kafka import DEFAULT_TOPIC

        reader = str(source.get("reader") or "auto").lower()
        # As the batch read does: Spark's own kafka stream where its jar is on the classpath (or asked for), the
        # partitions and where a first run starts resolved on the driver; else the package's kafka-python stream
        # with the same options and offsets.
        if reader == "spark" or (reader == "auto" and spark_kafka_available(spark)):
            stream_options = spark_kafka_options(spark, options, stream=True)
            if stream_options is not None:
                if announce:
                    print("offsets-audit: note: read with Spark's kafka stream", file=sys.stderr)
                return as_source_schema(spark.readStream.format("kafka").options(**stream_options).load()
                                        .select(*KAFKA_COLUMNS))
            if reader == "spark":
                raise UserError("Spark's kafka source cannot read an internal topic on this session",
                                fix="let the session set spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true, "
                                    "or set source.reader: kafka-python")
        lowered = {k.lower() for k in options}
        if not {"subscribe", "assign", "subscribepattern"} & lowered:
            options["subscribe"] = DEFAULT_TOPIC
        if "kafka.isolation.level" not in lowered:
            options["kafka.isolation.level"] = "read_committed"
        register(spark)
        if announce:
            print("offsets-audit: note: read with the kafka-python stream", file=sys.stderr)
        return as_source_schema(spark.readStream.format("kafka-python").options(**options).load())
    raise UserError(f"source kind {source.get('kind')!r} is unknown", fix="set source kind to kafka, parquet or segments")


def _committed_batches(query_checkpoint: str) -> set[int]:
    """The micro-batch ids a streaming query's checkpoint has committed (its ``commits/<id>`` files)."""
    folder = Path(_local(query_checkpoint)) / "commits"
    if not folder.is_dir():
        return set()
    return {int(child.name) for child in folder.iterdir() if child.name.isdigit()}


def _committed_source_offset(query_checkpoint: str):
    """The source offset a streaming query's checkpoint ends at when it committed every micro-batch it planned (the
    ``offsets/<id>`` file of its last batch: a version line, the batch's metadata, one line per source), parsed;
    None when it has none, a planned batch is not committed (a restart would run it again), or either file of the
    last batch is not what Spark writes (a damaged checkpoint: the query, started, says so)."""
    root = Path(_local(query_checkpoint))
    planned = [int(child.name) for child in (root / "offsets").iterdir() if child.name.isdigit()] \
        if (root / "offsets").is_dir() else []
    committed = _committed_batches(query_checkpoint)
    if not planned or not committed or max(planned) != max(committed):
        return None
    last = str(max(planned))
    offsets = (root / "offsets" / last).read_text().splitlines()
    commit = (root / "commits" / last).read_text().splitlines()
    if len(offsets) != 3 or offsets[0] != "v1" or len(commit) != 2 or commit[0] != "v1":
        return None
    try:
        json.loads(offsets[1])
        json.loads(commit[1])
        return json.loads(offsets[2])
    except ValueError:
        return None


#: The queries an incremental run starts, by their checkpoint folder under the run's checkpoint.
QUERIES = ("fold", "records")


def nothing_past_committed(source: dict, checkpoint: str) -> bool:
    """Whether both queries would find nothing to read: each committed every micro-batch it planned, and the source
    holds nothing past the offset they end at. A query with nothing to read plans no micro-batch and leaves its
    checkpoint as it was, so not starting it is the same run without the cost of starting two queries. Answered
    for a ``segments`` source (its files' sizes and complete batches, read on the driver); any other source, or a
    doubt, answers False: the queries run and decide."""
    from offsets_audit.sources.options import text_options
    from offsets_audit.sources.segments_stream import nothing_past

    if str(source.get("kind") or "").lower() != "segments" or not source.get("path"):
        return False
    options = text_options({k: v for k, v in source.items() if k not in ("kind", "path", "reader") and v is not None})
    options["path"] = str(source["path"])
    try:
        return all(nothing_past(options, _committed_source_offset(f"{checkpoint}/{query}")) for query in QUERIES)
    except (OSError, ValueError, UserError):
        return False


def _run_query(df, checkpoint: str, write_batch) -> list[int]:
    """Run ``df`` with ``Trigger.AvailableNow`` through ``write_batch(batch_df, batch_id)``; returns the ids of the
    micro-batches it ran, read from the query's commit log: on Spark Connect ``write_batch`` runs in the server's
    Python worker, so nothing it records in this process's memory comes back."""
    before = _committed_batches(checkpoint)
    for attempt in range(1, RESUME_ATTEMPTS + 1):
        query = _start_query(df.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
                             .trigger(availableNow=True))
        try:
            query.awaitTermination()
            break
        except Exception as error:  # noqa: BLE001 - only the late worker is tried again
            # A Python worker the driver starts for the query (the Python stream source's reader, the stateful
            # processor) must connect back within a fixed wait a busy machine can outlast. The query's checkpoint
            # makes a restart resume where it stopped, as after a crash: no micro-batch is lost or doubled.
            if _WORKER_LATE not in str(error) or attempt == RESUME_ATTEMPTS:
                raise
            print(f"offsets-audit: note: a Python worker of the streaming query was late to start (attempt "
                  f"{attempt} of {RESUME_ATTEMPTS}); resuming the query from its checkpoint", file=sys.stderr)
    return sorted(_committed_batches(checkpoint) - before)


#: How Spark says a Python process it started did not connect back in time (it waits 10 s for it, a wait a busy
#: machine can outlast): a Spark Connect server's ``foreachBatch`` function (the query has not started then) or
#: a Python stream source's reader on the driver (the query stops).
_WORKER_LATE = "Python worker failed to connect back"
#: Starts of a query tried before its error is raised.
START_ATTEMPTS = 3
#: Runs of a query stopped by a late worker, resumed from its checkpoint, before its error is raised: each late
#: worker left behind still loads the machine the next one starts on.
RESUME_ATTEMPTS = 5


def _start_query(writer):
    """``writer.start()``, tried again when a Spark Connect server's ``foreachBatch`` worker was late to start."""
    import sys

    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return writer.start()
        except Exception as error:  # noqa: BLE001 - only the late worker is tried again
            if _WORKER_LATE not in str(error) or attempt == START_ATTEMPTS:
                raise
            print(f"offsets-audit: note: the server's foreachBatch worker was late to start "
                  f"(attempt {attempt} of {START_ATTEMPTS}); starting the query again", file=sys.stderr)
    raise AssertionError("unreachable")


def run_fold_query(spark, decoded, checkpoint: str, extension=None) -> list[int]:
    """The ``fold`` query (see ``fold_processor_class`` for ``extension``): returns the micro-batch ids it ran."""
    folded = fold_input(decoded).groupBy("group_id").transformWithStateInPandas(
        statefulProcessor=fold_processor_class(extension)(), outputStructType=FOLD_OUTPUT_DDL, outputMode="Append",
        timeMode="None")
    rows_root = f"{checkpoint}/fold_rows"

    def write(batch_df, batch_id):
        # static: a replayed batch replaces the whole folder (and a _SUCCESS marks it complete)
        batch_df.write.mode("overwrite").option("partitionOverwriteMode", "static").partitionBy("kind") \
            .parquet(f"{rows_root}/batch={batch_id}")

    return _run_query(folded, f"{checkpoint}/{QUERIES[0]}", write)


def run_records_query(spark, decoded, checkpoint: str) -> list[int]:
    """The ``records`` query (offsets snapshot, quarantine, record counts): returns the micro-batch ids it ran.

    Per micro-batch N: ``PATH/quarantine/batch=N`` (the quarantined rows), ``PATH/counts/batch=N.json`` (rows per
    record type and error code, unreadable stretches and the records they lost, as ``job``'s summary counts them,
    and the newest record time of a group: the audit's clock) and ``PATH/offsets_state/batch=N``."""
    from pyspark.sql import functions as F

    state_root = f"{checkpoint}/offsets_state"
    counts_root = Path(_local(checkpoint)) / "counts"

    def write(batch_df, batch_id):
        batch_df = batch_df.persist()
        try:
            unreadable = F.col("read_error_code").isNotNull()
            counts = batch_df.groupBy("record_name", "error_code", unreadable.alias("unreadable")).agg(
                F.count("*").alias("n"), F.sum(F.coalesce(F.col("records_lost"), F.lit(0))).alias("lost"),
                F.max(F.when(F.col("group_id").isNotNull() & ~unreadable,
                             record_time_ms())).alias("clock")).collect()
            batch_df.filter(F.col("error_code").isNotNull()).write.mode("overwrite") \
                .parquet(f"{checkpoint}/quarantine/batch={batch_id}")
            earlier = [b for b in _batches(state_root) if b < batch_id]
            previous = (spark.read.schema(_OFFSETS_STATE_DDL).parquet(f"{state_root}/batch={earlier[-1]}") if earlier
                        else spark.createDataFrame([], _OFFSETS_STATE_DDL))
            log = resolve_commits(batch_df, previous).persist()
            try:
                offsets_snapshot(log).write.mode("overwrite").parquet(f"{state_root}/batch={batch_id}")
                commit_log_of_batch(log).write.mode("overwrite").parquet(f"{checkpoint}/commit_log/batch={batch_id}")
            finally:
                log.unpersist()
            # last: a count file marks the micro-batch's outputs complete
            _write_json(counts_root / f"batch={batch_id}.json",
                        {"rows": [[r["record_name"], r["error_code"], bool(r["unreadable"]), r["n"], r["lost"] or 0]
                                  for r in counts],
                         "clock": max((r["clock"] for r in counts if r["clock"] is not None), default=None)})
        finally:
            batch_df.unpersist()
        for old in earlier[:-1]:
            _remove_tree(Path(_local(state_root)) / f"batch={old}")

    return _run_query(decoded, f"{checkpoint}/{QUERIES[1]}", write)


#: Outcomes of a commit carried in from an earlier micro-batch's snapshot that this micro-batch decided.
_DECIDED_HERE = ("txn_committed", "txn_aborted", "txn_cleared", "txn_replaced")


def commit_log_of_batch(log):
    """What a micro-batch adds to the resolved commit log (``commit_log.COMMIT_LOG_DDL``): its own commits, and
    the pending transactional commits carried in from the snapshot before it that it decided (their marker or
    the tombstone clearing them is in this micro-batch; ``carried`` stays true, their record time is not known
    here). The committed winners carried in are the snapshot's, not news, and stay out: O(new commits)."""
    from pyspark.sql import functions as F

    return log.filter(~F.col("carried") | F.col("outcome").isin(*_DECIDED_HERE))


def commit_log_rows(spark, checkpoint: str, batches: list[int]):
    """The ``commit_log_of_batch`` rows of the ``records`` micro-batches ``batches``, with their ``batch``
    (None when none of them has any)."""
    from pyspark.sql import functions as F

    from offsets_audit.replay.commit_log import COMMIT_LOG_DDL

    root = Path(_local(checkpoint)) / "commit_log"
    if not any((root / f"batch={b}").is_dir() for b in batches):
        return None
    return (spark.read.schema(COMMIT_LOG_DDL + ", batch long").parquet(f"{checkpoint}/commit_log")
            .filter(F.col("batch").isin(*batches)))


def drop_commit_log_before(checkpoint: str, first_needed: int) -> list[int]:
    """Remove ``PATH/commit_log/batch=N`` for every N < ``first_needed`` (the first ``records`` micro-batch of the
    last published run: a rerun of that run covers its batches again, later runs only newer ones, and no run
    reads an older micro-batch's commits, the offset rules carrying their state in ``offset_rules/``). Called
    after a run is published; a crash half-way leaves folders the next run removes. Returns the ids removed."""
    root = Path(_local(checkpoint)) / "commit_log"
    if not root.is_dir():
        return []
    removed = []
    for child in root.iterdir():
        match = re.fullmatch(r"batch=(\d+)", child.name)
        if match and int(match.group(1)) < first_needed:
            _remove_tree(child)
            removed.append(int(match.group(1)))
    return sorted(removed)


def record_counts(checkpoint: str, batches) -> dict:
    """Record counts of the ``records`` micro-batches ``batches`` (``job``'s ``records`` summary: ``read =
    decoded + quarantined``; unreadable stretches are quarantine rows that lost ``records_lost`` offsets) and
    ``clock``: the newest record time of a group in them (None when none)."""
    folder = Path(_local(checkpoint)) / "counts"
    by_type: dict = {}
    by_error: dict = {}
    decoded = quarantined = unreadable = lost = 0
    clock = None
    for batch_id in batches:
        data = _read_json(folder / f"batch={batch_id}.json", {"rows": [], "clock": None})
        if data.get("clock") is not None:
            clock = data["clock"] if clock is None else max(clock, data["clock"])
        for name, error, is_unreadable, n, n_lost in data["rows"]:
            if error is not None:
                by_error[error] = by_error.get(error, 0) + n
            if is_unreadable:
                unreadable += n
                lost += n_lost
            elif error is None:
                decoded += n
                by_type[name or "?"] = by_type.get(name or "?", 0) + n
            else:
                quarantined += n
    return {"read": decoded + quarantined, "decoded": decoded, "quarantined": quarantined,
            "unreadable": unreadable, "records_lost": lost, "by_record_type": dict(sorted(by_type.items())),
            "by_error_code": dict(sorted(by_error.items())), "clock": clock}


def counted_batches(checkpoint: str) -> list[int]:
    """Ids of the ``records`` micro-batches whose outputs are complete (their count file exists), ascending."""
    folder = Path(_local(checkpoint)) / "counts"
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for f in folder.iterdir() if (m := re.fullmatch(r"batch=(\d+)\.json", f.name)))


def fold_batches(checkpoint: str) -> list[int]:
    """Ids of the complete ``fold`` micro-batches (their rows folder has ``_SUCCESS``), ascending."""
    return _batches(f"{checkpoint}/fold_rows")


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# -- the tables of a run, from the checkpoint -------------------------------------------------------------------

def fold_rows(spark, checkpoint: str, batches: list[int]):
    """The ``fold`` query's output rows (``group_id``, ``kind``, ``payload``, ``batch``) of ``batches``."""
    from pyspark.sql import functions as F

    if not batches:
        return spark.createDataFrame([], _FOLD_ROWS_SCHEMA_DDL)
    return (spark.read.schema(_FOLD_ROWS_SCHEMA_DDL).parquet(f"{checkpoint}/fold_rows")
            .filter(F.col("batch").isin(*batches)))


def parsed(rows, kind: str, ddl: str):
    """Rows of ``kind`` as columns of ``ddl`` (the payloads are JSON), with their ``batch``."""
    from pyspark.sql import functions as F

    return rows.filter(F.col("kind") == kind).select("batch", F.from_json("payload", ddl).alias("r")) \
        .select("r.*", "batch")


def latest_per_group(rows, *kinds: str):
    """Each group's rows of ``kinds`` from the newest batch that has any (the group's current state)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    of_kind = rows.filter(F.col("kind").isin(*kinds))
    return (of_kind.withColumn("_last", F.max("batch").over(Window.partitionBy("group_id")))
            .filter(F.col("batch") == F.col("_last")).drop("_last"))


def newest_state_and_members(rows):
    """``(state, members)``: each group's newest ``state`` row and the ``member`` rows of that same batch."""
    from pyspark.sql import functions as F

    state = latest_per_group(rows, "state")
    members = rows.filter(F.col("kind") == "member").join(state.select("group_id", "batch"), ["group_id", "batch"])
    return state, members


def quarantine_rows(spark, checkpoint: str, batches: list[int]):
    """The quarantined rows of the ``records`` micro-batches ``batches`` (None when there are none)."""
    paths = [f"{checkpoint}/quarantine/batch={b}" for b in batches
             if (Path(_local(checkpoint)) / "quarantine" / f"batch={b}").is_dir()]
    return spark.read.parquet(*paths) if paths else None


def replay_tables(spark, checkpoint: str, fold_range: list[int], history, record_range: list[int]):
    """The run's ``ReplayTables`` (the batch replay's contract, ``replay.spark.replay``) and its quarantined rows
    (None when none): ``group_events`` and ``target_assignments`` of the micro-batches in ``fold_range`` /
    ``record_range`` (what is new), the current ``group_state``, ``members`` (each group's newest rows in
    ``history``: ``history_rows``) and ``offsets`` (the newest
    snapshot; None before any). ``offset_commits`` is None: the whole log's commits are not resolved by an
    incremental run."""

    from offsets_audit.replay.spark import (
        EVENTS_DDL,
        GROUP_STATE_DDL,
        MEMBERS_DDL,
        TARGET_ASSIGNMENTS_DDL,
        ReplayTables,
    )

    new = fold_rows(spark, checkpoint, fold_range)
    events = parsed(new, "event", EVENTS_DDL).drop("batch")
    quarantine = quarantine_rows(spark, checkpoint, record_range)
    latest, members = newest_state_and_members(history)
    offsets = None
    state_batches = _batches(f"{checkpoint}/offsets_state")
    if state_batches:
        snapshot = spark.read.schema(_OFFSETS_STATE_DDL).parquet(
            f"{checkpoint}/offsets_state/batch={state_batches[-1]}")
        offsets = offsets_table(snapshot)
    replayed = ReplayTables(
        group_state=parsed(latest, "state", GROUP_STATE_DDL).drop("batch"),
        members=parsed(members, "member", MEMBERS_DDL).drop("batch"),
        group_events=events,
        target_assignments=parsed(new, "target", TARGET_ASSIGNMENTS_DDL).drop("batch"),
        offsets=offsets,
        offset_commits=None,
    )
    return replayed, quarantine


# -- compaction: what later runs read of the micro-batches so far, one snapshot per run -------------------------

#: ``PATH/compact/run=<run_id>/``: ``rows`` (fold rows, partitioned by ``kind``: each group's newest ``state``,
#: ``member`` and ``audit_state`` rows, every ``target`` row when the run kept no assignor re-run state, and the
#: run's provisional tail as ``tail_finding`` / ``tail_rebalance`` / ``tail_horizon``) and ``gaps`` (where every
#: quarantined row lies: what ``audit.gaps.mark_data_gaps`` reads); a delta snapshot holds only what its run
#: changed (``DELTAS_BEFORE_FULL``).
COMPACT_FOLDER = "compact"
GAPS_DDL = "partition int, offset long, batch_base_offset long, group_id string"
#: The provisional tail's row kinds (``incremental.provisional_rows``) and their kinds in a compact snapshot;
#: ``horizon``: the clock at which a group's tail could change (``GroupAudit.provisional_until``).
TAIL_KINDS = {"finding": "tail_finding", "rebalance": "tail_rebalance", "horizon": "tail_horizon",
              "whatif": "tail_whatif"}


def renamed_kinds(mapping: dict[str, str]):
    """A ``kind`` column with each kind in ``mapping`` renamed (any other kind kept)."""
    from pyspark.sql import functions as F

    column = F.col("kind")
    for old, new in mapping.items():
        column = F.when(F.col("kind") == old, F.lit(new)).otherwise(column)
    return column


#: A run writes a *delta* snapshot (what it changed: the touched groups' newest rows, the tails it recomputed, its
#: new gaps and targets) on top of the last run's chain of snapshots, and a *full* one (every group) when the
#: chain already holds this many deltas, when it has none to build on, or when it recomputed every group's tail.
DELTAS_BEFORE_FULL = 7
#: Tail rows of a delta are written with their run's sequence number as ``batch`` (newer snapshots win per group);
#: ``tail_group`` marks a group whose tail the run recomputed, so an empty tail replaces an older one.
TAIL_MARKER = "tail_group"


def snapshot_chain(runs: list[dict]) -> list[str]:
    """The compact snapshots (run ids, oldest first: a full snapshot, then the deltas on it) that hold the past
    after the published ``runs``; empty when the last run wrote none."""
    if not runs or not runs[-1].get("compact"):
        return []
    return list(runs[-1].get("chain") or [runs[-1]["run_id"]])


def _chain_paths(checkpoint: str, chain: list[str], part: str) -> list[str]:
    return [f"{checkpoint}/{COMPACT_FOLDER}/run={r}/{part}" for r in chain]


def history_rows(spark, checkpoint: str, chain: list[str], fold_range: list[int], all_fold: list[int]):
    """Every fold row a run reads of the past: the last published run's chain of compact snapshots
    (``snapshot_chain``) plus this run's micro-batches (O(groups + new)), or, for a checkpoint whose last run
    wrote no snapshot, every fold micro-batch so far. The completed rebalances of earlier runs are not in it
    (``stored_rebalances``), but for those of a snapshot written before the store: the next run stores them."""
    if not chain:
        return fold_rows(spark, checkpoint, all_fold)
    rows = fold_rows(spark, checkpoint, fold_range)
    # One read per snapshot: Spark infers the ``kind`` partitions of several roots in one read only when they
    # look alike (a delta may hold only some kinds, or none).
    for path in reversed(_chain_paths(checkpoint, chain, "rows")):
        rows = spark.read.schema(_FOLD_ROWS_SCHEMA_DDL).parquet(path).unionByName(rows)
    return rows


def gap_rows(quarantined):
    """The columns of quarantine rows ``audit.gaps.mark_data_gaps`` reads (``GAPS_DDL``)."""
    from pyspark.sql import functions as F

    return quarantined.select(*[F.col(c.split()[0]).cast(c.split()[1]) for c in GAPS_DDL.split(", ")])


def new_gaps(spark, checkpoint: str, record_range: list[int]):
    """``GAPS_DDL`` rows of the quarantined rows of this run's micro-batches."""
    new = quarantine_rows(spark, checkpoint, record_range)
    return gap_rows(new) if new is not None else spark.createDataFrame([], GAPS_DDL)


def gaps_so_far(spark, checkpoint: str, chain: list[str], record_range: list[int], all_records: list[int]):
    """``GAPS_DDL`` rows of every quarantined row up to this run's micro-batches: the snapshots' plus this
    run's (or, without a snapshot, every quarantine micro-batch so far)."""
    last = max(record_range, default=-1)
    if not chain:
        quarantined = quarantine_rows(spark, checkpoint, [b for b in all_records if b <= last])
        return gap_rows(quarantined) if quarantined is not None else spark.createDataFrame([], GAPS_DDL)
    gaps = spark.read.schema(GAPS_DDL).parquet(*_chain_paths(checkpoint, chain, "gaps"))
    new = quarantine_rows(spark, checkpoint, record_range)
    return gaps if new is None else gaps.unionByName(gap_rows(new))


def latest_tails(history):
    """Each group's provisional tail rows (``kind`` still ``tail_*``) from the newest snapshot that recomputed the
    group (a full snapshot's rows, or a later delta's)."""
    from pyspark.sql import functions as F

    return latest_per_group(history, TAIL_MARKER, *TAIL_KINDS.values()).filter(F.col("kind") != TAIL_MARKER)


def compact_rows(rows, tail, keep_targets: bool, sequence: int, recomputed=None):
    """The ``rows`` of a compact snapshot (``COMPACT_FOLDER``), ``tail`` being the run's provisional rows
    (``kind``, ``group_id``, ``payload``). A full snapshot: ``rows`` is the run's ``history_rows`` and ``tail``
    every group's. A delta: ``rows`` is the run's new fold rows, ``tail`` the rows of the groups it recomputed
    and ``recomputed`` those groups (marked, so that an empty tail replaces an older one). Tail rows carry the
    run's ``sequence`` as ``batch``."""
    from pyspark.sql import functions as F

    state, members = newest_state_and_members(rows)
    kept = ["target"] if keep_targets else ["-"]
    columns = ["group_id", "payload", "batch", "kind"]
    out = (state.select(*columns)
           .unionByName(members.select(*columns))
           .unionByName(latest_per_group(rows, "audit_state").select(*columns))
           .unionByName(rows.filter(F.col("kind").isin(*kept)).select(*columns))
           .unionByName(tail.select("group_id", "payload", F.lit(sequence).cast("long").alias("batch"),
                                    renamed_kinds(TAIL_KINDS).alias("kind"))))
    if recomputed is not None:
        out = out.unionByName(recomputed.select("group_id", F.lit("").alias("payload"),
                                                F.lit(sequence).cast("long").alias("batch"),
                                                F.lit(TAIL_MARKER).alias("kind")))
    return out


# -- the completed rebalances, append-only -----------------------------------------------------------------------

#: ``PATH/rebalances/run=<run_id>/day=<day>/``: the completed rebalances (fold rows of kind ``rebalance``) each run
#: added, by day. No run rewrites an earlier run's, and ``latency_daily`` reads only the days its run touches.
REBALANCE_STORE = "rebalances"
_STORED_REBALANCE_DDL = "group_id string, payload string, batch long"


def stored_rebalances(spark, checkpoint: str, run_ids: list[str], days: list[str]):
    """The fold rows (kind ``rebalance``) that the runs ``run_ids`` stored for ``days``: the folders are
    picked by name (O(runs × days) stats), so nothing else is listed or read."""
    from pyspark.sql import functions as F

    root = local_folder(checkpoint) / REBALANCE_STORE
    paths = [f"{checkpoint}/{REBALANCE_STORE}/run={r}/day={d}" for r in run_ids for d in days
             if (root / f"run={r}" / f"day={d}").is_dir()]
    if not paths:
        return spark.createDataFrame([], _FOLD_ROWS_SCHEMA_DDL)
    return spark.read.schema(_STORED_REBALANCE_DDL).parquet(*paths).withColumn("kind", F.lit("rebalance"))


def write_rebalances(checkpoint: str, run_id: str, rows) -> None:
    """Store the completed rebalances of a run (``rows``: fold rows; a rerun of the run id replaces them)."""
    from pyspark.sql import functions as F

    _remove_tree(local_folder(checkpoint) / REBALANCE_STORE / f"run={run_id}")
    (rows.filter(F.col("kind") == "rebalance")
     .select("group_id", "payload", "batch", F.get_json_object("payload", "$.day").alias("day"))
     .write.mode("overwrite").partitionBy("day").parquet(f"{checkpoint}/{REBALANCE_STORE}/run={run_id}"))


def write_compact(spark, checkpoint: str, run_id: str, rows, gaps) -> None:
    """Write a run's compact snapshot (few files: O(groups + rebalances + quarantined rows), read by the next
    run instead of the micro-batches)."""
    folder = f"{checkpoint}/{COMPACT_FOLDER}/run={run_id}"
    files = default_parallelism(spark)
    rows.coalesce(files).write.mode("overwrite").partitionBy("kind").parquet(f"{folder}/rows")
    gaps.coalesce(1).write.mode("overwrite").parquet(f"{folder}/gaps")


def write_empty_delta(checkpoint: str, run_id: str) -> None:
    """Write what ``write_compact`` and ``write_rebalances`` write for a run that changed nothing (a delta snapshot
    without rows, no quarantined row, no completed rebalance), as plain files: no Spark job for three empty
    writes. A partitioned write without rows leaves its folder with only ``_SUCCESS``; the gaps, one empty
    Parquet file with their schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = {"int": pa.int32(), "long": pa.int64(), "string": pa.string()}
    root = local_folder(checkpoint)
    folders = [root / COMPACT_FOLDER / f"run={run_id}" / "rows", root / COMPACT_FOLDER / f"run={run_id}" / "gaps",
               root / REBALANCE_STORE / f"run={run_id}"]
    _remove_tree(root / COMPACT_FOLDER / f"run={run_id}")
    _remove_tree(root / REBALANCE_STORE / f"run={run_id}")
    for folder in folders:
        folder.mkdir(parents=True)
    schema = pa.schema([(name, arrow[kind]) for name, kind in (c.split() for c in GAPS_DDL.split(", "))])
    pq.write_table(schema.empty_table(), str(folders[1] / "part-00000-empty.snappy.parquet"), compression="snappy")
    for folder in folders:
        (folder / "_SUCCESS").touch()


def drop_batches_before(checkpoint: str, first_fold: int, first_records: int) -> None:
    """Remove ``fold_rows/batch=N`` before ``first_fold`` and ``quarantine/batch=N``, ``counts/batch=N.json``
    before ``first_records``: once a run's compact snapshot is published, only its own micro-batches are read
    again (by a rerun of it, with the snapshot of the run before) and later runs read newer ones."""
    root = Path(_local(checkpoint))
    for folder, first in (("fold_rows", first_fold), ("quarantine", first_records), ("counts", first_records)):
        if not (root / folder).is_dir():
            continue
        for child in (root / folder).iterdir():
            match = re.fullmatch(r"batch=(\d+)(\.json)?", child.name)
            if match and int(match.group(1)) < first:
                if child.is_dir():
                    _remove_tree(child)
                else:
                    child.unlink(missing_ok=True)


def check_locations(output_path: str, checkpoint: str) -> None:
    """One line before any Spark work when the checkpoint or output cannot serve an incremental run."""
    for path in (checkpoint, output_path):
        if "://" in path and not path.startswith("file://"):
            raise UserError(f"--incremental needs local folders, got {path}",
                            fix="pass a local --checkpoint and output.path")
    root = Path(_local(checkpoint))
    if root.exists() and not root.is_dir():
        raise UserError(f"checkpoint {checkpoint} is a file, not a folder", fix="pass --checkpoint a folder")


def local_folder(path: str) -> Path:
    """A local path of a ``file://`` URI or plain path."""
    return Path(_local(path))


def read_json(path: Path, default):
    return _read_json(path, default)


def write_json(path: Path, data) -> None:
    _write_json(path, data)
