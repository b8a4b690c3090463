"""A `decode` that fails while writing leaves no `decoded/` or
`quarantine/` behind, so a plain rerun (without --overwrite) is not refused for the failed run's debris."""

from __future__ import annotations

import datetime as dt

import pytest

from offsets_audit.cli import main

pytestmark = pytest.mark.spark


def test_a_failed_decode_leaves_nothing_that_blocks_a_rerun(spark, tmp_path, capsys):
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    dump = tmp_path / "dump"
    rows = [(b"\x00\x01", b"\x00\x03", "__consumer_offsets", 0, 0, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), 0)]
    with_batch_columns(spark.createDataFrame(rows, KAFKA_SCHEMA)).write.parquet(str(dump))
    (dump / "part-99999-corrupt.parquet").write_bytes(b"PAR1 this is not a parquet file at all PAR1")
    out = tmp_path / "out"
    try:
        code = main(["decode", "--input", str(dump), "--output", str(out)])
    except Exception:   # a crash on the bad file is another defect; what matters here is what it leaves
        code = None
    capsys.readouterr()
    if code != 0:
        assert not (out / "decoded").exists() and not (out / "quarantine").exists()
        assert not [p for p in out.glob("_staging-*")] if out.exists() else True
    (dump / "part-99999-corrupt.parquet").unlink()
    assert main(["decode", "--input", str(dump), "--output", str(out)]) == (0 if code != 0 else 2)
