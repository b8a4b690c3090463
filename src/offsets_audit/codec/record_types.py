"""The coordinator's record types, by the int16 version prefix of a ``__consumer_offsets`` key.

``schemas/record_types.json`` holds the facts (name, key and value schemas); this enum names them in code so that
no module spells a record type as a bare number (``tests/test_record_types.py`` checks the two agree).
"""
from __future__ import annotations

from enum import IntEnum

__all__ = ["RecordType"]


class RecordType(IntEnum):
    """The coordinator's record types (``CoordinatorRecordType``), by the int16 version of the key;
    ``schemas/record_types.json`` is the source of these facts (a test checks they agree)."""

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    SHARE_GROUP_PARTITION_METADATA = 9
    SHARE_GROUP_MEMBER_METADATA = 10
    SHARE_GROUP_METADATA = 11
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
    SHARE_GROUP_STATE_PARTITION_METADATA = 15
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_PARTITION_METADATA = 18
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
    STREAMS_GROUP_TOPOLOGY = 23

    @property
    def schema_name(self) -> str:
        """The record's name in ``schemas/record_types.json`` (``ConsumerGroupMetadata``)."""
        return "".join(word.capitalize() for word in self.name.split("_"))
