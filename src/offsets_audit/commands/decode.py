"""``offsets-audit decode``: raw ``__consumer_offsets`` rows -> ``OUTPUT/decoded`` + ``OUTPUT/quarantine`` Parquet."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from offsets_audit.errors import UserError

INPUT_FORMATS = ("parquet", "segments")


def add_arguments(parser) -> None:
    parser.add_argument("--input", required=True, help="Parquet dump (Kafka-source columns) or log segment directory")
    parser.add_argument("--input-format", choices=INPUT_FORMATS, default="parquet",
                        help="parquet (default) or segments (broker .log files)")
    parser.add_argument("--output", required=True, help="directory that receives decoded/ and quarantine/")
    parser.add_argument("--overwrite", action="store_true", help="replace existing decoded/ and quarantine/")
    parser.add_argument("--master", default=None, help="Spark master for a local run (default local[2])")


def _is_local(path: str) -> bool:
    return urlparse(path).scheme in ("", "file")


def _read_decoded(spark, path: str, input_format: str):
    """The input read and decoded (``codec.source.read_decoded``: segments in one Python pass)."""
    from offsets_audit.codec.source import read_decoded

    return read_decoded(spark, {"kind": input_format, "path": path})


def summarize(decoded_df) -> dict:
    """Records read / decoded / quarantined, the unreadable stretches and the records they cost, counts per record
    type and per error code, and the decoded rows with warnings per warning code (docs/decoding.md) (two Spark jobs
    over the persisted decode).

    As in ``run``'s summary: ``rows_read`` counts records (each with its offset) and equals ``decoded +
    quarantined``; a stretch of bytes a source could not read at all is no record but one ``unreadable`` row of the
    quarantine table saying how many offsets it cost (``records_lost``), so ``rows_read + records_lost`` is the
    number of records the input held.
    """
    from pyspark.sql import functions as F

    unreadable_row = F.col("read_error_code").isNotNull()
    groups = (decoded_df.groupBy("record_type", "record_name", "error_code", unreadable_row.alias("unreadable"))
              .agg(F.count(F.lit(1)).alias("n"), F.count("decode_warnings").alias("warned"),
                   F.sum(F.coalesce(F.col("records_lost"), F.lit(0))).alias("lost")).collect())
    summary: dict[str, Any] = {"rows_read": 0, "decoded": 0, "quarantined": 0, "unreadable": 0, "records_lost": 0,
               "decoded_with_warnings": 0, "per_record_type": {}, "per_error_code": {}, "per_warning_code": {}}
    for row in groups:
        n = row["n"]
        if row["error_code"] is not None:
            summary["per_error_code"][row["error_code"]] = summary["per_error_code"].get(row["error_code"], 0) + n
        if row["unreadable"]:
            summary["unreadable"] += n
            summary["records_lost"] += row["lost"] or 0
            continue
        summary["rows_read"] += n
        if row["error_code"] is None:
            summary["decoded"] += n
            summary["decoded_with_warnings"] += row["warned"]
            label = row["record_name"] if row["record_type"] is None else f"{row['record_type']} {row['record_name']}"
            summary["per_record_type"][label] = summary["per_record_type"].get(label, 0) + n
        else:
            summary["quarantined"] += n
    if summary["decoded_with_warnings"]:
        codes = (decoded_df.filter(F.col("decode_warnings").isNotNull())
                 .select(F.explode(F.array_distinct(F.col("decode_warnings.code"))).alias("code"))
                 .groupBy("code").count().collect())
        summary["per_warning_code"] = {row["code"]: row["count"] for row in codes}
    return summary


def format_summary(summary: dict) -> str:
    lines = [f"rows read:   {summary['rows_read']}", f"decoded:     {summary['decoded']}",
             f"quarantined: {summary['quarantined']}",
             f"unreadable:  {summary.get('unreadable', 0)} stretches of input (quarantine rows with a read_error_code), "
             f"records_lost {summary.get('records_lost', 0)}: rows read + records_lost = records the input held"]
    if summary.get("decoded_with_warnings"):
        lines.append(f"decoded with warnings (applied as Kafka applies them): {summary['decoded_with_warnings']}")
    if summary["per_record_type"]:
        lines.append("per record type:")
        lines += [f"  {name:<45} {n}" for name, n in sorted(summary["per_record_type"].items(),
                                                           key=lambda item: (len(item[0].split()[0]), item[0]))]
    if summary["per_error_code"]:
        lines.append("per error code:")
        lines += [f"  {code:<45} {n}" for code, n in sorted(summary["per_error_code"].items())]
    if summary.get("per_warning_code"):
        lines.append("records per warning code (docs/decoding.md):")
        lines += [f"  {code:<45} {n}" for code, n in sorted(summary["per_warning_code"].items())]
    return "\n".join(lines)


def _write_tables(spark, output: str, frames: dict, outputs: dict, *, overwrite: bool) -> None:
    """Write the tables into a staging folder under ``output`` and move them into place only when all are
    written: a failed run leaves no ``decoded/`` behind that would make a plain rerun refuse."""
    import uuid

    from offsets_audit.sinks.files import FileSystem

    fs = FileSystem(spark, output)
    if not fs.usable:   # Spark Connect on a remote store: Spark's own modes
        for name, df in frames.items():
            df.write.mode("overwrite" if overwrite else "error").parquet(outputs[name])
        return
    staging = f"{output.rstrip('/')}/_staging-{uuid.uuid4().hex}"
    try:
        for name, df in frames.items():
            df.write.parquet(f"{staging}/{name}")
        for name in frames:
            if fs.exists(outputs[name]):
                if not overwrite:
                    raise UserError(f"output {outputs[name]} already exists",
                                    fix="pass --overwrite or choose another --output")
                fs.delete(outputs[name])
            fs.rename(f"{staging}/{name}", outputs[name])
    finally:
        fs.delete(staging)


def run(args) -> int:
    from offsets_audit.codec.spark import split

    if _is_local(args.input) and not os.path.exists(args.input.removeprefix("file://")):
        raise UserError(f"input path {args.input} does not exist", fix="pass --input an existing Parquet dump or segment directory")
    outputs = {name: os.path.join(args.output, name) for name in ("decoded", "quarantine")}
    if not args.overwrite and _is_local(args.output):
        taken = [p for p in outputs.values() if os.path.exists(p.removeprefix("file://"))]
        if taken:
            raise UserError(f"output {taken[0]} already exists", fix="pass --overwrite or choose another --output")

    from offsets_audit.sources import preflight

    preflight({"kind": args.input_format, "path": args.input})  # a bad input file: one line before Spark starts

    from offsets_audit.spark_session import get_spark

    spark = get_spark("offsets-audit-decode", master=args.master)
    try:
        source = _read_decoded(spark, args.input, args.input_format)
    except UserError:
        raise
    except Exception as exc:  # a path Spark cannot read is a person's mistake, not a crash
        if type(exc).__name__ in ("AnalysisException", "PySparkException") or "PATH_NOT_FOUND" in str(exc):
            raise UserError(f"cannot read {args.input} as {args.input_format}: {str(exc).splitlines()[0]}",
                            fix="check --input and --input-format") from None
        raise
    decoded_df = source.persist()
    try:
        decoded, quarantined = split(decoded_df)
        _write_tables(spark, args.output, {"decoded": decoded, "quarantine": quarantined}, outputs,
                      overwrite=args.overwrite)
        summary = summarize(decoded_df)
    finally:
        decoded_df.unpersist()
    print(format_summary(summary))
    print(f"wrote {outputs['decoded']} and {outputs['quarantine']}")
    return 0
