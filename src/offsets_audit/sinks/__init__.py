"""Sinks: write a run's tables so that a rerun of a run id replaces everything that run wrote.

* Every table of ``offsets_audit.tables.TABLES`` is written on every run, with its schema, even with no
  rows, so readers never meet a missing table or have to infer a schema.
* A table's rows of one run are written aside and swapped in whole (Parquet: a staging folder renamed onto
  ``run_id=<id>``; Delta: one commit replacing the ``run_id`` partition), so a rerun replaces them, empty
  or not, and a killed run never leaves a half-written partition behind.
* A run manifest ``<output>/_runs/<run_id>.json`` is removed when a run starts writing and written when
  every table is in place: a run without one is incomplete (killed or failed), whatever its tables hold.
* With ``output.catalog`` the same contract holds for tables by name, ``<catalog>.<schema>.<table>``
  (``sinks.catalog``); ``Output`` says which way a run's tables are kept and reads and writes them either way.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Iterator

from offsets_audit.errors import UserError
from offsets_audit.plans import side_by_side
from offsets_audit.sinks.files import FileSystem, is_local, local_path
from offsets_audit.sinks.paths import check_run_id, escape_partition_value, partition_path, table_path

__all__ = ["Output", "check_output_path", "check_run_id", "complete_run", "discard_staged", "partition_path",
           "read_table", "remove_run", "table_path", "write_run",
           "write_table", "write_text_file"]

FORMATS = ("parquet", "delta")
RUNS_FOLDER = "_runs"


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(f"unknown output format {fmt!r}", fix="set output.format to parquet or delta")


def check_output_path(output_path: str) -> None:
    """A one-line error before any Spark work when a local output path cannot hold the tables: it is a
    file, lies under a file, or is a folder this user cannot write."""
    if not output_path:
        raise UserError("output.path is empty", fix="set output.path in the config or pass --output PATH")
    if not is_local(output_path):
        return
    path = os.path.abspath(local_path(output_path))
    if os.path.isfile(path):
        raise UserError(f"output path {output_path} is a file, not a folder",
                        fix="pass --output a folder (new or existing), not a file")
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if os.path.isfile(probe):
        raise UserError(f"output path {output_path} lies under the file {probe}",
                        fix="pass --output a folder that is not inside a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        from offsets_audit.lease import check_writable

        check_writable(probe, output_path, "output")  # says why: permissions or a read-only file system


def write_table(df, output_path: str, table: str, run_id: str, fmt: str = "parquet") -> str:
    """Write ``df`` as run ``run_id``'s rows of table ``table`` under ``output_path``, replacing any rows
    that run had there (also when ``df`` is empty); returns the table path.

    A table of ``offsets_audit.tables`` is written with exactly its schema (``tables.conform``)."""
    from offsets_audit import tables

    _check_format(fmt)
    if table in tables.TABLES:
        df = tables.conform(df, table)
    df = _as_few_tasks(df)
    if fmt == "parquet":
        from offsets_audit.sinks.parquet import write_parquet_table
        return write_parquet_table(df, output_path, table, run_id)
    from offsets_audit.sinks.delta import write_delta_table
    return write_delta_table(df, output_path, table, run_id)


def _as_few_tasks(df):
    """``df`` in one partition per core on a local session, which writes with that many tasks at once anyway: the
    run's tables are views of cached stage outputs partitioned for the stage that made them (four partitions a core
    for the per-group stages, most of them a handful of rows on a small input), and each partition was a task and a
    file of its own. Off a local master ``df`` is written as it is."""
    from offsets_audit.plans import session_cores

    cores = session_cores(df.sparkSession)
    return df if cores is None else df.coalesce(cores)


def remove_run(spark, output_path: str, table: str, run_id: str, fmt: str) -> None:
    """Remove run ``run_id``'s rows from ``table`` if it has any (a table this run no longer writes)."""
    _check_format(fmt)
    if fmt == "parquet":
        from offsets_audit.sinks.parquet import remove_parquet_run
        remove_parquet_run(spark, output_path, table, run_id)
    else:
        from offsets_audit.sinks.delta import remove_delta_run
        remove_delta_run(spark, output_path, table, run_id)


def discard_staged(spark, output_path: str, run_id: str, fmt: str) -> None:
    """After a failed run: remove what it staged and never swapped in (Parquet staging folders, half-written
    summary or report files), so a full disk gets its room back. Called with the run's lease held, so nothing of
    another run's is touched."""
    import contextlib

    from offsets_audit import tables

    if fmt == "parquet":
        from offsets_audit.sinks.parquet import discard_staged as discard_parquet

        for name in tables.TABLES:
            with contextlib.suppress(Exception):
                discard_parquet(spark, output_path, name, run_id)
    if is_local(output_path):
        root = local_path(output_path)
        for folder in ("summary", "report", RUNS_FOLDER):
            with contextlib.suppress(OSError):
                for name in os.listdir(os.path.join(root, folder)):
                    if name.startswith(".") and name.endswith(".tmp"):
                        os.remove(os.path.join(root, folder, name))


def read_table(spark, output_path: str, table: str, run_id: str, fmt: str):
    """Run ``run_id``'s rows of ``table`` (without the ``run_id`` column), read with the table's known
    schema: an empty table reads as an empty DataFrame. None when the table does not exist at all."""
    _check_format(fmt)
    if fmt == "parquet":
        from offsets_audit.sinks.parquet import read_parquet_run
        return read_parquet_run(spark, output_path, table, run_id)
    from offsets_audit.sinks.delta import read_delta_run
    return read_delta_run(spark, output_path, table, run_id)


# -- the run manifest ------------------------------------------------------------------------------

def manifest_path(output_path: str, run_id: str) -> str:
    return f"{output_path.rstrip('/')}/{RUNS_FOLDER}/{escape_partition_value(run_id)}.json"


def begin_run(spark, output_path: str, run_id: str) -> None:
    """Mark run ``run_id`` incomplete before its first table is replaced."""
    fs = FileSystem(spark, output_path)
    if fs.usable:
        fs.delete(manifest_path(output_path, run_id))


def complete_run(spark, output_path: str, run_id: str, fmt: str, paths: dict) -> str | None:
    """Mark run ``run_id`` complete: every table in ``paths`` holds its rows."""
    fs = FileSystem(spark, output_path)
    if not fs.usable:
        return None
    target = manifest_path(output_path, run_id)
    fs.write_text(target, json.dumps({
        "run_id": run_id, "format": fmt, "tables": paths,
        "completed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }, indent=2))
    return target


def run_manifest(spark, output_path: str, run_id: str) -> dict | None:
    """The manifest of a complete run, None when the run is incomplete or unknown."""
    fs = FileSystem(spark, output_path)
    text = fs.read_text(manifest_path(output_path, run_id)) if fs.usable else None
    return json.loads(text) if text else None


def complete_runs(spark, output_path: str) -> list[dict]:
    """Manifests of the complete runs under ``output_path``, oldest first."""
    fs = FileSystem(spark, output_path)
    if not fs.usable:
        return []
    folder = f"{output_path.rstrip('/')}/{RUNS_FOLDER}"
    manifests = []
    for name in fs.list_names(folder):
        if name.endswith(".json") and not name.startswith("."):
            text = fs.read_text(f"{folder}/{name}")
            if text:
                manifests.append(json.loads(text))
    return sorted(manifests, key=lambda m: (m.get("completed_at") or "", m.get("run_id") or ""))


def write_run(spark, output_path: str, run_id: str, fmt: str, frames: dict, *, timings: dict | None = None,
              manifest: bool = True, carried: dict[str, str] | None = None) -> dict:
    """Write every table of a run and (unless ``manifest`` is false: the caller writes it with ``complete_run``
    once everything else of the run is written) its manifest; returns {table: path}.

    ``frames`` maps a table name to its DataFrame, or to None for a table the run has no rows for (written
    empty with its schema). Tables of ``offsets_audit.tables`` missing from ``frames`` (``decoded`` when
    ``output.write_decoded`` is off) lose any rows an earlier run with this id left there. ``carried``
    (``{table: run id}``): tables whose frames are that run's rows read back, which the one-action Parquet writer
    copies as files (``write_parquet_run``); any other writer writes their frames.
    """
    from offsets_audit import tables

    _check_format(fmt)
    begin_run(spark, output_path, run_id)
    names = list(tables.TABLES) + [n for n in frames if n not in tables.TABLES]
    for name in names:
        if name not in frames:
            remove_run(spark, output_path, name, run_id, fmt)

    if fmt == "parquet":  # every table in one Spark action where the session's tasks share this file system
        from offsets_audit.sinks.parquet import write_parquet_run

        began = time.perf_counter()
        # A known table without rows goes as None: the writer writes its empty file without Spark work.
        paths = write_parquet_run(spark, output_path, run_id, {
            name: None if frames[name] is None and name in tables.TABLES else
            _as_few_tasks(tables.conform(frames[name], name) if name in tables.TABLES else frames[name])
            for name in names if name in frames}, carried=carried)
        if paths is not None:
            if timings is not None:
                timings["write:tables"] = round(time.perf_counter() - began, 3)
            if manifest:
                complete_run(spark, output_path, run_id, fmt, paths)
            return paths
    # Side by side: every table is written (or has failed) before the manifest.
    written = side_by_side({name: functools.partial(write_table, tables.empty(spark, name) if frames[name] is None
                                                    else frames[name], output_path, name, run_id, fmt)
                            for name in names if name in frames})
    paths = {name: path for name, (path, _) in written.items()}
    if timings is not None:  # each table's wall time, written beside the others
        timings.update({f"write:{name}": round(seconds, 3) for name, (_, seconds) in written.items()})
    if manifest:
        complete_run(spark, output_path, run_id, fmt, paths)
    return paths


def write_text_file(spark, output_path: str, relative: str, text: str) -> str:
    """Write a small text file (the HTML report, the run summary) under ``output_path``.

    Local paths are written directly; other URIs (``s3://``, ``abfss://``, ``dbfs:/``...) through the file
    system the session reaches them with (``sinks.files``), so the report lands beside the tables.
    """
    from pathlib import Path

    if is_local(output_path):
        # Whole or not at all (a temporary file beside it, then a rename): a full disk never leaves a cut report.
        local = Path(local_path(output_path)) / relative
        local.parent.mkdir(parents=True, exist_ok=True)
        temporary = local.with_name(f".{local.name}.tmp")
        try:
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, local)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return str(local)
    target = output_path.rstrip("/") + "/" + relative
    fs = FileSystem(spark, target)
    try:
        if not fs.usable:
            raise OSError("no file system client for it here")
        fs.write_text(target, text)
    except Exception as exc:  # noqa: BLE001 - one line naming the path and the fix, never a stack trace
        raise UserError(f"cannot write {target}: {exc.__class__.__name__}: {exc}",
                        fix="use a local or mounted output.path (a /Volumes path on Databricks), install "
                            "the fsspec implementation of its scheme, or set output.html_report: false") from None
    return target


@dataclass(frozen=True)
class Output:
    """Where a run's tables are kept: under the folder ``path`` in ``format`` (``<path>/<table>``), or with
    ``catalog`` (``<catalog>.<schema>``) as tables ``<catalog>.<schema>.<table>`` of Spark's catalog, Delta where
    the session has it and Parquet otherwise (``sinks.catalog``; ``format`` is then not used). Either way
    ``path`` holds the files a run writes beside its tables: the summary JSON and the HTML report."""

    path: str = "out"
    format: str = "parquet"
    catalog: str = ""

    @classmethod
    def of(cls, settings) -> Output:
        """From a config's ``output`` mapping, or a settings object with the same names."""
        def get(key: str):
            return settings.get(key) if isinstance(settings, dict) else getattr(settings, key, None)

        return cls(path=get("path") or "", format=get("format") or "parquet", catalog=get("catalog") or "")

    @property
    def by_name(self) -> bool:
        return bool(self.catalog)

    def check(self) -> None:
        """One line naming the fix, before any Spark work, when the tables cannot be kept where asked."""
        if self.by_name:
            from offsets_audit.sinks.catalog import Namespace

            Namespace.parse(self.catalog)
        else:
            _check_format(self.format)
        check_output_path(self.path)

    def __str__(self) -> str:
        return self.catalog if self.by_name else f"{self.path} ({self.format})"

    @contextlib.contextmanager
    def leased(self, spark, run_id: str) -> Iterator[Any]:
        """Hold, while the block runs, the lease (``offsets_audit.lease``) of the namespace the run writes by name:
        a second run writing the same namespace, whatever its run id, stops with one line naming this one. The
        lease is on the schema's own folder, so it needs Spark; a schema kept off this machine gets none. A run
        writing under a folder leases that folder before Spark starts instead, and gets nothing more here."""
        if not self.by_name:
            yield None
            return
        from offsets_audit.lease import acquire, release
        from offsets_audit.sinks.catalog import namespace_location

        location = namespace_location(spark, self.catalog)
        lease = acquire(location, run_id, what="output catalog", label=self.catalog) if location else None
        try:
            yield lease
        finally:
            release(lease)

    def write_run(self, spark, run_id: str, frames: dict, *, timings: dict | None = None,
                  manifest: bool = True, carried: dict[str, str] | None = None) -> dict:
        """Every table of the run, then (unless ``manifest`` is false: ``complete_run`` writes it once everything
        else of the run is written) its manifest (``write_run``, ``carried`` as it takes them: tables by name write
        every frame); ``{table: path or name}``."""
        if self.by_name:
            from offsets_audit.sinks.catalog import write_catalog_run

            return write_catalog_run(spark, self.catalog, run_id, frames, timings=timings, manifest=manifest)
        return write_run(spark, self.path, run_id, self.format, frames, timings=timings, manifest=manifest,
                         carried=carried)

    def complete_run(self, spark, run_id: str, paths: dict) -> None:
        """Mark the run complete (its manifest) after ``write_run(..., manifest=False)`` and the run's other
        files: the last thing a run writes."""
        if self.by_name:
            from offsets_audit.sinks.catalog import complete_written_run

            complete_written_run(spark, self.catalog, run_id, paths)
        else:
            complete_run(spark, self.path, run_id, self.format, paths)

    def read_table(self, spark, table: str, run_id: str):
        """Run ``run_id``'s rows of ``table`` with its known schema (``read_table``); None when there is no such
        table."""
        if self.by_name:
            from offsets_audit.sinks.catalog import read_catalog_table

            return read_catalog_table(spark, self.catalog, table, run_id)
        return read_table(spark, self.path, table, run_id, self.format)

    def run_manifest(self, spark, run_id: str) -> dict | None:
        """The manifest of a complete run, None when the run is incomplete or unknown."""
        if self.by_name:
            from offsets_audit.sinks.catalog import catalog_run_manifest

            return catalog_run_manifest(spark, self.catalog, run_id)
        return run_manifest(spark, self.path, run_id)

    def complete_runs(self, spark) -> list[dict]:
        """Manifests of the complete runs, oldest first."""
        if self.by_name:
            from offsets_audit.sinks.catalog import complete_catalog_runs

            return complete_catalog_runs(spark, self.catalog)
        return complete_runs(spark, self.path)
