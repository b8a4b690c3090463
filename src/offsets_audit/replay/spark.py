"""Batch Spark edge of the replay: ``replay(decoded_df) -> ReplayTables``.

* Group records (types 2-23) go through ``GroupFold`` with ``groupBy("group_id").applyInArrow``: one
  group's records sorted by (partition, offset), applied in chunks; events, targets, states and members
  come back as typed Arrow structs (``FOLD_OUTPUT_DDL``), never as JSON text to parse again. Offset commits only matter to the
  fold when they (re)create a simple classic group, so each group receives just the first commit after
  each of its group records.
* Offsets (the bulk) stay Spark-native (``OffsetMetadataManager`` rules, see ``offsets.py``): per
  (group, topic, partition) the commit with the highest record offset wins among those effective after
  the last tombstone; a transactional commit is effective at the first COMMIT marker of its
  (partition, producer id) after it, unless a tombstone for its key came in between; ABORT drops it; no
  marker leaves it pending.

Output layouts are documented in docs/replay.md.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import marshal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator

import pandas as pd
import pyarrow as pa

from offsets_audit.codec.spark import COMMIT_AFTER_COMMIT_COLUMN, DECODED_RECORD_COLUMN
from offsets_audit.plans import by_group
from offsets_audit.workers import fewer_collections

from .commit_log import COMMIT_DIGEST_DDL, COMMIT_LOG_DDL, COMMIT_RECORDS_DDL, COMMIT_RUNS_DDL, record_time_ms
from .fold import GroupFold
from .state import OFFSET_RECORD_TYPES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHUNK_ROWS = 10_000

GROUP_STATE_DDL = (
    "group_id string, group_type string, exists boolean, state string, group_epoch int, assignment_epoch int, "
    "assignment_timestamp long, metadata_hash long, topology_epoch int, generation int, protocol_type string, "
    "protocol string, leader string, num_members int, partition int, last_offset long, last_timestamp long, "
    "state_json string"
)
MEMBERS_DDL = (
    "group_id string, group_type string, member_id string, member_epoch int, previous_member_epoch int, "
    "member_state string, instance_id string, rack_id string, client_id string, client_host string, "
    "classic_protocol boolean, process_id string, topology_epoch int, member_json string"
)
EVENTS_DDL = (
    "partition int, offset long, timestamp long, group_id string, group_type string, event string, "
    "member_id string, details string"
)
TARGET_ASSIGNMENTS_DDL = (
    "group_id string, group_type string, assignment_epoch int, assignment_timestamp long, partition int, "
    "offset long, timestamp long, group_epoch int, metadata_hash long, members_changed array<string>, "
    "members string, target string, previous_target string, topology string, resolved_regular_expressions string, "
    "partition_metadata string, assignment_configs string, initialized_topics string, "
    "counted_regular_expressions string"
)
_JSON_COLUMNS_OF_TARGETS = ("members", "target", "previous_target", "topology", "resolved_regular_expressions",
                            "counted_regular_expressions",
                            "partition_metadata", "assignment_configs", "initialized_topics")


def fold_rows(fold: GroupFold, keys: list, values: list, partitions: list, offsets: list,
              timestamps: list, decoded_records: list | None = None,
              batch_offsets: list | None = None) -> Iterator[tuple[str, dict]]:
    """Apply one group's records (parallel lists, already in log order) to ``fold``; yields ``(kind, row)``
    with ``kind`` "event" (an ``EVENTS_DDL`` row) or "target" (a ``TARGET_ASSIGNMENTS_DDL`` row computed
    meanwhile), their values already as the tables hold them (``details`` and the targets' JSON columns as
    JSON text). The one place the Spark edges turn fold output into table rows.

    ``decoded_records``: the codec's ``DECODED_RECORD_COLUMN`` of the same rows, so that a record the codec
    stage decoded is not decoded again (a null entry: the fold decodes the bytes). ``batch_offsets``: each record's
    Kafka batch (its ``batch_base_offset``), which tells the fold which records one append wrote."""
    from offsets_audit.codec.spark import decoded_record_of

    blobs: Iterable[bytes | None] = itertools.repeat(None) if decoded_records is None else decoded_records
    bases: Iterable[Any] = itertools.repeat(None) if batch_offsets is None else batch_offsets
    for key, value, partition, offset, ts, blob, base in zip(keys, values, partitions, offsets, timestamps, blobs,
                                                             bases):
        record = {"key": None if key is None else bytes(key), "value": None if value is None else bytes(value),
                  "partition": int(partition), "offset": int(offset), "timestamp": None if _isnull(ts) else int(ts)}
        if not _isnull(base):
            record["batch_base_offset"] = int(base)
        for event in fold.apply(record, None if blob is None else decoded_record_of(blob)):
            event["details"] = _SORTED_JSON.encode(event["details"])
            yield "event", event
    for row in fold.pop_target_assignment_rows():
        for column in _JSON_COLUMNS_OF_TARGETS:
            if column in row:
                # Targets keep record order (no sort_keys): the assignor re-runs' tie-breaks follow it.
                encoder = _RECORD_ORDER_JSON if column in ("target", "previous_target") else _SORTED_JSON
                row[column] = encoder.encode(row[column])
        yield "target", row


#: ``json.dumps(..., sort_keys=True)`` and ``json.dumps`` themselves, made once: ``dumps`` with an option builds an
#: encoder per call, and the fold encodes every event's details.
_SORTED_JSON = json.JSONEncoder(sort_keys=True)
_RECORD_ORDER_JSON = json.JSONEncoder()


def _isnull(value) -> bool:
    return value is None or bool(pd.isna(value))  # NaN / NA from a pandas column of nullable integers


def fold_frame(fold: GroupFold, pdf: pd.DataFrame) -> list[tuple]:
    """``fold_rows`` over a pandas frame (``key``, ``value``, ``partition``, ``offset``, ``timestamp_ms``, and
    ``batch_base_offset`` when the input has it) as
    ``(kind, group_id, payload)`` rows with a JSON payload: the form the streaming fold
    (``replay.streaming``) keeps in its state store. The batch replay exchanges typed Arrow columns instead
    (``_fold_groups_arrow``)."""
    batches = pdf["batch_base_offset"].tolist() if "batch_base_offset" in pdf.columns else None
    return [(kind, fold.group_id, json.dumps(row)) for kind, row in fold_rows(
        fold, pdf["key"].tolist(), pdf["value"].tolist(), pdf["partition"].tolist(), pdf["offset"].tolist(),
        pdf["timestamp_ms"].tolist(), batch_offsets=batches)]


def state_rows(fold: GroupFold) -> list[tuple]:
    """The ``group_state`` row and ``members`` rows of ``fold`` as ``(kind, group_id, payload)``."""
    out = [("state", fold.group_id, json.dumps(fold.state_row()))]
    out.extend(("member", fold.group_id, json.dumps(m)) for m in fold.member_rows())
    return out


def _check_log_order(group_id, positions: list[tuple], last: tuple | None) -> None:
    if (last is not None and positions and positions[0] < last) or positions != sorted(positions):
        raise RuntimeError(f"replay of group {group_id!r} received records out of log order; "
                           "the plan must keep the sort of replay.spark.replay")


def _fold_groups(key: tuple[Any, ...], batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``_fold_groups_arrow`` with JSON payloads in pandas frames (``fold_frame`` + ``state_rows``): the
    reference the streaming fold's tests compare with."""
    fold = GroupFold(key[0])
    last: tuple | None = None
    columns = ["kind", "group_id", "payload"]
    for batch in batches:
        if batch.empty:
            continue
        positions = list(zip(batch["partition"], batch["offset"]))
        _check_log_order(key[0], positions, last)
        last = positions[-1]
        for start in range(0, len(batch), CHUNK_ROWS):
            yield pd.DataFrame(fold_frame(fold, batch.iloc[start:start + CHUNK_ROWS]), columns=columns)
    yield pd.DataFrame(state_rows(fold), columns=columns)


def _struct_ddl(ddl: str) -> str:
    """``a int, b string`` as the Spark struct type ``struct<a:int,b:string>`` (types may nest ``<...>``)."""
    fields, depth, start = [], 0, 0
    for i, ch in enumerate(ddl + ","):
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            name, _, type_ = ddl[start:i].strip().partition(" ")
            fields.append(f"{name}:{type_.strip()}")
            start = i + 1
    return "struct<" + ",".join(fields) + ">"


#: Rows of the batch fold: one typed struct per kind of row, null in the others (no JSON between Python and
#: the JVM: Arrow struct columns in, ``select("event.*")`` out).
_FOLD_KINDS = {"event": EVENTS_DDL, "target": TARGET_ASSIGNMENTS_DDL, "state": GROUP_STATE_DDL,
               "member": MEMBERS_DDL}
FOLD_OUTPUT_DDL = "kind string, " + ", ".join(f"{kind} {_struct_ddl(ddl)}" for kind, ddl in _FOLD_KINDS.items())


def _fold_batch(rows: list[tuple[str, dict]], schema: pa.Schema) -> pa.RecordBatch:
    kinds = [kind for kind, _ in rows]
    arrays = [pa.array(kinds, pa.string())]
    for field in schema:
        if field.name == "kind":
            continue
        arrays.append(pa.array([row if kind == field.name else None for kind, row in rows], type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _fold_groups_arrow(schema: pa.Schema):
    """The applyInArrow body folding each group into ``schema`` (``FOLD_OUTPUT_DDL`` as Arrow, made on the
    driver: DDL parsing needs a SparkContext)."""

    def run(key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _fold_group(key[0].as_py(), batches, schema)

    return run


def _fold_group(group_id: str, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """applyInArrow body (iterator form): fold one group's records batch by batch, in log order.

    ``replay`` hands each group its rows hash-partitioned and sorted by (group id, partition, offset), so
    they arrive in log order in Arrow batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows:
    a group with millions of records never sits in memory at once. The order is checked, because a
    replay out of log order would be silently wrong. Rows go back as typed Arrow structs
    (``FOLD_OUTPUT_DDL``), ``CHUNK_ROWS`` input records at a time, with the worker's collector run less often
    (``workers.fewer_collections``)."""
    fold = GroupFold(group_id)
    last: tuple | None = None
    with fewer_collections():
        for batch in batches:
            if batch.num_rows == 0:
                continue
            names = ["key", "value", "partition", "offset", "timestamp_ms"]
            if batch.schema.get_field_index(DECODED_RECORD_COLUMN) >= 0:
                names.append(DECODED_RECORD_COLUMN)
            if batch.schema.get_field_index("batch_base_offset") >= 0:
                names.append("batch_base_offset")
            columns = {name: batch.column(name).to_pylist() for name in names}
            positions = list(zip(columns["partition"], columns["offset"]))
            _check_log_order(group_id, positions, last)
            last = positions[-1]
            for start in range(0, batch.num_rows, CHUNK_ROWS):
                chunk = {name: values[start:start + CHUNK_ROWS] for name, values in columns.items()}
                rows = list(fold_rows(fold, chunk["key"], chunk["value"], chunk["partition"], chunk["offset"],
                                      chunk["timestamp_ms"], chunk.get(DECODED_RECORD_COLUMN),
                                      chunk.get("batch_base_offset")))
                if rows:
                    yield _fold_batch(rows, schema)
        yield _fold_batch([("state", fold.state_row()), *(("member", m) for m in fold.member_rows())], schema)


#: What the fold reads of an offset commit: its type and that it is not a tombstone (``GroupFold._replay``), as
#: a ``DECODED_RECORD_COLUMN`` value, so that no commit's bytes travel to the fold.
_COMMIT_STAND_INS = {int(t): marshal.dumps((int(t), {}, {})) for t in sorted(OFFSET_RECORD_TYPES)}


def _group_inputs(decoded_df):
    """The fold's input rows, partitioned by group (``plans.by_group``): every group record, and of the offset
    commits (~90 % of the log) only the first one after each group record, the only ones that can (re)create a
    simple classic group; a commit as a stand-in decoded record (``_COMMIT_STAND_INS``), never its bytes, so the
    shuffle that orders each group's rows moves little more than positions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import tombstone

    is_commit = F.col("record_type").isin(*_COMMIT_STAND_INS)
    if DECODED_RECORD_COLUMN in decoded_df.columns:
        # The codec's decoded form travels instead of the bytes (the fold decodes only where it is null).
        group_record = F.col(DECODED_RECORD_COLUMN)
    else:
        group_record = F.lit(None).cast("binary")
    stand_in = F.lit(None).cast("binary")
    for record_type, blob in _COMMIT_STAND_INS.items():
        stand_in = F.when(F.col("record_type") == record_type, F.lit(blob)).otherwise(stand_in)
    read = (F.coalesce(F.col("is_control"), F.lit(False)) == F.lit(False)) & F.col("error_code").isNull() & F.col(
        "group_id").isNotNull() & ~(is_commit & tombstone(decoded_df))
    if COMMIT_AFTER_COMMIT_COLUMN in decoded_df.columns:
        # The segments reader marked the commits whose group's previous record, in their segment (or Kafka batch),
        # is a commit: the window below would drop them too, after shuffling them (~90 % of the log; codec.spark).
        read = read & ~F.coalesce(F.col(COMMIT_AFTER_COMMIT_COLUMN), F.lit(False))
    relevant = decoded_df.filter(read).select(
        "group_id", *[F.when(~is_commit & group_record.isNull(), F.col(c)).alias(c) for c in ("key", "value")],
        F.when(is_commit, stand_in).otherwise(group_record).alias(DECODED_RECORD_COLUMN), "partition", "offset",
        "record_type", record_time_ms().alias("timestamp_ms"),
        # which records one append wrote (a batch a heartbeat wrote): the fold's target rows tell from it how the
        # coordinator computed them
        (F.col("batch_base_offset") if "batch_base_offset" in decoded_df.columns
         else F.lit(None).cast("long")).alias("batch_base_offset"),
    )
    w = Window.partitionBy("group_id").orderBy("partition", "offset")
    previous_is_commit = F.lag("record_type").over(w).isin(*_COMMIT_STAND_INS)
    # Partitioned for the fold (``by_group``) before the window, which that partitioning satisfies: one shuffle of
    # these rows, not the window's and then the fold's.
    return by_group(relevant).withColumn("_prev", previous_is_commit).filter(
        ~is_commit | F.col("_prev").isNull() | ~F.col("_prev")
    ).drop("_prev", "record_type")


OFFSET_KEY_COLUMNS = ["group_id", "topic", "topic_partition"]
OFFSET_VALUE_COLUMNS = ["committed_offset", "committed_leader_epoch", "metadata", "commit_timestamp"]
#: The offsets snapshot ``merge_offsets`` produces and the streaming replay keeps in its checkpoint.
OFFSETS_STATE_DDL = (
    "group_id string, topic string, topic_partition int, committed_offset long, committed_leader_epoch int, "
    "metadata string, commit_timestamp long, record_partition int, record_offset long, producer_id long, "
    "status string, effective_at long"
)


#: The ``offsets`` output table (``offsets_table``): the snapshot with ``topic_partition`` named ``partition``,
#: without its bookkeeping column ``effective_at``.
OFFSETS_DDL = ", ".join("partition int" if f == "topic_partition int" else f for f in OFFSETS_STATE_DDL.split(", ")
                        if not f.startswith("effective_at "))


def merge_offsets(previous, decoded_batch):
    """The offsets snapshot (``OFFSETS_STATE_DDL`` rows: committed winners with the record offset they
    became effective at, and pending transactional commits) after ``decoded_batch``, given the snapshot
    before it (``None`` for the start of the log): ``commit_log.resolve_commits``, the one implementation
    of ``OffsetMetadataManager``'s rules, reduced to its last state.

    Everything in ``decoded_batch`` comes after everything ``previous`` saw (per partition, log order), so
    the batch replay is this over the whole log and the streaming replay folds it micro-batch by micro-batch.
    """
    from .commit_log import offsets_snapshot, resolve_commits

    return offsets_snapshot(resolve_commits(decoded_batch, previous))


def offsets_table(snapshot):
    """The ``offsets`` output table (docs/replay.md) of an offsets snapshot."""
    return snapshot.drop("effective_at").withColumnRenamed("topic_partition", "partition").select(
        "group_id", "topic", "partition", *OFFSET_VALUE_COLUMNS, "record_partition", "record_offset", "producer_id",
        "status")


def _offsets(decoded_df):
    """The batch replay's ``offsets`` table: the snapshot after the whole log."""
    return offsets_table(merge_offsets(None, decoded_df))


def offset_commits(decoded_df):
    """The resolved offset-commit log of the whole log (``commit_log.COMMIT_LOG_DDL``)."""
    from .commit_log import resolve_commits

    return resolve_commits(decoded_df)


def table(ddl: str, *, output: bool = True, optional: bool = False, lazy: bool = False):
    """A field of a stage's tables: the DataFrame, its rows' DDL beside it (``offsets_audit.tables`` registers
    the written ones), ``output`` false for an intermediate the job reads but does not write, ``optional`` for
    a table some modes do not produce (``None`` then), ``lazy`` for a plan the job hands on as it is, never
    materialised at the stage's end (``StageTables.lazy``: reading it costs less than keeping it)."""
    metadata = {"ddl": ddl, "output": output, "lazy": lazy}
    if optional:
        return dataclasses.field(default=None, metadata=metadata)
    return dataclasses.field(metadata=metadata)


def cached_intermediates():
    """The field in which a stage keeps what it persisted for its tables' sake (read twice by them), so that
    ``release`` can free it once the tables are written; not a table."""
    return dataclasses.field(default=(), compare=False, repr=False)


class StageTables:
    """What every stage contract shares: one field per table, read by name or as a dict."""

    __dataclass_fields__: ClassVar[dict]

    @classmethod
    def ddls(cls, *, outputs_only: bool = True) -> dict[str, str]:
        """``{table: DDL}`` of the fields (the written ones only, by default), in field order."""
        return {f.name: f.metadata["ddl"] for f in dataclasses.fields(cls)
                if "ddl" in f.metadata and (f.metadata["output"] or not outputs_only)}

    @classmethod
    def lazy(cls) -> frozenset[str]:
        """The fields a stage boundary leaves unmaterialised (``table(..., lazy=True)``)."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("lazy"))

    def as_dict(self, *, outputs_only: bool = False) -> dict[str, DataFrame | None]:
        names = type(self).ddls(outputs_only=outputs_only)
        return {name: getattr(self, name) for name in names}

    def map(self, fn: Callable[[DataFrame], DataFrame]):
        """The same tables with ``fn`` applied to each one present (e.g. persist and count: a stage boundary)."""
        return dataclasses.replace(self, **{name: fn(df) for name, df in self.as_dict().items()
                                            if df is not None})

    def release(self) -> None:
        """Unpersist the tables and the stage's cached intermediates: a long-lived session (a notebook, the
        tests, a nightly driver running several runs) must not keep every run's caches in the heap."""
        for df in [*self.as_dict().values(), *getattr(self, "cached", ())]:
            if df is not None:
                df.unpersist()

    # Read like the dict the stages returned before the contracts (notebooks, tests): tables["offsets"].
    def __getitem__(self, name: str):
        if name not in type(self).ddls(outputs_only=False):
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default=None):
        try:
            value = self[name]
        except KeyError:
            return default
        return default if value is None else value


@dataclass(frozen=True)
class ReplayTables(StageTables):
    """What the replay hands on: the batch replay (``replay``) and the incremental one return this.

    ``offset_commits`` is the resolved commit log (``commit_log.resolve_commits``), a plan the job never
    computes whole; ``commit_digest`` its digest, which the ``offsets`` table and the audit's offset rules read,
    and ``commit_records`` the decoded commit records (a plan over the decoded log) that stand in for the rest of
    the log (``commit_log.ResolvedCommits``); of a packed log (``codec.packing``) ``commit_records`` leaves the packed
    rows' records to ``commit_runs``, a row per packed row (empty when nothing is packed). None is written. A mode that
    does not resolve the whole log leaves them ``None`` (the audit then resolves one from the decoded records, or
    skips the offset rules)."""

    group_state: DataFrame = table(GROUP_STATE_DDL, lazy=True)
    members: DataFrame = table(MEMBERS_DDL, lazy=True)
    group_events: DataFrame = table(EVENTS_DDL, lazy=True)
    target_assignments: DataFrame = table(TARGET_ASSIGNMENTS_DDL, lazy=True)
    offsets: DataFrame | None = table(OFFSETS_DDL, lazy=True)   # None: an incremental run before any snapshot
    offset_commits: DataFrame | None = table(COMMIT_LOG_DDL, output=False, optional=True, lazy=True)
    commit_digest: DataFrame | None = table(COMMIT_DIGEST_DDL, output=False, optional=True)
    commit_records: DataFrame | None = table(COMMIT_RECORDS_DDL, output=False, optional=True, lazy=True)
    commit_runs: DataFrame | None = table(COMMIT_RUNS_DDL, output=False, optional=True, lazy=True)
    cached: tuple = cached_intermediates()


def fold_groups(decoded_df):
    """Every group's records through ``GroupFold`` (``FOLD_OUTPUT_DDL`` rows: one typed struct per kind of row), the
    rows of a group in log order; one shuffle of the fold's input (``_group_inputs``)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    output_type = _parse_datatype_string(FOLD_OUTPUT_DDL)
    assert isinstance(output_type, StructType)
    return (_group_inputs(decoded_df).sortWithinPartitions("group_id", "partition", "offset")
            .groupBy("group_id").applyInArrow(_fold_groups_arrow(to_arrow_schema(output_type)), FOLD_OUTPUT_DDL))


def replay(decoded_df, *, whole_log: bool = True) -> ReplayTables:
    """Replay the codec's output (``offsets_audit.codec.spark.decode``) into the replay tables
    (docs/replay.md); ``commit_digest``, the resolved commit log's digest, also feeds the ``offsets`` table.

    ``whole_log``: plan ``offset_commits``, the whole resolved commit log, too (notebooks and tests read it). The job
    never computes it and leaves it out: planning its windows costs the driver time every run, with cores idle."""
    from pyspark.sql import functions as F

    from offsets_audit.plans import cached_leaf

    from .commit_log import commit_records, commit_runs, digest_snapshot, resolve_commits

    # The fold's rows and the commit log's digest are what the replay computes; its tables are views of them, planned
    # over their caches (``plans.cached_leaf``): a stage boundary computes the two (``cached``), not each table.
    digest = resolve_commits(decoded_df, digest=True).persist()
    folded = fold_groups(decoded_df).persist()
    folded_leaf, digest_leaf = cached_leaf(folded), cached_leaf(digest)

    def part(kind: str):
        return folded_leaf.filter(F.col("kind") == kind).select(f"{kind}.*")

    undecodable = decoded_df.filter(F.col("error_code").isNotNull()).select(
        F.col("partition").cast("int"), F.col("offset").cast("long"),
        record_time_ms().alias("timestamp"),
        F.col("group_id"), F.lit(None).cast("string").alias("group_type"), F.lit("replay_anomaly").alias("event"),
        F.lit(None).cast("string").alias("member_id"),
        F.to_json(F.struct(F.lit("undecodable record").alias("reason"), F.col("error_code"),
                           F.col("error_message").alias("error"))).alias("details"),
    )
    return ReplayTables(
        group_state=part("state"),
        members=part("member"),
        group_events=part("event").unionByName(undecodable),
        target_assignments=part("target"),
        offsets=offsets_table(digest_snapshot(digest_leaf)),
        offset_commits=resolve_commits(decoded_df) if whole_log else None,
        commit_digest=digest_leaf,
        commit_records=commit_records(decoded_df, runs_apart=True),
        commit_runs=commit_runs(decoded_df),
        cached=(folded, digest),
    )
