"""The batch replay streams each group through the fold in Arrow batches, in log order: a group with a long
history never needs all its records in memory at once. Tiny batches must give the same tables."""
from __future__ import annotations

import pytest

from replay_support import HISTORIES, load_expected, source_df
from test_replay_spark import HISTORY_NAMES

pytestmark = pytest.mark.spark


def _replay_rows(spark, records):
    from offsets_audit.codec.spark import decode
    from offsets_audit.replay.spark import replay

    tables = replay(decode(source_df(spark, records)))
    return {name: sorted(map(str, df.collect())) for name, df in tables.as_dict().items() if name != "offsets"}


def test_groups_folded_in_many_small_batches_equal_one_batch_per_group(spark):
    records = []
    for name in HISTORY_NAMES:
        for r in load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"):
            r["partition"] = HISTORY_NAMES.index(name)
            records.append(r)
    whole = _replay_rows(spark, records)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        batched = _replay_rows(spark, records)
    finally:
        spark.conf.set(key, previous)
    assert batched == whole
    assert len(whole["group_events"]) > 100
