"""``RecordType`` agrees with ``schemas/record_types.json``: every record type, its number and its name."""
from __future__ import annotations

import json
from importlib import resources

from offsets_audit.replay.state import (CLASSIC_RECORD_TYPES, CONSUMER_RECORD_TYPES, OFFSET_RECORD_TYPES,
                                        SHARE_RECORD_TYPES, STREAMS_RECORD_TYPES, RecordType)


def test_record_type_enum_matches_the_schemas():
    spec = json.loads(resources.files("offsets_audit").joinpath("schemas/record_types.json").read_text())
    in_schemas = {r["record_type"]: r["name"] for r in spec["record_types"]}
    assert {t.value: t.schema_name for t in RecordType} == in_schemas


def test_every_record_type_belongs_to_exactly_one_family():
    families = [OFFSET_RECORD_TYPES, CLASSIC_RECORD_TYPES, CONSUMER_RECORD_TYPES, SHARE_RECORD_TYPES,
                STREAMS_RECORD_TYPES]
    assert sorted(t for f in families for t in f) == sorted(RecordType)
