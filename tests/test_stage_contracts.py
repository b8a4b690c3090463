"""The stage contracts (``ReplayTables``, ``AuditTables``) and the fold's typed Arrow rows."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from replay_support import HISTORIES, load_expected


def test_the_tables_registry_is_the_contracts_written_fields():
    from offsets_audit import tables
    from offsets_audit.audit.spark import AuditTables
    from offsets_audit.replay.spark import ReplayTables

    replay_outputs = ReplayTables.ddls()
    assert list(replay_outputs) == ["group_state", "members", "group_events", "target_assignments", "offsets"]
    assert "offset_commits" in ReplayTables.ddls(outputs_only=False)  # read by the audit, never written
    # plans handed on as they are: the job materialises the fold's rows and the digest (the replay's ``cached``), of
    # which the tables are views, never the whole log or the decoded commits
    assert ReplayTables.lazy() == {"group_state", "members", "group_events", "target_assignments", "offsets",
                                   "offset_commits", "commit_records", "commit_runs"} and not AuditTables.lazy()
    assert list(AuditTables.ddls()) == ["findings", "rebalances", "latency_summary", "rebalance_causes",
                                       "coordinator_load", "assignment_interval_whatif"]
    for name, ddl in {**replay_outputs, **AuditTables.ddls()}.items():
        assert tables.ddl(name) == ddl


def test_contracts_are_frozen_and_read_like_the_dicts_they_replaced():
    import dataclasses

    from offsets_audit.replay.spark import ReplayTables

    replayed = ReplayTables(group_state="s", members="m", group_events="e", target_assignments="t", offsets="o")
    assert replayed["offsets"] == "o" and replayed.get("offset_commits") is None
    assert replayed.as_dict(outputs_only=True) == {"group_state": "s", "members": "m", "group_events": "e",
                                                   "target_assignments": "t", "offsets": "o"}
    assert replayed.map(str.upper).offsets == "O" and replayed.map(str.upper).offset_commits is None
    with pytest.raises(KeyError):
        replayed["findings"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        replayed.offsets = "x"  # type: ignore[misc]


@pytest.mark.spark
def test_typed_fold_rows_equal_the_json_payloads(spark):
    """The batch fold's Arrow structs carry exactly what the JSON payloads of ``fold_frame`` / ``state_rows``
    (the streaming fold's form) carry, on a golden history of each group type."""
    import pandas as pd
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    from offsets_audit.codec import decode_record
    from offsets_audit.codec.spark import DECODED_RECORD_COLUMN, decode_columns
    from offsets_audit.replay.fold import GroupFold
    from offsets_audit.replay.spark import FOLD_OUTPUT_DDL, _fold_group, fold_frame, state_rows

    schema = to_arrow_schema(_parse_datatype_string(FOLD_OUTPUT_DDL))
    for name in ("history-consumer-group", "history-simple-and-txn-commits", "history-streams-group"):
        by_group: dict = {}
        for r in load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"):
            if r["is_control"]:
                continue
            key = decode_record(r["key"], r["value"]).key
            by_group.setdefault(key.get("group") or key.get("groupId"), []).append(r)
        for group_id, records in by_group.items():
            columns = {"key": [r["key"] for r in records], "value": [r["value"] for r in records],
                       "partition": [r["partition"] for r in records], "offset": [r["offset"] for r in records],
                       "timestamp_ms": [r["timestamp"] for r in records]}
            fold = GroupFold(group_id)
            expected = [(kind, json.loads(payload)) for kind, _, payload in
                        fold_frame(fold, pd.DataFrame(columns)) + state_rows(fold)]
            batch = pa.RecordBatch.from_pydict(columns)
            got = [(row["kind"], row[row["kind"]]) for out in _fold_group(group_id, iter([batch]), schema)
                   for row in out.to_pylist()]
            assert [kind for kind, _ in got] == [kind for kind, _ in expected], (name, group_id)
            for (kind, typed), (_, parsed) in zip(got, expected):
                assert typed == {field: parsed.get(field) for field in typed}, (name, group_id, kind)
            # As the job runs it: group records as the codec decoded them (``decoded_record``), bytes only where
            # that is null (offset commits, flat records): the same rows, without a second decode.
            blobs = decode_columns(columns["key"], columns["value"], with_decoded_record=True)[DECODED_RECORD_COLUMN]
            assert any(b is not None for b in blobs) or name == "history-simple-and-txn-commits"
            from_codec = {**columns, DECODED_RECORD_COLUMN: blobs,
                          "key": [k if b is None else None for k, b in zip(columns["key"], blobs)],
                          "value": [v if b is None else None for v, b in zip(columns["value"], blobs)]}
            batch = pa.RecordBatch.from_pydict(from_codec, schema=pa.schema(
                [*batch.schema, pa.field(DECODED_RECORD_COLUMN, pa.binary())]))
            again = [(row["kind"], row[row["kind"]]) for out in _fold_group(group_id, iter([batch]), schema)
                     for row in out.to_pylist()]
            assert again == got, (name, group_id)
