"""Sinks: write the audit's tables idempotently (a rerun of a run id replaces that run's rows)."""

from __future__ import annotations

from offsets_audit.errors import UserError


def write_table(df, output_path: str, table: str, run_id: str, fmt: str = "parquet") -> str:
    """Write ``df`` as table ``table`` under ``output_path``, tagged with ``run_id``; returns the table path."""
    if fmt == "parquet":
        from offsets_audit.sinks.parquet import write_parquet_table
        return write_parquet_table(df, output_path, table, run_id)
    if fmt == "delta":
        from offsets_audit.sinks.delta import write_delta_table
        return write_delta_table(df, output_path, table, run_id)
    raise UserError(f"unknown output format {fmt!r}", fix="set output.format to parquet or delta")


def table_path(output_path: str, table: str) -> str:
    return output_path.rstrip("/") + "/" + table
