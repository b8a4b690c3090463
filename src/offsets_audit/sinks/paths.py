"""Where the sinks put a table and one run's rows: shared by the table formats, the run manifest and the
report writer."""

from __future__ import annotations

import re

from offsets_audit.errors import UserError

#: A run id names files and folders (``summary/<id>.json``, ``_runs/<id>.json``, ``run_id=<id>``): letters,
#: digits, ``.``, ``_``, ``-``, a letter or digit first (a leading dot would hide the manifest), nothing that
#: separates or climbs paths.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_id(run_id) -> str:
    """``run_id`` when it can name the run's files, else a ``UserError`` (one line) saying what a run id may be."""
    text = str(run_id) if run_id is not None else ""
    if not RUN_ID.fullmatch(text) or ".." in text:
        raise UserError(f"run id {text!r} cannot name the run's files",
                        fix="use letters, digits, '.', '_' and '-' (a letter or digit first, no '..', at most 128 "
                            "characters), e.g. --run-id 2026-11-22")
    return text


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
