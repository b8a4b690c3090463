"""Live Kafka source, pure core without a broker: options like Spark's Kafka source, range planning, and the
read loop's rules (stop at the end offset across gaps, resume after transient errors) over a fake consumer."""

from __future__ import annotations

from collections import namedtuple

import kafka.errors
import pytest
from hypothesis import given, strategies as st

from offsets_audit.errors import UserError
from offsets_audit.sources import kafka as source
from offsets_audit.sources.kafka import OffsetRange, parse_options, split_range
from offsets_audit.sources.schema import SOURCE_SCHEMA

BOOTSTRAP = {"kafka.bootstrap.servers": "broker-1:9092"}
Record = namedtuple("Record", "topic partition offset key value timestamp timestamp_type")


def options(**extra):
    return {**BOOTSTRAP, **extra}


# --- options -------------------------------------------------------------------------------------------------

def test_defaults_read_consumer_offsets_earliest_to_latest_read_committed():
    config = parse_options(BOOTSTRAP)
    assert config.topics == ("__consumer_offsets",)
    assert (config.starting_offsets, config.ending_offsets) == ("earliest", "latest")
    assert config.isolation_level == "read_committed"


def test_option_names_are_case_insensitive_like_spark():
    config = parse_options({"KAFKA.BOOTSTRAP.SERVERS": "b:1", "Subscribe": "t1,t2", "STARTINGOFFSETS": "earliest"})
    assert config.bootstrap_servers == "b:1"
    assert config.topics == ("t1", "t2")


def test_missing_bootstrap_servers_names_the_option():
    with pytest.raises(UserError, match="kafka.bootstrap.servers"):
        parse_options({"subscribe": "t"})


def test_per_partition_json_offsets_use_minus_two_for_earliest_and_minus_one_for_latest():
    config = parse_options(options(startingOffsets='{"t":{"0":23,"1":-2}}', endingOffsets='{"t":{"0":-1,"1":40}}'))
    assert config.starting_offsets == {"t": {0: 23, 1: -2}}
    assert config.ending_offsets == {"t": {0: -1, 1: 40}}


@pytest.mark.parametrize("name,value", [
    ("startingOffsets", "latest"), ("endingOffsets", "earliest"),
    ("startingOffsets", '{"t":{"0":-1}}'), ("endingOffsets", '{"t":{"0":-2}}'),
    ("startingOffsets", "yesterday"), ("endingOffsets", '{"t":[1,2]}'), ("startingOffsets", '{"t":{"0":-7}}'),
])
def test_offsets_that_cannot_bound_a_batch_read_are_refused(name, value):
    with pytest.raises(UserError, match=name if "Offsets" in name else "offset"):
        parse_options(options(**{name: value}))


def test_isolation_level_defaults_to_read_committed_and_accepts_both_spellings():
    assert parse_options(options(**{"kafka.isolation.level": "read_uncommitted"})).isolation_level == "read_uncommitted"
    assert parse_options(options(**{"isolation.level": "read_uncommitted"})).isolation_level == "read_uncommitted"
    with pytest.raises(UserError, match="isolation level"):
        parse_options(options(**{"isolation.level": "dirty"}))


def test_security_options_translate_to_kafka_python_settings():
    config = parse_options(options(**{
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="auditor" password="s3cr\\"et";',
        "kafka.ssl.truststore.location": "/etc/ca.pem", "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }))
    assert config.client_options == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "auditor",
        "sasl_plain_password": 's3cr\\"et', "ssl_cafile": "/etc/ca.pem", "ssl_check_hostname": False,
    }


def test_secrets_never_appear_in_repr_or_description():
    config = parse_options(options(**{"kafka.sasl.password": "hunter2", "kafka.sasl.username": "me",
                                      "kafka.ssl.key.password": "pw2"}))
    assert "hunter2" not in repr(config) and "pw2" not in repr(config)
    described = str(config.describe())
    assert "hunter2" not in described and "pw2" not in described and "me" in described


def test_jks_truststore_is_refused_with_the_pem_fix():
    with pytest.raises(UserError, match="PEM"):
        parse_options(options(**{"kafka.ssl.truststore.location": "/etc/truststore.jks"}))


@pytest.mark.parametrize("key", ["kafka.enable.auto.commit", "kafka.auto.offset.reset", "kafka.no.such.setting"])
def test_consumer_settings_the_reader_owns_or_does_not_know_are_refused(key):
    with pytest.raises(UserError, match=key):
        parse_options(options(**{key: "x"}))


def test_generic_kafka_options_pass_through_typed():
    config = parse_options(options(**{"kafka.client.id": "audit", "kafka.fetch.max.wait.ms": "250"}))
    assert config.client_options == {"client_id": "audit", "fetch_max_wait_ms": 250}


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=5))
def test_bad_option_values_raise_user_errors_only(extra):
    try:
        parse_options({**extra, **BOOTSTRAP})
    except UserError:
        pass


# --- planning ------------------------------------------------------------------------------------------------

def test_long_ranges_split_into_pieces_of_max_records_per_partition():
    pieces = split_range(OffsetRange("t", 3, 10, 35), 10)
    assert [(p.start, p.end) for p in pieces] == [(10, 20), (20, 30), (30, 35)]
    assert split_range(OffsetRange("t", 3, 10, 35), None) == [OffsetRange("t", 3, 10, 35)]
    assert split_range(OffsetRange("t", 3, 7, 7), 10) == []


@given(st.integers(0, 10**6), st.integers(0, 5000), st.integers(1, 700))
def test_split_ranges_cover_the_range_exactly(start, size, max_records):
    pieces = split_range(OffsetRange("t", 0, start, start + size), max_records)
    covered = [o for p in pieces for o in range(p.start, p.end)]
    assert covered == list(range(start, start + size))
    assert all(p.size <= max_records for p in pieces)


class FakeConsumer:
    """Enough of kafka-python's KafkaConsumer: a log with offset gaps, fetched ``per_poll`` records at a time."""

    def __init__(self, log, *, per_poll=2, low=0, fail_at_poll=None, end=None):
        self.log, self.per_poll, self.low, self.fail_at_poll = log, per_poll, low, fail_at_poll
        self.polls = 0
        self.end = end if end is not None else (log[-1].offset + 1 if log else 0)
        self._position = {}
        self.closed = False

    def partitions_for_topic(self, topic):
        return {r.partition for r in self.log if r.topic == topic} or None

    def beginning_offsets(self, tps, timeout_ms=None):
        return {tp: self.low for tp in tps}

    def end_offsets(self, tps, timeout_ms=None):
        return {tp: self.end for tp in tps}

    def assign(self, tps):
        self.tps = tps

    def seek(self, tp, offset):
        self._position[tp] = offset

    def position(self, tp):
        return self._position[tp]

    def poll(self, timeout_ms=0):
        self.polls += 1
        if self.polls == self.fail_at_poll:
            raise kafka.errors.KafkaConnectionError("broker went away")
        tp = self.tps[0]
        batch = [r for r in self.log if r.offset >= self._position[tp]][: self.per_poll]
        if batch:
            self._position[tp] = batch[-1].offset + 1
        else:
            self._position[tp] = max(self._position[tp], self.end)
        return {tp: batch} if batch else {}

    def close(self):
        self.closed = True


def gapped_log(offsets):
    return [Record("t", 0, o, b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o, 0) for o in offsets]


def install(monkeypatch, *consumers):
    queue = list(consumers)
    monkeypatch.setattr(source, "new_consumer", lambda config: queue.pop(0))
    return queue


def test_plan_resolves_earliest_latest_and_json_offsets_per_partition(monkeypatch):
    log = gapped_log([0, 1, 2, 5, 9])
    install(monkeypatch, FakeConsumer(log, low=0, end=12))
    assert source.plan_ranges(options(subscribe="t")) == [OffsetRange("t", 0, 0, 12)]
    install(monkeypatch, FakeConsumer(log, low=0, end=12))
    assert source.plan_ranges(options(subscribe="t", startingOffsets='{"t":{"0":4}}',
                                      endingOffsets='{"t":{"0":99}}')) == [OffsetRange("t", 0, 4, 12)]


def test_plan_refuses_a_starting_offset_below_the_log_start_unless_fail_on_data_loss_is_false(monkeypatch):
    log = gapped_log([5, 6])
    install(monkeypatch, FakeConsumer(log, low=5))
    with pytest.raises(UserError, match="log starts at 5"):
        source.plan_ranges(options(subscribe="t", startingOffsets='{"t":{"0":2}}'))
    install(monkeypatch, FakeConsumer(log, low=5))
    assert source.plan_ranges(options(subscribe="t", startingOffsets='{"t":{"0":2}}', failOnDataLoss="false")) == [
        OffsetRange("t", 0, 5, 7)]


def test_plan_names_a_missing_topic(monkeypatch):
    install(monkeypatch, FakeConsumer(gapped_log([0])))
    with pytest.raises(UserError, match="topic nope does not exist"):
        source.plan_ranges(options(subscribe="nope"))


def test_read_stops_at_the_end_offset_across_offset_gaps(monkeypatch):
    install(monkeypatch, FakeConsumer(gapped_log([0, 1, 4, 7, 8, 12, 13]), per_poll=3))
    rows = list(source.read_range(options(), OffsetRange("t", 0, 1, 12)))
    assert [r["offset"] for r in rows] == [1, 4, 7, 8]


def test_read_stops_when_the_last_offsets_before_the_end_are_gone(monkeypatch):
    # offsets 9..11 were compacted away or were transaction markers: the position still reaches the end.
    install(monkeypatch, FakeConsumer(gapped_log([0, 3, 8]), end=12))
    rows = list(source.read_range(options(), OffsetRange("t", 0, 0, 12)))
    assert [r["offset"] for r in rows] == [0, 3, 8]


def test_rows_have_source_schema_columns_with_batch_attributes_null(monkeypatch):
    install(monkeypatch, FakeConsumer(gapped_log([0])))
    (row,) = source.read_range(options(), OffsetRange("t", 0, 0, 1))
    assert list(row) == SOURCE_SCHEMA.fieldNames()
    assert row["timestamp"].isoformat() == "2023-11-14T22:13:20+00:00"
    assert row["timestampType"] == 0
    assert all(row[name] is None for name in source.BATCH_COLUMNS)


def test_transient_errors_reconnect_and_resume_without_duplicates(monkeypatch):
    log = gapped_log(range(6))
    broken = FakeConsumer(log, per_poll=2, fail_at_poll=2)
    install(monkeypatch, broken, FakeConsumer(log, per_poll=2))
    rows = list(source.read_range(options(retryBackoffMs="0"), OffsetRange("t", 0, 0, 6)))
    assert [r["offset"] for r in rows] == list(range(6))
    assert broken.closed


def test_unreachable_broker_gives_one_line_error_after_fetch_retries(monkeypatch):
    attempts = []

    def refuse(config):
        attempts.append(1)
        raise kafka.errors.KafkaTimeoutError("Unable to bootstrap from broker-1:9092")

    monkeypatch.setattr(source, "new_consumer", refuse)
    with pytest.raises(source.KafkaUnreachableError) as caught:
        source.plan_ranges(options(fetchRetries="2", retryBackoffMs="0"))
    assert len(attempts) == 2
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("could not reach Kafka at broker-1:9092 after 2 tries")
    assert "check kafka.bootstrap.servers" in message
