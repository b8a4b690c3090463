"""Parquet dumps: a copy of ``__consumer_offsets`` taken once (``offsets-audit dump`` or any Spark job that
saved the Kafka source's columns) and audited many times.

A dump needs Spark Kafka-source columns; ``key``, ``value``, ``partition`` and ``offset`` are required,
``topic``/``timestamp``/``timestampType`` and the batch attributes are added as nulls when absent, and any
extra columns are kept after SOURCE_SCHEMA's.
"""

from __future__ import annotations

from typing import Iterable

from offsets_audit.errors import UserError
from offsets_audit.sources.schema import KAFKA_SCHEMA, SOURCE_SCHEMA, with_batch_columns

#: Without these a record cannot be decoded or ordered.
REQUIRED_COLUMNS = ("key", "value", "partition", "offset")


def missing_columns(columns: Iterable[str]) -> list[str]:
    present = set(columns)
    return [name for name in REQUIRED_COLUMNS if name not in present]


#: ``(file, size, mtime_ns)`` of the files whose every row group was read whole in this process: the preflight and
#: the read that follows it check a file once.
_VERIFIED: set[tuple[str, int, int]] = set()

#: ``verifyRowGroups: auto`` reads every row group before Spark only for dumps up to this size: beyond it the
#: check would be a second full read of the input on the driver's one thread,
#: which a nightly job over hundreds of millions of records cannot afford; footers are still checked.
ROW_GROUP_CHECK_AUTO_MAX_BYTES = 1 << 30

#: The Parquet source's own option (not passed to Spark's reader): ``auto`` (default), ``true`` or ``false``.
VERIFY_ROW_GROUPS_OPTION = "verifyRowGroups"


def row_group_check(options: dict | None) -> str:
    """``auto``, ``true`` or ``false``: the ``verifyRowGroups`` option of a Parquet source (any key case)."""
    for key, value in (options or {}).items():
        if str(key).lower() == VERIFY_ROW_GROUPS_OPTION.lower() and value is not None:
            return str(value).strip().lower()
    return "auto"


def spark_reader_options(options: dict | None) -> dict:
    """``options`` without the Parquet source's own ones (what Spark's reader receives)."""
    return {k: v for k, v in (options or {}).items() if str(k).lower() != VERIFY_ROW_GROUPS_OPTION.lower()}


def dump_files(path: str) -> list[str] | None:
    """The files Spark reads of a local dump ``path`` (a file, or a folder's files but those whose name or folder
    starts with ``_`` or ``.``), in order; None for a remote path."""
    import os
    from urllib.parse import urlparse

    if urlparse(path).scheme not in ("", "file"):
        return None
    local = path.removeprefix("file://")
    if os.path.isfile(local):
        return [local]
    files = []
    for folder, dirs, names in os.walk(local, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        files += [os.path.join(folder, n) for n in sorted(names) if not n.startswith(("_", "."))]
    return files


def local_dump_bytes(path: str) -> int | None:
    """The bytes of the files Spark reads of a local dump ``path``; None for a remote path."""
    import os

    files = dump_files(path)
    return None if files is None else sum(os.path.getsize(f) for f in files if os.path.isfile(f))


def check_parquet_files(path: str, *, row_groups: str | bool = "auto") -> int:
    """Check every file Spark would read under a local ``path``; return how many there are.

    A file that is not Parquet (a ``notes.txt`` left in the dump folder), whose footer is damaged (a copy cut
    short) or whose data behind an intact footer is damaged (a bad disk block, a bit flip in a compressed page)
    would fail the Spark job at the write stage with a long Java stack trace; here it is one line naming the file
    (and the row group), before any Spark work. With ``row_groups`` every row group is read and dropped, one at a
    time, with Parquet's page checksums verified where the writer stored them (Spark does not verify them, so a
    flipped bit in an uncompressed page would otherwise reach the decoder as a wrong byte); without it only footers
    are read (a few KiB per file). ``"auto"`` reads row groups when the dump holds at most
    ``ROW_GROUP_CHECK_AUTO_MAX_BYTES`` and says so on stderr when it does not. Files Spark skips (names starting with ``_`` or ``.``, e.g. ``_SUCCESS``,
    ``.part-0.crc``) are skipped here too. Remote paths are left to Spark.
    """
    import os

    import pyarrow.parquet as pq

    files = dump_files(path)
    if files is None:
        return 0
    if row_groups == "auto":
        total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        row_groups = total <= ROW_GROUP_CHECK_AUTO_MAX_BYTES
        if not row_groups:
            import sys

            print(f"offsets-audit: note: the Parquet dump {path} holds {total / (1 << 30):.1f} GiB: only footers are "
                  "checked before Spark (set source.options.verifyRowGroups: true to read every row group first)",
                  file=sys.stderr)
    else:
        row_groups = row_groups in (True, "true")
    seen: dict[tuple, str] = {}
    for file in files:
        try:
            with open(file, "rb") as handle:
                head = handle.read(4)
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - 4))
                tail = handle.read(4)
            if head != b"PAR1" or tail != b"PAR1":
                reason = "it does not start and end with Parquet's PAR1 marker"
                if size >= 4 and head == b"PAR1":
                    reason = "it is cut short (no Parquet footer at its end)"
                raise ValueError(reason)
            parquet_file = pq.ParquetFile(file, page_checksum_verification=True)  # parses the footer
            metadata = parquet_file.metadata
        except OSError as exc:
            raise UserError(f"cannot read {file} in the Parquet dump {path}: {exc.strerror or exc}",
                            fix="check the file's permissions, or move it out of the dump folder") from None
        except Exception as exc:  # noqa: BLE001 - any footer pyarrow cannot parse is a bad file, named here
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(f"{file} in the Parquet dump {path} is not a readable Parquet file ({detail})",
                            fix="move it out of the dump folder, or write the dump again with `offsets-audit dump`"
                            ) from None
        if row_groups:
            _read_row_groups(file, path, parquet_file, size)
        check_timestamp_text(file, path, parquet_file, whole=bool(row_groups))
        fingerprint = _fingerprint(file, metadata)
        if fingerprint is not None:
            if fingerprint in seen:
                raise UserError(f"{file} and {seen[fingerprint]} hold the same records (partition, offsets and row "
                                "count), so they would be read twice",
                                fix="remove the copy from the dump folder")
            seen[fingerprint] = file
    return len(files)


def _read_row_groups(file: str, path: str, parquet_file, size: int) -> None:
    """Read every row group of ``file`` whole (then drop it), or raise a ``UserError`` naming the first bad one."""
    import os

    key = (file, size, os.stat(file).st_mtime_ns)
    if key in _VERIFIED:
        return
    metadata = parquet_file.metadata
    for group in range(metadata.num_row_groups):
        try:
            parquet_file.read_row_group(group, use_threads=False)
        except Exception as exc:  # noqa: BLE001 - any error pyarrow raises on the data is a damaged file
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            rows = metadata.row_group(group).num_rows
            raise UserError(
                f"{file} in the Parquet dump {path}: row group {group + 1} of {metadata.num_row_groups} ({rows:,} "
                f"rows) cannot be read ({detail}); its footer is intact, so the data behind it is damaged",
                fix="restore the file (or write the dump again with `offsets-audit dump`), or move it out of the dump "
                    "folder to audit the rest without its rows") from None
    _VERIFIED.add(key)


def _fingerprint(file: str, metadata) -> tuple | None:
    """``(partition, first offset, last offset, rows)`` from a file's footer statistics, when it has them: two files
    with the same fingerprint are copies of each other (a file duplicated inside a dump)."""
    import re

    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    if "offset" not in names or metadata.num_rows == 0:
        return None
    column = names.index("offset")
    low = high = None
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    match = re.search(r"(?:^|/)partition=(-?\d+)(?:/|$)", file)
    partition = int(match.group(1)) if match else None
    if partition is None and "partition" in names:
        stats = metadata.row_group(0).column(names.index("partition")).statistics
        partition = stats.min if stats is not None and stats.has_min_max else None
    return partition, low, high, metadata.num_rows


#: A dump's ``timestamp`` written as text: whole numbers are epoch milliseconds (how Kafka's tools and JSON
#: exports print a record's time), anything else an ISO-8601 date-time.
_EPOCH_MS_TEXT = r"^\s*-?[0-9]+\s*$"


def record_time(df):
    """``df`` with its ``timestamp`` column as Spark's timestamp type: a timestamp as it is; whole numbers (or text
    of them) as epoch milliseconds, as Kafka's record times are (Spark's own cast would read them as seconds);
    other text as an ISO-8601 date-time."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType, StringType, TimestampType

    if "timestamp" not in df.columns:
        return df
    kind = df.schema["timestamp"].dataType
    column = F.col("timestamp")
    if isinstance(kind, TimestampType):
        return df
    if isinstance(kind, IntegralType):
        return df.withColumn("timestamp", F.timestamp_millis(column.cast("long")))
    if isinstance(kind, StringType):
        return df.withColumn("timestamp", F.when(column.rlike(_EPOCH_MS_TEXT),
                                                 F.timestamp_millis(F.trim(column).cast("long")))
                             .otherwise(column.cast("timestamp")))
    return df


def check_timestamp_text(file: str, path: str, parquet_file, whole: bool = True) -> None:
    """A ``UserError`` naming ``file`` when its ``timestamp`` column is text that is neither epoch milliseconds nor
    an ISO-8601 date-time (Spark would fail on it half-way through the run); without ``whole`` only its first row
    group is read (a dump too big to read twice)."""
    import re
    from datetime import datetime

    import pyarrow as pa

    schema = parquet_file.schema_arrow
    if "timestamp" not in schema.names or not pa.types.is_string(schema.field("timestamp").type):
        return
    for group in range(parquet_file.metadata.num_row_groups if whole else min(1, parquet_file.metadata.num_row_groups)):
        for value in parquet_file.read_row_group(group, columns=["timestamp"]).column(0).to_pylist():
            if value is None or re.match(_EPOCH_MS_TEXT, value):
                continue
            try:
                datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise UserError(f"{file} in the Parquet dump {path}: timestamp {value[:40]!r} is neither epoch "
                                "milliseconds nor an ISO-8601 date-time",
                                fix="write timestamp as a Parquet timestamp, epoch milliseconds or ISO-8601 text "
                                    "(e.g. with `offsets-audit dump`)") from None


def read_parquet(spark, path: str, options: dict | None = None):
    """Read a Parquet dump as a DataFrame with SOURCE_SCHEMA's columns first (typed as SOURCE_SCHEMA)."""
    from pyspark.sql import functions as F

    check_parquet_files(path, row_groups=row_group_check(options))
    options = spark_reader_options(options)
    reader = spark.read
    if options:
        from offsets_audit.sources.options import option_text

        reader = reader.options(**{k: option_text(v) for k, v in options.items()})
    try:
        df = reader.parquet(path)
    except Exception as exc:  # AnalysisException on classic Spark and Spark Connect alike
        text = str(exc)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            raise UserError(f"Parquet dump {path} does not exist",
                            fix="set path to a directory written by `offsets-audit dump`") from None
        if "UNABLE_TO_INFER_SCHEMA" in text:
            raise UserError(f"{path} holds no Parquet files",
                            fix="point path at a dump directory written by `offsets-audit dump`") from None
        raise
    missing = missing_columns(df.columns)
    if missing:
        raise UserError(
            f"Parquet dump {path} has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            fix="dump the Kafka source's columns (key, value, topic, partition, offset, timestamp, timestampType), "
                "e.g. with `offsets-audit dump`")
    for field in KAFKA_SCHEMA.fields:
        if field.name not in df.columns:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    df = with_batch_columns(record_time(df))
    typed = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in SOURCE_SCHEMA.fields]
    extras = [F.col(f"`{name}`") for name in df.columns if name not in SOURCE_SCHEMA.fieldNames()]
    return df.select(*typed, *extras)
