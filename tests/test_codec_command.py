"""``offsets-audit decode``: Parquet in, decoded/ and quarantine/ out, a summary, one-line errors."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest

from offsets_audit.cli import main
from golden_files import open_golden


def test_missing_input_is_a_user_error(tmp_path, capsys):
    code = main(["decode", "--input", str(tmp_path / "nope"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.spark
def test_decode_command_writes_decoded_and_quarantine(spark, golden, tmp_path, capsys):
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = []
    with open_golden(golden / "records" / "records.jsonl") as f:
        for i, line in enumerate(f):
            g = json.loads(line)
            value = None if g["value_b64"] is None else base64.b64decode(g["value_b64"])
            rows.append((base64.b64decode(g["key_b64"]), value, "__consumer_offsets", 0, i, when, 0))
    rows.append((b"\x00\x63\x00\x00", None, "__consumer_offsets", 0, len(rows), when, 0))
    # an offset commit key with a stray byte after it: Kafka applies it, so it is decoded with a warning
    rows.append((b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00\x00", None, "__consumer_offsets", 0, len(rows), when, 0))
    source = tmp_path / "dump"
    with_batch_columns(spark.createDataFrame(rows, KAFKA_SCHEMA)).write.parquet(str(source))

    out = tmp_path / "out"
    assert main(["decode", "--input", str(source), "--input-format", "parquet", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"rows read:   {len(rows)}" in printed
    assert "quarantined: 1" in printed and "unknown_record_type" in printed and "1 OffsetCommit" in printed
    assert "decoded with warnings (applied as Kafka applies them): 1" in printed and "trailing_bytes" in printed
    decoded = spark.read.parquet(str(out / "decoded"))
    assert decoded.count() == len(rows) - 1
    [warned] = decoded.filter("decode_warnings is not null").collect()
    assert warned["offset"] == len(rows) - 1 and warned["decode_warnings"][0]["code"] == "trailing_bytes"
    quarantined = spark.read.parquet(str(out / "quarantine")).collect()
    assert [(r["offset"], r["error_code"]) for r in quarantined] == [(len(rows) - 2, "unknown_record_type")]
    assert quarantined[0]["key"] == b"\x00\x63\x00\x00"

    assert main(["decode", "--input", str(source), "--output", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
