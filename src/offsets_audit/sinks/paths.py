"""Where the sinks put a table: shared by the table formats and the report writer."""

from __future__ import annotations


def table_path(output_path: str, table: str) -> str:
    return output_path.rstrip("/") + "/" + table
