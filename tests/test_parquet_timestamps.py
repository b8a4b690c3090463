"""A dump's ``timestamp`` written as epoch milliseconds (text or whole numbers, as Kafka's tools and JSON exports
print a record's time) or as ISO-8601 text reads as the record's time; text that is neither stops the run before
Spark with one line naming the file."""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offsets_audit.errors import UserError
from offsets_audit.sources.parquet import check_parquet_files, record_time

MS = 1_754_000_359_874
AT = _dt.datetime.fromtimestamp(MS / 1000, _dt.timezone.utc)


@pytest.mark.spark
def test_epoch_milliseconds_as_text_or_numbers_and_iso_text_read_as_the_record_time(spark):
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    text = spark.createDataFrame([(str(MS),), (" 0 ",), ("2025-07-31T22:19:19.874Z",), (None,)], "timestamp string")
    got = [r["timestamp"] for r in record_time(text).collect()]
    assert got[0] == got[2] == AT.replace(tzinfo=None)
    assert got[1] == _dt.datetime(1970, 1, 1) and got[3] is None
    numbers = spark.createDataFrame([(MS,)], "timestamp long")
    assert record_time(numbers).first()["timestamp"] == AT.replace(tzinfo=None)


def test_text_that_is_no_time_is_refused_before_spark(tmp_path):
    table = pa.table({"key": [b"k"], "value": [b"v"], "partition": pa.array([0], pa.int32()),
                      "offset": pa.array([0], pa.int64()), "timestamp": [str(MS)]})
    pq.write_table(table, tmp_path / "good.parquet")
    check_parquet_files(str(tmp_path))
    pq.write_table(table.set_column(4, "timestamp", pa.array(["yesterday"])), tmp_path / "bad.parquet")
    with pytest.raises(UserError, match=r"bad.parquet in the Parquet dump .*: timestamp 'yesterday' is neither epoch "
                                        r"milliseconds nor an ISO-8601 date-time"):
        check_parquet_files(str(tmp_path))
