"""Sinks: write the audit's tables idempotently (a rerun of a run id replaces that run's rows)."""

from __future__ import annotations

from offsets_audit.errors import UserError
from offsets_audit.sinks.paths import table_path

__all__ = ["table_path", "write_table", "write_text_file"]


def write_table(df, output_path: str, table: str, run_id: str, fmt: str = "parquet") -> str:
    """Write ``df`` as table ``table`` under ``output_path``, tagged with ``run_id``; returns the table path."""
    if fmt == "parquet":
        from offsets_audit.sinks.parquet import write_parquet_table
        return write_parquet_table(df, output_path, table, run_id)
    if fmt == "delta":
        from offsets_audit.sinks.delta import write_delta_table
        return write_delta_table(df, output_path, table, run_id)
    raise UserError(f"unknown output format {fmt!r}", fix="set output.format to parquet or delta")


def write_text_file(spark, output_path: str, relative: str, text: str) -> str:
    """Write a small text file (the HTML report, the run summary) under ``output_path``.

    Local paths are written directly; other URIs (``s3://``, ``abfss://``, ``dbfs:/``...) through the
    Hadoop FileSystem the Spark session is configured with, so the report lands beside the tables.
    """
    from pathlib import Path

    if "://" not in output_path or output_path.startswith("file://"):
        local = Path(output_path.replace("file://", "")) / relative
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text, encoding="utf-8")
        return str(local)
    target = output_path.rstrip("/") + "/" + relative
    try:
        jvm = spark.sparkContext._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(target)
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        stream = fs.create(hadoop_path, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
    except Exception as exc:  # Spark Connect has no JVM gateway on the client
        raise UserError(f"cannot write {target}: {exc.__class__.__name__}",
                        fix="use a local or mounted output.path, or set output.html_report: false") from None
    return target
