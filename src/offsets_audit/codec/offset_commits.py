"""Offset commits as typed columns: what the codec's Spark edge adds to the ~90 % of records that are commits.

Shared by both decoders (``codec.spark`` one record at a time, ``codec.vectorised`` column-wise), so it sits
below them.
"""
from __future__ import annotations

import pyarrow as pa

from offsets_audit.codec.record_types import RecordType

__all__ = ["OFFSET_COMMIT_RECORD_TYPES", "OFFSET_COMMIT_TYPE_IDS", "OFFSET_COMMIT_VALUE_FIELDS",
           "OFFSET_COMMIT_VALUE_SOURCES"]

#: Offset commits (types 0 and 1: ~90 % of the log) also get their value as typed columns, so that the
#: commit log (``replay.commit_log``) reads them without parsing ``value_json`` again. Field -> (Arrow type,
#: Spark DDL type). A field is null where ``value_json`` does not
#: print it: ``leader_epoch`` before v3, ``expire_timestamp`` outside v1, ``topic_id`` when the tagged field
#: is absent.
OFFSET_COMMIT_VALUE_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "offset": (pa.int64(), "bigint"),
    "leader_epoch": (pa.int32(), "int"),
    "metadata": (pa.string(), "string"),
    "commit_timestamp": (pa.int64(), "bigint"),
    "expire_timestamp": (pa.int64(), "bigint"),
    "topic_id": (pa.string(), "string"),
}
#: typed field -> OffsetCommitValue field name (as Kafka's message spec and ``value_json`` spell it)
OFFSET_COMMIT_VALUE_SOURCES = {"offset": "offset", "leader_epoch": "leaderEpoch", "metadata": "metadata",
                               "commit_timestamp": "commitTimestamp", "expire_timestamp": "expireTimestamp",
                               "topic_id": "topicId"}
OFFSET_COMMIT_RECORD_TYPES = frozenset({RecordType.LEGACY_OFFSET_COMMIT, RecordType.OFFSET_COMMIT})
#: The same types as plain ints, in order: for ``isin`` over a ``record_type`` column.
OFFSET_COMMIT_TYPE_IDS = tuple(sorted(int(t) for t in OFFSET_COMMIT_RECORD_TYPES))
