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
import time
from pathlib import Path

import pandas as pd

from offsets_audit.errors import UserError
from offsets_audit.replay.spark import OFFSETS_STATE_DDL as _OFFSETS_STATE_DDL
from offsets_audit.replay.spark import fold_frame, merge_offsets, offsets_table, state_rows

FOLD_OUTPUT_DDL = "group_id string, kind string, payload string"
_FOLD_ROWS_SCHEMA_DDL = "group_id string, payload string, batch long, kind string"
_COMMIT_TYPES = (0, 1)


# -- the fold, one group's micro-batch at a time -----------------------------------------------------------

def ordered_group_rows(pdf: pd.DataFrame) -> pd.DataFrame:
    """Sort by (partition, offset) and drop an offset commit that follows another commit: the fold only needs a
    commit to (re)create a simple classic group, which can only happen right after a group record."""
    pdf = pdf.sort_values(["partition", "offset"], kind="stable")
    is_commit = pdf["record_type"].isin(_COMMIT_TYPES)
    return pdf[~(is_commit & is_commit.shift(1, fill_value=False))]


def _processor_class():
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    from offsets_audit.replay.fold import GroupFold

    class GroupFoldProcessor(StatefulProcessor):
        """Per group id: ``GroupFold`` state in a ValueState, fed each micro-batch's records in log order."""

        def init(self, handle) -> None:
            self.fold_state = handle.getValueState("group_fold", StructType([StructField("fold", BinaryType())]))

        def handleInputRows(self, key, rows, timerValues):
            group_id = key[0]
            pdf = ordered_group_rows(pd.concat(list(rows), ignore_index=True))
            fold = GroupFold.from_bytes(bytes(self.fold_state.get()[0])) if self.fold_state.exists() \
                else GroupFold(group_id)
            out = fold_frame(fold, pdf) + state_rows(fold)
            self.fold_state.update((fold.to_bytes(),))
            yield pd.DataFrame(out, columns=["kind", "group_id", "payload"])[["group_id", "kind", "payload"]]

        def close(self) -> None:
            pass

    return GroupFoldProcessor


def fold_input(decoded):
    """The rows the fold needs: decodable group records and non-tombstone offset commits of a group."""
    from pyspark.sql import functions as F

    rows = decoded.filter(
        (F.coalesce(F.col("is_control"), F.lit(False)) == F.lit(False))
        & F.col("error_code").isNull() & F.col("group_id").isNotNull())
    is_commit = F.col("record_type").isin(*_COMMIT_TYPES)
    return rows.filter(~is_commit | F.col("value").isNotNull()).select(
        "group_id", "key", "value", "partition", "offset", "record_type",
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("timestamp_ms"))


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

def read_stream(spark, source: dict):
    """A streaming DataFrame with SOURCE_SCHEMA's columns from a source config (see ``sources.read``)."""
    from pyspark.sql import functions as F

    from offsets_audit.sources import register
    from offsets_audit.sources.options import required_path, text_options
    from offsets_audit.sources.schema import KAFKA_COLUMNS, KAFKA_SCHEMA, as_source_schema

    kind = str(source.get("kind") or "").lower()
    options = text_options({k: v for k, v in source.items() if k not in ("kind", "path", "reader") and v is not None})
    if kind == "segments":
        path = required_path(source, kind)
        register(spark)
        return as_source_schema(spark.readStream.format("kafka-segments").options(**options).load(path))
    if kind == "parquet":
        path = required_path(source, kind)
        schema = spark.read.parquet(path).schema
        df = spark.readStream.schema(schema).options(**options).parquet(path)
        for field in KAFKA_SCHEMA.fields:
            if field.name not in df.columns:
                df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
        return as_source_schema(df)
    if kind == "kafka":
        from offsets_audit.sources.kafka import DEFAULT_TOPIC

        lowered = {k.lower() for k in options}
        if not {"subscribe", "assign", "subscribepattern"} & lowered:
            options["subscribe"] = DEFAULT_TOPIC
        if "kafka.isolation.level" not in lowered:
            options["kafka.isolation.level"] = "read_committed"
        return as_source_schema(spark.readStream.format("kafka").options(**options).load().select(*KAFKA_COLUMNS))
    raise UserError(f"source kind {source.get('kind')!r} is unknown", fix="set source kind to kafka, parquet or segments")


def _run_query(df, checkpoint: str, write_batch) -> list[int]:
    """Run ``df`` with ``Trigger.AvailableNow`` through ``write_batch(batch_df, batch_id)``; returns batch ids."""
    seen: list[int] = []

    def each(batch_df, batch_id):
        write_batch(batch_df, batch_id)
        seen.append(batch_id)

    query = (df.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return seen


def run_fold_query(spark, decoded, checkpoint: str) -> list[int]:
    """The ``fold`` query: returns the micro-batch ids it ran."""
    folded = fold_input(decoded).groupBy("group_id").transformWithStateInPandas(
        statefulProcessor=_processor_class()(), outputStructType=FOLD_OUTPUT_DDL, outputMode="Append",
        timeMode="None")
    rows_root = f"{checkpoint}/fold_rows"

    def write(batch_df, batch_id):
        # static: a replayed batch replaces the whole folder (and a _SUCCESS marks it complete)
        batch_df.write.mode("overwrite").option("partitionOverwriteMode", "static").partitionBy("kind") \
            .parquet(f"{rows_root}/batch={batch_id}")

    return _run_query(folded, f"{checkpoint}/fold", write)


def run_records_query(spark, decoded, checkpoint: str, output: str) -> list[int]:
    """The ``records`` query (offsets snapshot, quarantine, record counts): returns the micro-batch ids it ran."""
    from pyspark.sql import functions as F

    state_root = f"{checkpoint}/offsets_state"
    counts_root = Path(_local(checkpoint)) / "counts"

    def write(batch_df, batch_id):
        batch_df = batch_df.persist()
        try:
            counts = batch_df.groupBy("record_name", "error_code").agg(F.count("*").alias("n")).collect()
            _write_json(counts_root / f"batch={batch_id}.json",
                        [[r["record_name"], r["error_code"], r["n"]] for r in counts])
            batch_df.filter(F.col("error_code").isNotNull()).write.mode("overwrite") \
                .parquet(f"{output}/quarantine/batch={batch_id}")
            earlier = [b for b in _batches(state_root) if b < batch_id]
            previous = (spark.read.schema(_OFFSETS_STATE_DDL).parquet(f"{state_root}/batch={earlier[-1]}") if earlier
                        else spark.createDataFrame([], _OFFSETS_STATE_DDL))
            merge_offsets(previous, batch_df).write.mode("overwrite").parquet(f"{state_root}/batch={batch_id}")
        finally:
            batch_df.unpersist()
        for old in earlier[:-1]:
            _remove_tree(Path(_local(state_root)) / f"batch={old}")

    return _run_query(decoded, f"{checkpoint}/records", write)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# -- materialising the output tables ---------------------------------------------------------------------------

def materialize(spark, checkpoint: str, output: str) -> dict[str, str]:
    """Write the output tables from the checkpoint's per-batch rows; returns table -> path."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from offsets_audit.replay.spark import EVENTS_DDL, GROUP_STATE_DDL, MEMBERS_DDL, TARGET_ASSIGNMENTS_DDL

    marker = Path(_local(checkpoint)) / "materialized.json"
    done = _read_json(marker, {"fold": -1, "records": -1})
    fold_batches = _batches(f"{checkpoint}/fold_rows")
    record_batches = _batches(f"{output}/quarantine")
    paths: dict[str, str] = {}

    def parsed(rows, ddl):
        return rows.select("batch", F.from_json("payload", ddl).alias("r")).select("r.*", "batch")

    def append(df, table, by):
        path = f"{output}/{table}"
        df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(*by).parquet(path)
        paths[table] = path

    if fold_batches:
        rows = spark.read.schema(_FOLD_ROWS_SCHEMA_DDL).parquet(f"{checkpoint}/fold_rows")
        new = rows.filter(F.col("batch") > done["fold"])
        events = parsed(new.filter(F.col("kind") == "event"), EVENTS_DDL).withColumn("query", F.lit("fold"))
        append(events, "group_events", ["query", "batch"])
        append(parsed(new.filter(F.col("kind") == "target"), TARGET_ASSIGNMENTS_DDL), "target_assignments", ["batch"])
        states = rows.filter(F.col("kind") == "state")
        latest = states.withColumn("_last", F.max("batch").over(Window.partitionBy("group_id"))) \
            .filter(F.col("batch") == F.col("_last")).drop("_last")
        _overwrite(parsed(latest, GROUP_STATE_DDL).drop("batch"), f"{output}/group_state")
        members = rows.filter(F.col("kind") == "member").join(latest.select("group_id", "batch"), ["group_id", "batch"])
        _overwrite(parsed(members, MEMBERS_DDL).drop("batch"), f"{output}/members")
        paths.update(group_state=f"{output}/group_state", members=f"{output}/members")
    if record_batches:
        quarantine = spark.read.parquet(f"{output}/quarantine").filter(F.col("batch") > done["records"])
        undecodable = quarantine.select(
            F.col("partition").cast("int"), F.col("offset").cast("long"),
            (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("timestamp"),
            F.col("group_id"), F.lit(None).cast("string").alias("group_type"), F.lit("replay_anomaly").alias("event"),
            F.lit(None).cast("string").alias("member_id"),
            F.to_json(F.struct(F.lit("undecodable record").alias("reason"), F.col("error_code"),
                               F.col("error_message").alias("error"))).alias("details"),
            "batch", F.lit("records").alias("query"))
        append(undecodable, "group_events", ["query", "batch"])
        paths["quarantine"] = f"{output}/quarantine"
    state_batches = _batches(f"{checkpoint}/offsets_state")
    if state_batches:
        snapshot = spark.read.schema(_OFFSETS_STATE_DDL).parquet(f"{checkpoint}/offsets_state/batch={state_batches[-1]}")
        _overwrite(offsets_table(snapshot), f"{output}/offsets")
        paths["offsets"] = f"{output}/offsets"
    _write_json(marker, {"fold": fold_batches[-1] if fold_batches else done["fold"],
                         "records": record_batches[-1] if record_batches else done["records"]})
    return paths


def _overwrite(df, path: str) -> None:
    """Replace a small state table: written beside it, then swapped in (a kill leaves the old or the new one)."""
    local = Path(_local(path))
    staging = local.with_name(local.name + ".next")
    df.write.mode("overwrite").parquet(str(staging))
    old = local.with_name(local.name + ".old")
    _remove_tree(old)
    if local.exists():
        os.replace(local, old)
    os.replace(staging, local)
    _remove_tree(old)


def read_tables(spark, output: str) -> dict:
    """The incremental output tables as DataFrames in the batch replay's layouts (partition columns dropped)."""
    from offsets_audit.replay.spark import EVENTS_DDL, TARGET_ASSIGNMENTS_DDL

    schemas = {"group_events": EVENTS_DDL + ", query string, batch long",
               "target_assignments": TARGET_ASSIGNMENTS_DDL + ", batch long"}
    tables = {}
    for name in ("group_state", "members", "group_events", "target_assignments", "offsets"):
        path = Path(_local(output)) / name
        if path.is_dir():
            reader = spark.read.schema(schemas[name]) if name in schemas else spark.read
            df = reader.parquet(str(path))
            tables[name] = df.drop(*[c for c in ("query", "batch") if c in df.columns])
    return tables


# -- the job ---------------------------------------------------------------------------------------------------

def run_incremental(spark, config: dict, checkpoint: str, *, progress: bool = True) -> dict:
    """Run the incremental replay over ``config``'s source until caught up; returns a summary like ``run_job``'s."""
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.sources.options import source_config

    output = config["output"]["path"]
    if config["output"].get("format", "parquet") != "parquet":
        raise UserError("--incremental writes Parquet tables only",
                        fix="set output.format to parquet for incremental runs")
    for path in (checkpoint, output):
        if "://" in path and not path.startswith("file://"):
            raise UserError(f"--incremental needs local folders, got {path}",
                            fix="pass a local --checkpoint and output.path")
    Path(_local(checkpoint)).mkdir(parents=True, exist_ok=True)
    spark.streams  # noqa: B018 - creates the state store coordinator transformWithStateInPandas needs
    timings: dict[str, float] = {}

    def log(message):
        if progress:
            print(f"[offsets-audit] {message}", file=sys.stderr, flush=True)

    source = source_config(config)
    started = time.perf_counter()
    log("incremental fold ...")
    fold_batches = run_fold_query(spark, codec_spark.decode(read_stream(spark, source)), checkpoint)
    timings["fold"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    log("incremental offsets ...")
    record_batches = run_records_query(spark, codec_spark.decode(read_stream(spark, source)), checkpoint, output)
    timings["offsets"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    log("materialise tables ...")
    paths = materialize(spark, checkpoint, output)
    timings["write"] = round(time.perf_counter() - started, 3)
    summary = {
        "run_id": config["run_id"], "mode": "incremental", "checkpoint": checkpoint,
        "batches": {"fold": fold_batches, "records": record_batches},
        "records": _counts(Path(_local(checkpoint)) / "counts", record_batches),
        "timings_s": timings, "tables": paths,
    }
    if paths.get("group_state"):
        from pyspark.sql import functions as F

        state = spark.read.parquet(paths["group_state"])
        summary["groups"] = {r["group_type"] or "?": r["n"]
                             for r in state.groupBy("group_type").agg(F.count("*").alias("n")).collect()}
    return summary


def _counts(folder: Path, batches: list[int]) -> dict:
    """This run's record counts (``run_job``'s ``records`` summary) from the per-batch count files."""
    by_type: dict = {}
    by_error: dict = {}
    decoded = quarantined = 0
    for batch_id in batches:
        for name, error, n in _read_json(folder / f"batch={batch_id}.json", []):
            if error is None:
                decoded += n
                by_type[name or "?"] = by_type.get(name or "?", 0) + n
            else:
                quarantined += n
                by_error[error] = by_error.get(error, 0) + n
    return {"read": decoded + quarantined, "decoded": decoded, "quarantined": quarantined,
            "by_record_type": dict(sorted(by_type.items())), "by_error_code": dict(sorted(by_error.items()))}
