"""Where the sinks put a table and one run's rows: shared by the table formats, the run manifest and the
report writer."""

from __future__ import annotations

# The characters Spark escapes in a partition folder name (``ExternalCatalogUtils.escapePathName``), so the
# folders written here are the ones Spark's partition discovery and writers use.
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def escape_partition_value(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def table_path(output_path: str, table: str) -> str:
    return output_path.rstrip("/") + "/" + table


def partition_path(output_path: str, table: str, run_id: str) -> str:
    """The folder of one run's rows in a Parquet table."""
    return f"{table_path(output_path, table)}/run_id={escape_partition_value(run_id)}"
