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


def test_each_group_kind_replays_exactly_its_family_by_record_type_name():
    from offsets_audit.replay import consumer, share, streams

    for module, family in ((consumer, CONSUMER_RECORD_TYPES), (share, SHARE_RECORD_TYPES),
                           (streams, STREAMS_RECORD_TYPES)):
        handlers = module._HANDLERS
        assert all(type(t) is RecordType for t in handlers), module.__name__
        assert set(handlers) == family, module.__name__


def test_the_event_kinds_are_the_strings_the_group_events_table_holds():
    import json

    from offsets_audit.replay.events import EventKind

    assert all(json.dumps(kind) == json.dumps(kind.value) and f"{kind}" == kind.value for kind in EventKind)
