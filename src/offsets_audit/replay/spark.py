"""Batch Spark edge of the replay: ``replay(decoded_df) -> dict[str, DataFrame]``.

* Group records (types 2-23) go through ``GroupFold`` with ``groupBy("group_id").applyInPandas``: one
  group's records sorted by (partition, offset), applied in chunks. Offset commits only matter to the
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

import json
from typing import Any, Iterator

import pandas as pd

from .fold import GroupFold

CHUNK_ROWS = 10_000

_FOLD_OUTPUT = "kind string, group_id string, payload string"

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
    "partition_metadata string, assignment_configs string, initialized_topics string"
)
_JSON_COLUMNS_OF_TARGETS = ("members", "target", "previous_target", "topology", "resolved_regular_expressions",
                            "partition_metadata", "assignment_configs", "initialized_topics")


def fold_frame(fold: GroupFold, pdf: pd.DataFrame) -> list[tuple]:
    """Apply one group's rows (``key``, ``value``, ``partition``, ``offset``, ``timestamp_ms``, already in
    log order) to ``fold``; returns ``(kind, group_id, payload)`` rows of its events and of the target
    assignments computed meanwhile. The batch edge and the streaming fold (``replay.incremental``) share it."""
    group_id = fold.group_id
    out: list[tuple] = []
    for key, value, partition, offset, ts in zip(pdf["key"], pdf["value"], pdf["partition"], pdf["offset"],
                                                 pdf["timestamp_ms"]):
        record = {"key": None if key is None else bytes(key), "value": None if value is None else bytes(value),
                  "partition": int(partition), "offset": int(offset), "timestamp": None if pd.isna(ts) else int(ts)}
        for event in fold.apply(record):
            out.append(("event", group_id, json.dumps(dict(event, details=json.dumps(event["details"], sort_keys=True)))))
    for row in fold.pop_target_assignment_rows():
        for column in _JSON_COLUMNS_OF_TARGETS:
            if column in row:
                # Targets keep record order (no sort_keys): the assignor re-runs' tie-breaks follow it.
                row[column] = json.dumps(row[column], sort_keys=column not in ("target", "previous_target"))
        out.append(("target", group_id, json.dumps(row)))
    return out


def state_rows(fold: GroupFold) -> list[tuple]:
    """The ``group_state`` row and ``members`` rows of ``fold`` as ``(kind, group_id, payload)``."""
    out = [("state", fold.group_id, json.dumps(fold.state_row()))]
    out.extend(("member", fold.group_id, json.dumps(m)) for m in fold.member_rows())
    return out


def _fold_groups(key: tuple[Any, ...], batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """applyInPandas body (iterator form): fold one group's records batch by batch, in log order.

    ``replay`` hands each group its rows hash-partitioned and sorted by (group id, partition, offset), so
    they arrive in log order in Arrow batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows:
    a group with millions of records never sits in memory at once. The order is checked, because a
    replay out of log order would be silently wrong."""
    fold = GroupFold(key[0])
    last: tuple | None = None
    columns = ["kind", "group_id", "payload"]
    for batch in batches:
        if batch.empty:
            continue
        positions = list(zip(batch["partition"], batch["offset"]))
        if (last is not None and positions[0] < last) or positions != sorted(positions):
            raise RuntimeError(f"replay of group {key[0]!r} received records out of log order; "
                               "the plan must keep the sort of replay.spark.replay")
        last = positions[-1]
        for start in range(0, len(batch), CHUNK_ROWS):
            yield pd.DataFrame(fold_frame(fold, batch.iloc[start:start + CHUNK_ROWS]), columns=columns)
    yield pd.DataFrame(state_rows(fold), columns=columns)


def _group_inputs(decoded_df):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = decoded_df.filter(
        (F.coalesce(F.col("is_control"), F.lit(False)) == F.lit(False))
        & F.col("error_code").isNull() & F.col("group_id").isNotNull()
    ).select(
        "group_id", "key", "value", "partition", "offset", "record_type",
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("timestamp_ms"),
    )
    is_commit = F.col("record_type").isin(0, 1)
    relevant = rows.filter(~is_commit | F.col("value").isNotNull())
    w = Window.partitionBy("group_id").orderBy("partition", "offset")
    return relevant.withColumn("_prev", F.lag("record_type").over(w)).filter(
        ~is_commit | F.col("_prev").isNull() | ~F.col("_prev").isin(0, 1)
    ).drop("_prev", "record_type")


OFFSET_KEY_COLUMNS = ["group_id", "topic", "topic_partition"]
OFFSET_VALUE_COLUMNS = ["committed_offset", "committed_leader_epoch", "metadata", "commit_timestamp"]
#: The offsets snapshot ``merge_offsets`` produces and the streaming replay keeps in its checkpoint.
OFFSETS_STATE_DDL = (
    "group_id string, topic string, topic_partition int, committed_offset long, committed_leader_epoch int, "
    "metadata string, commit_timestamp long, record_partition int, record_offset long, producer_id long, "
    "status string, effective_at long"
)


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


def replay(decoded_df) -> dict:
    """Replay the codec's output (``offsets_audit.codec.spark.decode``) into the replay tables.

    ``offset_commits`` is the resolved commit log (read by the ``offsets`` table and by the audit's offset
    rules; an intermediate, not written); the other entries are the output tables of docs/replay.md."""
    from pyspark.sql import functions as F

    from .commit_log import offsets_snapshot, resolve_commits

    commits = resolve_commits(decoded_df)
    folded = (_group_inputs(decoded_df)
              .repartition("group_id").sortWithinPartitions("group_id", "partition", "offset")
              .groupBy("group_id").applyInPandas(_fold_groups, _FOLD_OUTPUT))
    folded = folded.cache()

    def part(kind: str, ddl: str):
        return folded.filter(F.col("kind") == kind).select(F.from_json("payload", ddl).alias("r")).select("r.*")

    undecodable = decoded_df.filter(F.col("error_code").isNotNull()).select(
        F.col("partition").cast("int"), F.col("offset").cast("long"),
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("timestamp"),
        F.col("group_id"), F.lit(None).cast("string").alias("group_type"), F.lit("replay_anomaly").alias("event"),
        F.lit(None).cast("string").alias("member_id"),
        F.to_json(F.struct(F.lit("undecodable record").alias("reason"), F.col("error_code"),
                           F.col("error_message").alias("error"))).alias("details"),
    )
    return {
        "group_state": part("state", GROUP_STATE_DDL),
        "members": part("member", MEMBERS_DDL),
        "group_events": part("event", EVENTS_DDL).unionByName(undecodable),
        "target_assignments": part("target", TARGET_ASSIGNMENTS_DDL),
        "offset_commits": commits,
        "offsets": offsets_table(offsets_snapshot(commits)),
    }

