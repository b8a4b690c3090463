"""Text exactly as Jackson's ``JsonNode.toString()`` prints it (what kafka-dump-log writes).

Jackson writes compact JSON (no spaces), non-ASCII characters as they are, escapes ``"`` ``\\`` and control
characters (``\\b \\f \\n \\r \\t``, the rest as ``\\u00XX`` with upper-case hex). Python's ``json`` does the
same except for the hex case, which we fix.
"""

from __future__ import annotations

import json as _json
import re

_ENCODER = _json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True)
_LOWER_HEX_ESCAPE = re.compile(r"(\\\\)|\\u00([0-9a-f]{2})")


def _upper(match: re.Match) -> str:
    if match.group(1):
        return match.group(1)
    return "\\u00" + match.group(2).upper()


def jackson_dumps(value) -> str:
    """Serialise plain JSON data the way Jackson's ObjectNode.toString does."""
    text = _ENCODER.encode(value)
    if "\\u00" in text:
        text = _LOWER_HEX_ESCAPE.sub(_upper, text)
    return text


def dumps(value) -> str:
    """Compact JSON for table columns (same text as jackson_dumps)."""
    return jackson_dumps(value)
