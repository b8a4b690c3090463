"""UTF-8 bytes to text exactly as Java's ``new String(bytes, StandardCharsets.UTF_8)`` decodes them.

Kafka reads every string field of a coordinator record through ``Readable.readString``, which builds a
Java ``String`` from the bytes: malformed input never fails, each malformed sequence becomes one U+FFFD.
Which bytes one U+FFFD covers is the JDK's choice (``java.lang.String`` decoding, JDK 17 and 25 alike),
and it is not Python's ``errors="replace"`` in every case:

* a three-byte sequence ``ED A0..BF xx`` (a UTF-16 surrogate written in UTF-8) is one U+FFFD in Java,
  three in Python; ``ED A0..BF`` followed by a non-continuation byte, or ending the string, is one in
  Java, two in Python;
* every other malformed sequence is replaced the same way in both: a lead byte whose second byte is out
  of its range (``E0 80..9F``, ``F0 80..8F``, ``F4 90..BF``, ``F5..F7``) or not a continuation byte is one
  U+FFFD and decoding resumes at the second byte; a lead byte with a valid second byte but a bad third
  (or fourth) covers the bytes up to the bad one; a truncated sequence at the end is one U+FFFD; stray
  continuation bytes and ``C0``, ``C1``, ``F8..FF`` are one U+FFFD each.

Well-formed UTF-8 decodes identically in both (both reject overlong forms, surrogates and code points
above U+10FFFF), so the strict Python decoder is the fast path and this module is only reached on error.
``tests/test_codec_java_utf8.py`` checks it against the JVM that runs Spark.
"""

from __future__ import annotations

import codecs

REPLACEMENT = "\ufffd"
ERROR_HANDLER = "offsets_audit_java_utf8"


def _continuation(b: int) -> bool:
    return 0x80 <= b <= 0xBF


def _second_byte_ok(lead: int, b2: int) -> bool:
    """Whether ``b2`` may follow ``lead`` in well-formed UTF-8, as far as Java checks it here."""
    if lead == 0xE0:
        return 0xA0 <= b2 <= 0xBF
    if lead == 0xF0:
        return 0x90 <= b2 <= 0xBF
    if lead == 0xF4:
        return 0x80 <= b2 <= 0x8F
    return _continuation(b2)  # ED A0..BF passes here: Java sees the surrogate only once it has all 3 bytes


def malformed_length(data: bytes, at: int) -> int:
    """How many bytes Java's decoder replaces with one U+FFFD for the malformed sequence starting at ``at``."""
    lead = data[at]
    left = len(data) - at
    if 0xE0 <= lead <= 0xEF:
        if left >= 2 and not _second_byte_ok(lead, data[at + 1]):
            return 1
        if left >= 3:
            # a valid second byte: the third decides (ED A0..BF + continuation is a surrogate: all three)
            return 3 if _continuation(data[at + 2]) else 2
        return left  # truncated at the end: one U+FFFD for what is left
    if 0xF0 <= lead <= 0xF7:
        if lead > 0xF4 or (left >= 2 and not _second_byte_ok(lead, data[at + 1])):
            return 1
        if left >= 3 and not _continuation(data[at + 2]):
            return 2
        if left >= 4:
            return 3  # the fourth byte is the bad one
        return left
    return 1  # stray continuation, C0/C1/F8..FF, or a two-byte lead without its continuation


def _handler(exc: UnicodeDecodeError):
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return REPLACEMENT, exc.start + malformed_length(exc.object, exc.start)


codecs.register_error(ERROR_HANDLER, _handler)  # type: ignore[arg-type]  # it refuses all but decode errors


def decode_java_utf8(data: bytes) -> tuple[str, int | None]:
    """``(text, index of the first malformed byte or None)``: the String Java builds from ``data``."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        first = exc.start
    return data.decode("utf-8", ERROR_HANDLER), first
