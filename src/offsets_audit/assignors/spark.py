"""Spark edge of the assignor audit: ``audit(target_assignments_df, topic_metadata_df, what_if, offsets)``.

The ``target_assignments`` table of the replay (docs/replay.md) is grouped by ``group_id`` and each group's
recorded assignments are re-run in log order by ``rerun.audit_group`` inside ``applyInPandas`` (or
``cogroup`` with the committed offsets, for lag metrics and the ``lag_aware`` what-if). The topic-metadata
snapshot is one row per topic; it is collected on the driver and shipped with the function.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

import pandas as pd

from offsets_audit.assignors.rerun import (
    ASSIGNOR_AUDIT_COLUMNS,
    ASSIGNOR_AUDIT_TIMED_COLUMNS,
    ASSIGNOR_AUDIT_TIMED_DDL,
    GroupRerun,
    audit_group,
)
from offsets_audit.assignors.topic_metadata import TopicMetadata, topics_from_rows
from offsets_audit.plans import by_group
from offsets_audit.settings import Settings
from offsets_audit.workers import fewer_collections

_ROW_COLUMNS = ("group_id", "group_type", "assignment_epoch", "assignment_timestamp", "partition", "offset",
                "group_epoch", "metadata_hash", "members", "target", "previous_target", "topology",
                "resolved_regular_expressions", "partition_metadata", "assignment_configs", "initialized_topics",
                "counted_regular_expressions")


def _plain(value):
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def _offsets_by_topic(pdf: pd.DataFrame | None) -> dict:
    """``{topic: {partition: {"committed", "end", "begin"}}}`` from a group's offsets rows (``end_offset`` /
    ``begin_offset`` columns are optional: the log has committed offsets only)."""
    if pdf is None or pdf.empty:
        return {}
    out: dict = {}
    has_end = "end_offset" in pdf.columns
    has_begin = "begin_offset" in pdf.columns
    if "status" in pdf.columns:
        pdf = pdf[pdf["status"].isna() | (pdf["status"] == "committed")]
    for r in pdf.to_dict("records"):
        topic = _plain(r.get("topic"))
        partition = _plain(r.get("partition"))
        if topic is None or partition is None:
            continue
        out.setdefault(topic, {})[int(partition)] = {
            "committed": _plain(r.get("committed_offset")),
            "end": _plain(r.get("end_offset")) if has_end else None,
            "begin": _plain(r.get("begin_offset")) if has_begin else None,
        }
    return out


def _result_frame(rows: list[dict], columns: Sequence[str] = ASSIGNOR_AUDIT_COLUMNS) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    for column in ("assignment_epoch", "partition", "moved_partitions", "recorded_spread", "result_spread",
                   "num_members"):
        frame[column] = frame[column].astype("Int32")
    for column in ("assignment_timestamp", "offset", "recorded_lag_spread", "result_lag_spread"):
        frame[column] = frame[column].astype("Int64")
    for column in ("metadata_hash_match", "snapshot_hash_match", "match", "same_as_recorded"):
        frame[column] = frame[column].astype("boolean")
    return frame


def _group_rows(pdf: pd.DataFrame) -> list[dict]:
    rows = []
    for r in pdf.to_dict("records"):
        rows.append({c: _plain(r.get(c)) for c in _ROW_COLUMNS})
    return rows


def topic_metadata(spark, settings: Settings):
    """The topic-metadata snapshot the re-runs read (``topic_metadata.source: file``) as its rows, read on the driver
    (one row per topic: no Spark job), else None."""
    if settings.topic_metadata.source != "file" or not settings.topic_metadata.path:
        return None
    from offsets_audit.assignors.topic_metadata import load_topics

    return load_topics(settings.topic_metadata.path)


def what_if_assignors(settings: Settings) -> list[str]:
    """The what-if assignors, a user's plug-in (``assignors.custom``) last: resolved by name inside the
    executors' Python workers, where its module must be importable (ship it with --py-files or install it on the
    cluster), and loaded here first so that a wrong name fails on the driver with one line."""
    custom = settings.assignors.custom
    if custom:
        from offsets_audit.assignors.plugin import load_assignor

        load_assignor(custom)
    return settings.assignors.what_if_names()


def audit(target_assignments_df, topic_metadata_df=None, what_if: Sequence[str] = (), offsets=None,
          *, auto_offset_reset: str = "latest", default_consumer_assignor: str = "uniform",
          streams_assignors: Mapping[str, str] | None = None, kafka_version: str | None = None):
    """The ``assignor_audit`` DataFrame (``rerun.ASSIGNOR_AUDIT_DDL``) with the re-runs' timing beside it
    (``rerun.ASSIGNOR_AUDIT_TIMED_DDL``: the written table leaves that column out); the assignor choice as
    ``rerun.audit_group``. ``topic_metadata_df``: the topic-metadata snapshot, a DataFrame or its rows
    (``topic_metadata.load_topics``: a snapshot read on the driver needs no Spark job to reach the re-runs)."""
    topics = _topics(topic_metadata_df)
    what_if = tuple(what_if or ())
    options: dict = {"what_if": what_if, "auto_offset_reset": auto_offset_reset,
                     "default_consumer_assignor": default_consumer_assignor,
                     "streams_assignors": dict(streams_assignors or {}), "kafka_version": kafka_version}
    columns = [c for c in _ROW_COLUMNS if c in target_assignments_df.columns]
    targets = target_assignments_df.select(*columns)

    def one_group(pdf: pd.DataFrame, offsets_pdf: pd.DataFrame | None = None) -> pd.DataFrame:
        snapshot = TopicMetadata(topics) if topics else None
        with fewer_collections():  # a few dicts per member and target (``workers.fewer_collections``)
            rows = audit_group(_group_rows(pdf), snapshot, offsets=_offsets_by_topic(offsets_pdf), **options)
        return _result_frame(rows, ASSIGNOR_AUDIT_TIMED_COLUMNS)

    return _per_group(targets, lambda pdf, offsets_pdf=None: one_group(pdf, offsets_pdf) if not pdf.empty
                      else _result_frame([], ASSIGNOR_AUDIT_TIMED_COLUMNS), offsets, ASSIGNOR_AUDIT_TIMED_DDL)


#: Per group, the resumable re-run state an incremental run leaves for the next (``rerun.GroupRerun``);
#: ``pending``: its targets waiting for a topic name (re-run by every run until named).
RERUN_STATE_DDL = "group_id string, pending int, state binary"
#: ``audit_resumed``'s rows: ``kind`` = ``rerun`` (a completed ``assignor_audit`` row as JSON), ``provisional``
#: (a pending target's row as of now, JSON) or ``state`` (the group's next ``RERUN_STATE_DDL`` values).
RESUMED_DDL = "group_id string, kind string, payload string, pending int, state binary"


def audit_resumed(new_targets, state, topic_metadata_df=None, what_if: Sequence[str] = (), offsets=None,
                  *, auto_offset_reset: str = "latest", default_consumer_assignor: str = "uniform",
                  streams_assignors: Mapping[str, str] | None = None, kafka_version: str | None = None):
    """The assignor audit of an incremental run (``RESUMED_DDL`` rows): each group with new target rows, or with
    pending ones, resumes its ``GroupRerun`` from ``state`` (``RERUN_STATE_DDL``; None before the first run)
    and re-runs only those targets, giving the rows a batch re-run over the whole history gives them.

    ``new_targets``: ``group_id`` and ``payload`` (a ``target_assignments`` row as JSON, the fold's output)."""
    from pyspark.sql import functions as F

    topics = _topics(topic_metadata_df)
    what_if = tuple(what_if or ())
    streams_choice = dict(streams_assignors or {})
    targets = new_targets.select("group_id", F.lit("target").alias("kind"), "payload",
                                 F.lit(None).cast("binary").alias("state"))
    work = targets
    if state is not None:
        resumed = (state.join(new_targets.select("group_id").distinct(), "group_id", "left_semi")
                   .unionByName(state.filter(F.col("pending") > 0)).dropDuplicates(["group_id"]))
        work = work.unionByName(resumed.select("group_id", F.lit("state").alias("kind"),
                                               F.lit(None).cast("string").alias("payload"), "state"))

    def one_group(pdf: pd.DataFrame, offsets_pdf: pd.DataFrame | None = None) -> pd.DataFrame:
        if pdf.empty:
            return pd.DataFrame([], columns=["group_id", "kind", "payload", "pending", "state"])
        group_id = pdf["group_id"].iloc[0]
        stored = [bytes(b) for b in pdf.loc[pdf["kind"] == "state", "state"]]
        snapshot = TopicMetadata(topics) if topics else None
        rerun = GroupRerun.from_bytes(stored[0]) if stored else GroupRerun(bool(topics), default_consumer_assignor,
                                                                            streams_choice, kafka_version)
        rerun.reconstruction.kafka_version = kafka_version  # this run's setting, as a batch run would take it
        offsets = _offsets_by_topic(offsets_pdf)
        rows = [json.loads(p) for p in pdf.loc[pdf["kind"] == "target", "payload"]]
        with fewer_collections():
            done = rerun.feed(rows, snapshot, what_if=what_if, offsets=offsets, auto_offset_reset=auto_offset_reset)
            waiting = rerun.provisional(snapshot, what_if=what_if, offsets=offsets,
                                        auto_offset_reset=auto_offset_reset)
        out: list[tuple] = [(group_id, "rerun", json.dumps(r), None, None) for r in done]
        out += [(group_id, "provisional", json.dumps(r), None, None) for r in waiting]
        out.append((group_id, "state", None, len(rerun.pending), rerun.to_bytes()))
        frame = pd.DataFrame(out, columns=["group_id", "kind", "payload", "pending", "state"])
        frame["pending"] = frame["pending"].astype("Int32")
        return frame

    return _per_group(work, one_group, offsets, RESUMED_DDL)


def _topics(topic_metadata) -> list[dict]:
    """The snapshot's topics from a topic-metadata DataFrame (collected) or its rows as they are; none without it."""
    if topic_metadata is None:
        return []
    if isinstance(topic_metadata, (list, tuple)):
        return topics_from_rows(topic_metadata)
    return topics_from_rows(r.asDict() for r in topic_metadata.collect())


def _per_group(frame, one_group, offsets, ddl: str):
    """``one_group(rows, offsets_rows)`` applied to each group of ``frame``, with the group's committed offsets
    cogrouped when there are any (``offsets_rows`` left out otherwise; a group with offsets but no rows of
    ``frame`` reaches ``one_group`` with empty rows)."""
    if offsets is None:
        def without_offsets(pdf: pd.DataFrame) -> pd.DataFrame:  # one argument: Spark passes no grouping key
            return one_group(pdf)

        return by_group(frame).groupBy("group_id").applyInPandas(without_offsets, ddl)
    offset_columns = [c for c in ("group_id", "topic", "partition", "committed_offset", "status", "end_offset",
                                  "begin_offset") if c in offsets.columns]
    return (by_group(frame).groupBy("group_id").cogroup(by_group(offsets.select(*offset_columns)).groupBy("group_id"))
            .applyInPandas(one_group, ddl))


def metadata_check(assignor_audit_df):
    """Per group: how many re-runs verified the topic metadata against the recorded hash, and how many did not."""
    from pyspark.sql import functions as F

    reruns = assignor_audit_df.filter(F.col("kind") == "rerun")
    return reruns.groupBy("group_id", "group_type").agg(
        F.count("*").alias("assignments"),
        F.sum(F.when(F.col("metadata_hash_match"), 1).otherwise(0)).alias("hash_verified"),
        F.sum(F.when(F.col("metadata_hash_match") == F.lit(False), 1).otherwise(0)).alias("hash_mismatched"),
        F.sum(F.when(F.col("metadata_hash_match").isNull(), 1).otherwise(0)).alias("hash_absent"),
        F.sum(F.when(F.col("snapshot_hash_match"), 1).otherwise(0)).alias("snapshot_verified"),
        F.sum(F.when(F.col("snapshot_hash_match") == F.lit(False), 1).otherwise(0)).alias("snapshot_mismatched"),
        F.sum(F.when(F.col("match"), 1).otherwise(0)).alias("matched"),
    ).withColumn("snapshot_matches", F.when(F.col("snapshot_verified") + F.col("snapshot_mismatched") > 0,
                                            F.col("snapshot_mismatched") == 0))


def to_json_rows(df) -> list[dict]:
    """Collected rows as plain dicts (tests and the HTML report)."""
    return [json.loads(json.dumps(r.asDict(), default=str)) for r in df.collect()]
