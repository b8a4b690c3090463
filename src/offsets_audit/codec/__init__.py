"""Codec stage: ``__consumer_offsets`` key/value bytes <-> typed records, driven by ``schemas/``.

The pure core (no Spark) is ``decode_record`` / ``encode_record``; ``offsets_audit.codec.spark`` maps it
over DataFrames.
"""

from offsets_audit.codec.errors import DECODE_ERROR_CODES, DECODE_WARNING_CODES, DecodeError, DecodeWarning
from offsets_audit.codec.records import (
    DecodedRecord,
    decode_consumer_protocol,
    decode_record,
    encode_consumer_protocol,
    encode_record,
    kafka_dump_log,
)

__all__ = [
    "DECODE_ERROR_CODES", "DECODE_WARNING_CODES", "DecodeError", "DecodeWarning", "DecodedRecord",
    "decode_consumer_protocol", "decode_record", "encode_consumer_protocol", "encode_record", "kafka_dump_log",
]
