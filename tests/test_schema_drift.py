"""The schema drift guard: ``schemas/`` against the record schemas Kafka's jar defines.

The default suite compares the suite's Kafka version (one oracle JVM); ``make schema-drift`` compares every
release line the oracle builds for. The guard itself is checked on edited copies of ``schemas/``: what Kafka has
and we lack, or date wrongly, is named with its record, version and field.
"""
from __future__ import annotations

import copy

import pytest

import kafka_jars
import oracle
import schema_drift
from offsets_audit.codec.schema import load_schemas

VERSION = kafka_jars.DEFAULT_KAFKA_VERSION


@pytest.fixture(scope="module")
def kafka_schemas():
    return oracle.record_schemas(version=VERSION)


def test_schemas_match_the_record_schemas_of_kafkas_jar(kafka_schemas):
    assert schema_drift.drift(kafka_schemas, VERSION) == []


def test_a_field_or_tag_kafka_writes_and_we_lack_is_named(kafka_schemas):
    ours = copy.deepcopy(load_schemas())
    member = ours.record_types[5].value  # ConsumerGroupMemberMetadataValue
    member.fields = [f for f in member.fields if f.name not in ("rackId", "classicMemberMetadata")]
    lines = schema_drift.drift(kafka_schemas, VERSION, ours)
    assert any("ConsumerGroupMemberMetadataValue v0" in line and "lacks field 'rack_id'" in line for line in lines)
    assert any("lacks tagged field 'classic_member_metadata' (tag 0)" in line for line in lines)


def test_a_record_type_we_lack_is_named(kafka_schemas):
    ours = copy.deepcopy(load_schemas())
    del ours.record_types[23]
    assert any(line.startswith("record type 23 (StreamsGroupTopologyValue)") for line in
               schema_drift.drift(kafka_schemas, VERSION, ours))


def test_a_field_dated_too_early_is_named_for_the_release_without_it(kafka_schemas):
    ours = copy.deepcopy(load_schemas())
    for f in ours.record_types[17].value.fields:  # StreamsGroupMetadataValue's topology-epoch tags came in 4.4
        if f.name.endswith("DescriptionTopologyEpoch"):
            f.since = None
    kafka_4_2 = copy.deepcopy(kafka_schemas)
    for entry in kafka_4_2["record_types"]:
        if entry["record_type"] == 17:
            entry["value"]["versions"]["0"]["tagged_fields"] = [
                t for t in entry["value"]["versions"]["0"]["tagged_fields"] if t["tag"] < 2]
    lines = schema_drift.drift(kafka_4_2, "4.2.1", ours)
    assert any("StreamsGroupMetadataValue v0 (Kafka 4.2.1)" in line and "'storedDescriptionTopologyEpoch' (tag 2)"
               in line and "since" in line for line in lines)
    assert not any("DescriptionTopologyEpoch" in line for line in schema_drift.drift(kafka_4_2, "4.2.1"))
