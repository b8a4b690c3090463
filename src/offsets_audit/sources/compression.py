"""Kafka's record-batch compression codecs, byte-compatible with the Java client's streams.

Codec ids are the low three bits of a batch's (or legacy wrapper message's) attributes, as in Kafka's
``CompressionType``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Framing mirrored from Kafka's ``org.apache.kafka.common.compress`` package:

* gzip: one RFC 1952 member (``GZIPOutputStream``); readers accept concatenated members.
* snappy: xerial ``SnappyOutputStream`` framing (an 8-byte magic, two int32 version fields, then
  ``int32 length + raw snappy block`` chunks). Readers also accept raw snappy and the Google framing format.
* lz4: an LZ4 frame (``Lz4BlockOutputStream``): FLG 0x60 (version 1, independent blocks, no checksums),
  BD 0x40 (64 KiB blocks), no content size. Magic-0 messages written by old clients carry a header checksum
  computed over the magic number too (KAFKA-3160); readers accept both checksums, as Kafka does for magic 0.
* zstd: a standard zstd frame, streamed (no content size, closed by an empty last block), level 3.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import xxhash

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
COMPRESSION_IDS = {name: codec_id for codec_id, name in enumerate(COMPRESSION_NAMES)}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024


class DecompressionError(Exception):
    """A compressed payload that the codec cannot decode."""


def decompress(codec_id: int, data: bytes) -> bytes:
    """Decompress ``data`` written with Kafka codec ``codec_id`` (1-4); raises DecompressionError."""
    try:
        if codec_id == 1:
            return _gunzip(data)
        if codec_id == 2:
            return _unsnappy(data)
        if codec_id == 3:
            return _unlz4(data)
        if codec_id == 4:
            return bytes(cramjam.zstd.decompress(data))
    except DecompressionError:
        raise
    except Exception as exc:  # every codec library raises its own exception types
        raise DecompressionError(f"{COMPRESSION_NAMES[codec_id]}: {exc}") from exc
    raise DecompressionError(f"unknown compression codec id {codec_id}")


def compress(codec_id: int, data: bytes) -> bytes:
    """Compress ``data`` the way Kafka's Java producer/coordinator streams frame it."""
    if codec_id == 0:
        return bytes(data)
    if codec_id == 1:
        # GZIPOutputStream: header with mtime 0, no name, OS byte 0xff ("unknown"), as Java writes it.
        body = zlib.compressobj(6, zlib.DEFLATED, -15)
        deflated = body.compress(data) + body.flush()
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        return header + deflated + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    if codec_id == 2:
        out = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec_id == 3:
        descriptor = b"\x60\x40"
        out = [_LZ4_MAGIC, descriptor, bytes([(xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF])]
        for start in range(0, len(data), _LZ4_BLOCK):
            chunk = data[start:start + _LZ4_BLOCK]
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
            if len(block) >= len(chunk):
                out.append(struct.pack("<I", len(chunk) | 0x80000000))
                out.append(bytes(chunk))
            else:
                out.append(struct.pack("<I", len(block)))
                out.append(block)
        out.append(b"\x00\x00\x00\x00")
        return b"".join(out)
    if codec_id == 4:
        # Streamed like zstd-jni's ZstdOutputStream: no content size in the frame, an empty last block on close.
        stream = cramjam.zstd.Compressor(level=3)
        stream.compress(data)
        return bytes(stream.flush()) + bytes(stream.finish())
    raise ValueError(f"unknown compression codec id {codec_id}")


def _gunzip(data: bytes) -> bytes:
    out = []
    rest = data
    while True:
        inflater = zlib.decompressobj(31)
        out.append(inflater.decompress(rest))
        if not inflater.eof:
            raise DecompressionError("gzip: stream ends before the end of the compressed data")
        rest = inflater.unused_data
        if not rest.strip(b"\x00"):
            return b"".join(out)


def _unsnappy(data: bytes) -> bytes:
    if data[:8] == _XERIAL_MAGIC:
        out = []
        pos, end = 16, len(data)
        while pos < end:
            if pos + 4 > end:
                raise DecompressionError("snappy: truncated xerial chunk header")
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if size < 0 or pos + size > end:
                raise DecompressionError(f"snappy: xerial chunk of {size} bytes overruns the payload")
            out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + size])))
            pos += size
        return b"".join(out)
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception:
        return bytes(cramjam.snappy.decompress(data))


def _unlz4(data: bytes) -> bytes:
    try:
        return bytes(cramjam.lz4.decompress(data))
    except Exception:
        patched = _lz4_fix_header_checksum(data)
        if patched is None:
            raise
        return bytes(cramjam.lz4.decompress(patched))


def _lz4_fix_header_checksum(data: bytes) -> bytes | None:
    """Replace a KAFKA-3160 header checksum (hashed over magic + descriptor) with the standard one."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return None
    flg = data[4]
    descriptor_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= descriptor_end:
        return None
    broken = (xxhash.xxh32_intdigest(data[:descriptor_end]) >> 8) & 0xFF
    if data[descriptor_end] != broken:
        return None
    correct = (xxhash.xxh32_intdigest(data[4:descriptor_end]) >> 8) & 0xFF
    return data[:descriptor_end] + bytes([correct]) + data[descriptor_end + 1:]
