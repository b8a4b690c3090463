"""The audit job: source -> decode -> replay -> assignor audit -> audit -> sinks.

One function, ``run_job(spark, settings)``, serves ``offsets-audit run``, ``jobs/nightly_audit.py`` under
spark-submit, the demo and notebooks. Every heavy step is a Spark transformation; the driver only plans,
collects the small summary and writes the HTML report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import Any

from offsets_audit.config import load_settings, redacted, source_config
from offsets_audit.errors import UserError
from offsets_audit.plans import cached_leaf, is_persisted, materialize, plain_execution_for_a_small_log, side_by_side
from offsets_audit.settings import Settings
from offsets_audit.sinks.summary import RecordCounts, RunSummary, write_summary
from offsets_audit.spark_session import frees_its_plans
from offsets_audit.stages import RunStages


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The job's own arguments (commands.check has its own help and choices).
    parser.add_argument("--config", help="YAML config overriding conf/defaults.yaml (e.g. conf/nightly.yaml)")
    parser.add_argument("--input", help="override source.path")
    parser.add_argument("--input-format", choices=["segments", "parquet", "kafka"], help="override source.kind")
    parser.add_argument("--bootstrap-server", help="kafka source: kafka.bootstrap.servers")
    parser.add_argument("--output", help="override output.path")
    parser.add_argument("--output-format", choices=["parquet", "delta"], help="override output.format")
    parser.add_argument("--output-catalog", metavar="CATALOG.SCHEMA",
                        help="override output.catalog: write the tables by name, <catalog>.<schema>.<table>")
    parser.add_argument("--run-id", help="override run_id (a rerun with the same id replaces its rows)")
    parser.add_argument("--topic-metadata", help="topic-metadata snapshot file (JSON or Parquet)")
    parser.add_argument("--group-configs", help="group configs snapshot (capture-group-configs; JSON or Parquet)")
    parser.add_argument("--incremental", action="store_true",
                        help="replay only what is new since the last run, state kept in --checkpoint")
    parser.add_argument("--checkpoint", help="checkpoint folder for --incremental")


def overrides_from_args(args) -> dict:
    overrides: dict = {}
    source: dict = {}
    if getattr(args, "input", None):
        source["path"] = args.input
    if getattr(args, "input_format", None):
        source["kind"] = args.input_format
    if getattr(args, "bootstrap_server", None):
        source["kind"] = "kafka"
        source["options"] = {"kafka.bootstrap.servers": args.bootstrap_server}
    if source:
        overrides["source"] = source
    output: dict = {}
    if getattr(args, "output", None):
        output["path"] = args.output
    if getattr(args, "output_format", None):
        output["format"] = args.output_format
    if getattr(args, "output_catalog", None):
        output["catalog"] = args.output_catalog
    if output:
        overrides["output"] = output
    if getattr(args, "run_id", None):
        overrides["run_id"] = args.run_id
    if getattr(args, "topic_metadata", None):
        overrides["topic_metadata"] = {"source": "file", "path": args.topic_metadata}
    if getattr(args, "group_configs", None):
        overrides["broker"] = {"group_configs": args.group_configs}
    return overrides


@frees_its_plans
def run_job(spark, settings: Settings, *, progress: bool = True) -> RunSummary:
    """Run the whole audit once (batch) and return its summary (also written as summary.json).

    The stages in order, each timed by the run's one ``RunStages`` and ending at a boundary (what it produced
    persisted and counted), so that its time is the work it did and the next stage plans over its cache."""
    from offsets_audit import sinks
    from offsets_audit.group_configs import with_group_configs
    from offsets_audit.lease import leased

    sinks.check_run_id(settings.run_id)
    output = sinks_output(settings)
    output.check()
    # The run holds its output folder's lease throughout (``offsets_audit.lease``): a second run writing the same
    # output stops with one line naming this one, and never removes this run's staging folders as leftovers.
    with leased((output.path, "output"), run_id=settings.run_id), output.leased(spark, settings.run_id):
        try:
            # Group configs are not in the log: read the snapshot (or capture it from a live source) on the driver,
            # before any Spark work, so a wrong path fails at once and the rules get plain data.
            return _run_job(spark, with_group_configs(settings), progress=progress)
        except BaseException:
            # What the run staged and never swapped in goes (a full disk gets its room back); its manifest is
            # not written, so the run reads as incomplete until a rerun completes it.
            sinks.discard_staged(spark, output.path, settings.run_id, output.format)
            raise


def _run_job(spark, settings: Settings, *, progress: bool) -> RunSummary:
    stages = RunStages(progress=progress)
    try:
        with stages.stage("read+decode"):
            log = read_and_decode(spark, settings, stages)
        restore = plain_execution_for_a_small_log(spark, log.counts["decoded"], settings.spark.conf)
        if restore is not None:
            stages.on_release(restore)
        with stages.stage("replay"):
            replayed, end_time_ms = replay(log, stages)
        with stages.stage("assignor-audit"):
            assignor_audit = rerun_assignors(spark, settings, replayed, stages)
        with stages.stage("audit"):
            audited = audit(settings, log, replayed, assignor_audit, end_time_ms, stages)
        with stages.stage("write"):
            figures, paths = write(spark, settings, output_tables(settings, log, replayed, assignor_audit, audited),
                                   stages)
        summary = publish(spark, settings, log, figures, paths, stages)
        # The run manifest last, after every table, the summary and the report: a run stopped before it is
        # incomplete, never complete with an older summary or a cut report.
        sinks_output(settings).complete_run(spark, settings.run_id, paths)
        return summary
    finally:
        stages.release()


@dataclass(frozen=True)
class DecodedLog:
    """What the read+decode stage hands on: the decoded records, the quarantine rows, the log's tallies
    (``_tallies``), the run's record counts (``_counts``) and the input's report (files read and skipped, notes)."""

    decoded: Any
    quarantined: Any
    tallies: Any
    counts: dict
    input_report: dict


def read_and_decode(spark, settings: Settings, stages: RunStages) -> DecodedLog:
    """Read the source and decode every record once; tally the log (its counts, the pending rule's clock)."""
    from offsets_audit.codec import source as codec_source
    from offsets_audit.codec import spark as codec_spark

    input_report: dict = {}
    # with_decoded_record: the replay folds group records from the codec's decoded form (one decode each);
    # compact: a run that does not write the decoded table never builds what only that table holds
    keep_all = settings.output.write_decoded
    # pack_commits: the commits marked mid-run after a commit, most of a healthy log, are cached a few rows per
    # key and Kafka batch, not one row each (``codec.packing``)
    decoded_all = codec_source.read_decoded(spark, source_config(settings), report=input_report,
                                           with_decoded_record=True, compact=not keep_all,
                                           pack_commits=not keep_all)
    if not keep_all:
        decoded_all = codec_spark.compact(decoded_all)
    decoded_all = stages.kept(decoded_all)
    # One aggregate over the whole log: the run's counts, and the pending rule's clock per block of offsets
    tallies = stages.kept(_tallies(decoded_all))
    counts = _counts(tallies)  # computes the cache
    # Later stages plan over the cache, not over the read and decode (``cached_leaf``): every DataFrame
    # operation re-analyses the whole plan on the driver, and they are a few hundred.
    decoded_all, tallies = cached_leaf(decoded_all), cached_leaf(tallies)
    decoded, quarantined = codec_spark.split(decoded_all)
    return DecodedLog(decoded=decoded, quarantined=codec_spark.without_decoded_record(quarantined), tallies=tallies,
                      counts=counts, input_report=input_report)


def replay(log: DecodedLog, stages: RunStages):
    """``(tables, end_time_ms)``: the replay's tables (``replay.spark.ReplayTables``), materialised, and the log's
    end as the audit measures it (``audit.spark.log_times``), taken in the same Spark action.

    What the replay computes is the fold's rows and the commit log's digest (the offsets table and the audit's offset
    rules read it; the whole log is never kept: ``ReplayTables``); its tables are views of them."""
    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.replay import spark as replay_spark

    replayed = replay_spark.replay(log.decoded, whole_log=False)
    stages.on_release(replayed.release)  # before materialising: a failure half-way still frees its caches
    replayed, end_time_ms = _materialized_tables(replayed, "replay", stages, latest=audit_spark.log_times(replayed))
    return replayed.map(cached_leaf), end_time_ms


def rerun_assignors(spark, settings: Settings, replayed, stages: RunStages):
    """The assignor re-runs over the replay's target assignments, materialised (``None`` when
    ``assignors.audit`` is off)."""
    assignor_audit = _assignor_audit(spark, settings, replayed)
    if assignor_audit is None:
        return None
    assignor_audit = _materialized(assignor_audit)
    stages.on_release(assignor_audit.unpersist)
    return cached_leaf(assignor_audit)


def audit(settings: Settings, log: DecodedLog, replayed, assignor_audit, end_time_ms: int | None, stages: RunStages):
    """The audit's tables (``audit.spark.AuditTables``), materialised; ``end_time_ms``: the log's end (``replay``)."""
    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.audit.offsets_spark import clock_blocks

    counts = log.counts
    audited = audit_spark.audit(replayed, assignor_audit, settings, quarantined=log.quarantined,
                                records=counts["decoded"], clock_blocks=clock_blocks(log.tallies),
                                end_time_ms=end_time_ms,
                                nothing_quarantined=not (counts["quarantined"] or counts["unreadable"]))
    stages.on_release(audited.release)  # before materialising: a failure half-way still frees its caches
    return _materialized_tables(audited, "audit", stages)[0].map(cached_leaf)


def output_tables(settings: Settings, log: DecodedLog, replayed, assignor_audit, audited) -> dict:
    """Every output table by name; decoded only when ``output.write_decoded`` asks for it."""
    from offsets_audit.codec import spark as codec_spark

    from offsets_audit.assignors.rerun import TIMING_COLUMN

    decoded = {"decoded": codec_spark.without_decoded_record(log.decoded)} if settings.output.write_decoded else {}
    # The re-runs' timing fed the coordinator load; it is not a column of the table (a clock reading).
    if assignor_audit is not None:
        assignor_audit = assignor_audit.drop(TIMING_COLUMN)
    return {**replayed.as_dict(outputs_only=True), "assignor_audit": assignor_audit, **audited.as_dict(),
            "quarantine": log.quarantined, **decoded}


def write(spark, settings: Settings, tables: dict, stages: RunStages) -> tuple[dict, dict]:
    """``(figures, paths)``: every table written, empty or not (``sinks.Output.write_run``; the manifest comes after
    the summary and the report, ``run_job``),
    and the summary's figures (``sinks.summary.run_figures``, a few small jobs over the cached tables) computed
    beside the writes, which mostly wait on file commits (their time: ``write:summary_figures``)."""
    from offsets_audit.sinks.summary import run_figures

    done = side_by_side({"summary_figures": lambda: run_figures(tables), "tables": lambda: sinks_output(
        settings).write_run(spark, settings.run_id, tables, timings=stages.timings, manifest=False)}, workers=2)
    (figures, figures_s), (paths, _) = done["summary_figures"], done["tables"]
    stages.record("write:summary_figures", figures_s)
    return figures, paths


def publish(spark, settings: Settings, log: DecodedLog, figures: dict, paths: dict,
            stages: RunStages) -> RunSummary:
    """The run's summary, its HTML report (``output.html_report``) and ``summary/<run_id>.json``."""
    summary = RunSummary(run_id=settings.run_id, records=RecordCounts.of(log.counts), timings_s=stages.timings,
                         tables=paths).with_figures(figures)
    summary.input = log.input_report
    write_summary(spark, settings, summary)
    return summary


def _materialized(df):
    """``df`` persisted and computed now (a stage boundary); one already persisted is left as it is."""
    if is_persisted(df):
        return df
    df = df.persist()
    df.count()
    return df


def _materialized_tables(tables, stage: str, stages: RunStages, latest=None):
    """``(tables, greatest)``: ``tables`` (a ``StageTables``) with each table but the lazy ones persisted, and they and
    the stage's cached intermediates computed in one Spark action (``plans.materialize``, which also takes the
    greatest value of ``latest``), its time as ``"<stage>:tables"``. The caller has registered ``tables.release``
    with ``stages`` first (a failure half-way still frees the caches)."""
    before = tables.as_dict()
    fresh = {name: df.persist() for name, df in before.items()
             if df is not None and name not in tables.lazy() and not is_persisted(df)}
    tables = dataclasses.replace(tables, **fresh)
    # The tables persisted here, freed when the run ends, unless the caller's release of ``tables`` frees them
    # already (``persist`` returns the frame itself): on Spark Connect each unpersist is a round trip.
    persisted_anew = [df for name, df in fresh.items() if df is not before[name]]
    if persisted_anew:
        stages.on_release(lambda: [df.unpersist() for df in persisted_anew])
    with stages.part(f"{stage}:tables"):
        greatest = materialize([*fresh.values(), *getattr(tables, "cached", ())], latest=latest)
    return tables, greatest


def _assignor_audit(spark, settings: Settings, replayed):
    """The assignor re-runs over the replay's target assignments (``None`` when ``assignors.audit`` is off)."""
    if not settings.assignors.audit:
        return None
    from offsets_audit.assignors import spark as assignor_spark

    from offsets_audit.group_configs import assignor_choice

    choice = assignor_choice(settings.broker)
    return assignor_spark.audit(replayed.target_assignments, assignor_spark.topic_metadata(spark, settings),
                                what_if=assignor_spark.what_if_assignors(settings), offsets=replayed.offsets,
                                default_consumer_assignor=choice["consumer"] or "uniform",
                                streams_assignors=choice["streams"],
                                kafka_version=settings.broker.kafka_version)


def _tallies(decoded_all):
    """The decoded log tallied per ``record_name``, ``error_code``, ``unreadable`` (a row that stands for a stretch
    of bytes no source could read), record ``partition`` and ``_block`` of offsets (``offsets_spark.block_of``):
    ``n`` rows, ``lost`` records (unreadable rows), ``_top`` the latest record time (epoch ms). A few rows per block
    of 256 offsets: ``_counts`` sums them, and they bound the pending rule's clock (``offsets_spark.clock_blocks``),
    which otherwise aggregates the log's events once more.

    Packed commits (``codec.packing``) count one each, in one scan of the log: a row's (offset, time) pairs are
    exploded, its own or its packed commits' (which share every other column the tally reads), so the cache is not
    read twice and unioned as ``packing.unpacked`` would."""
    from pyspark.sql import functions as F

    from offsets_audit.audit.offsets_spark import block_of
    from offsets_audit.codec.spark import PACKED_COLUMN
    from offsets_audit.replay.commit_log import record_time_ms

    columns = set(decoded_all.columns)  # a log decoded from a frame no source read has neither read column
    unreadable = F.col("read_error_code").isNotNull() if "read_error_code" in columns else F.lit(False)
    lost = F.coalesce(F.col("records_lost"), F.lit(0)) if "records_lost" in columns else F.lit(0)
    position = F.array(F.struct(F.col("offset").alias("offset"), F.col("timestamp").alias("timestamp")))
    if PACKED_COLUMN in columns:
        packed = F.col(PACKED_COLUMN)
        position = F.when(packed.isNull(), position).otherwise(
            F.arrays_zip(packed["offset"].alias("offset"), packed["timestamp"].alias("timestamp")))
    records = decoded_all.select("record_name", "error_code", unreadable.alias("unreadable"), "partition",
                                 lost.alias("_lost"), F.explode(position).alias("_at"))
    return records.groupBy(
        "record_name", "error_code", "unreadable", "partition", block_of(F.col("_at.offset")).alias("_block")).agg(
        F.count("*").alias("n"), F.sum("_lost").alias("lost"),
        F.max(record_time_ms(F.col("_at.timestamp"))).alias("_top"))


def _counts(tallies) -> dict:
    """Records read, decoded and quarantined, and what unreadable input cost, from ``_tallies`` (one Spark job).

    ``read`` counts records (each with its offset); a stretch of bytes a source could not read at all is not a
    record but one ``unreadable`` quarantine row that says how many offsets it cost (``records_lost``). So
    ``read = decoded + quarantined`` and ``read + records_lost`` is the number of records the input held; the
    quarantine table holds ``quarantined + unreadable`` rows.
    """
    from pyspark.sql import functions as F

    rows = (tallies.groupBy("record_name", "error_code", "unreadable")
            .agg(F.sum("n").alias("n"), F.sum("lost").alias("lost")).collect())
    by_type: dict = {}
    by_error: dict = {}
    read = decoded = quarantined = unreadable = lost = 0
    for r in rows:
        if r["error_code"] is not None:
            by_error[r["error_code"]] = by_error.get(r["error_code"], 0) + r["n"]
        if r["unreadable"]:
            unreadable += r["n"]
            lost += r["lost"] or 0
            continue
        read += r["n"]
        if r["error_code"] is None:
            decoded += r["n"]
            by_type[r["record_name"] or "?"] = by_type.get(r["record_name"] or "?", 0) + r["n"]
        else:
            quarantined += r["n"]
    return {"read": read, "decoded": decoded, "quarantined": quarantined, "unreadable": unreadable,
            "records_lost": lost, "by_record_type": dict(sorted(by_type.items())),
            "by_error_code": dict(sorted(by_error.items()))}


def print_summary(summary: RunSummary, file=None) -> None:
    """The batch run's summary lines."""
    from offsets_audit.sinks.summary import (
        latency_quartet,
        print_groups_and_quarantine,
        print_records,
        print_rule_counts,
        print_timings,
    )

    file = file or sys.stdout  # looked up at call time: the stream may have been replaced since import
    print_records(summary, file)
    print_groups_and_quarantine(summary, file)
    print_rule_counts("findings", summary.findings, file)
    if summary.latency:
        print("rebalance latency (ms)        rebalances   to-assignment p50/p95/p99/max       convergence p50/p95/p99/max", file=file)
    for row in summary.latency or []:
        print(f"  {row.get('group_type') or '?':<27}{row.get('rebalances', 0):>11}   "
              f"{latency_quartet(row, 'time_to_assignment_ms'):<35}{latency_quartet(row, 'convergence_ms')}", file=file)
    print_timings(summary, file, " (per table in summary.json)")


def run(args) -> int:
    settings = load_settings(args.config, overrides_from_args(args))
    from offsets_audit.group_configs import with_group_configs
    from offsets_audit.lease import leased
    from offsets_audit.sources import preflight
    from offsets_audit.spark_session import get_spark

    output = sinks_output(settings)
    output.check()
    if args.incremental and not args.checkpoint:
        raise UserError("--incremental needs a checkpoint folder", fix="pass --checkpoint PATH")
    input_bytes = preflight(source_config(settings))  # a wrong path, option or input file: one line before Spark
    # The leases of what the run writes, before Spark starts: a second run of the same output or checkpoint stops
    # at once with one line naming the first (the job takes them again, for callers other than this command).
    folders = [(output.path, "output")] + ([(args.checkpoint, "checkpoint")] if args.incremental else [])
    with leased(*folders, run_id=settings.run_id):
        if args.incremental:
            from offsets_audit import incremental

            incremental.check_checkpoint(settings, args.checkpoint)  # another input, damage: one line, no Spark
            input_bytes = incremental.bytes_to_read(settings, args.checkpoint, input_bytes)
        if settings.broker.group_configs is not None:
            # A wrong --group-configs path fails here, before Spark starts. A live cluster's configs are fetched
            # by the run itself (run_job, run_incremental): once, so a cluster that refuses says so once.
            settings = with_group_configs(settings)
        spark = get_spark("offsets-audit", master=settings.spark.master, extra_conf=session_conf(settings),
                          input_bytes=input_bytes)
        if args.incremental:
            incremental.print_summary(incremental.run_incremental(spark, settings, args.checkpoint))
            return 0
        summary = run_job(spark, settings)
    print_summary(summary)
    return 0


def sinks_output(settings: Settings):
    """Where the run's tables are kept (``sinks.Output``): under ``output.path``, or by name with ``output.catalog``."""
    from offsets_audit.sinks import Output

    return Output.of(settings.output)


def session_conf(settings: Settings) -> dict[str, str]:
    """The settings' ``spark.conf`` as text; with tables by name, a session this process starts itself keeps its
    catalog in Spark's Hive metastore (``sinks.catalog.local_session_conf``). A session spark-submit or a cluster
    starts keeps its own catalog."""
    from offsets_audit.spark_session import launched_by_spark

    conf = settings.spark.conf_text()
    if sinks_output(settings).by_name and not launched_by_spark():
        from offsets_audit.sinks.catalog import local_session_conf

        conf = local_session_conf(conf)
    return conf


def describe(settings: Settings) -> str:
    return json.dumps(redacted(settings), indent=2)
