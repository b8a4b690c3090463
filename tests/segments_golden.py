"""Golden segment cases shared by the segment reader, writer and Spark source tests."""

from __future__ import annotations

import base64
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from golden_files import GOLDEN, golden_path, open_golden

GOLDEN_FIELDS_DROPPED = ("dump_key", "dump_payload")


@dataclass(frozen=True)
class SegmentCase:
    name: str
    log: Path
    expected: Path
    partition: int

    def expected_records(self) -> list[dict]:
        """Golden lines as ``read_segment`` dicts: key/value bytes, no dump_* fields, no headers."""
        with open_golden(self.expected) as handle:
            return [to_record(json.loads(line)) for line in handle]


def to_record(line: dict) -> dict:
    record = {k: v for k, v in line.items() if k not in GOLDEN_FIELDS_DROPPED + ("key_b64", "value_b64")}
    record["key"] = None if line["key_b64"] is None else base64.b64decode(line["key_b64"])
    record["value"] = None if line["value_b64"] is None else base64.b64decode(line["value_b64"])
    return record


def segment_cases(golden: Path) -> list[SegmentCase]:
    """Every golden segment (segments/manifest.jsonl) and every history segment, including history-many-groups."""
    cases = []
    with open_golden(golden / "segments" / "manifest.jsonl") as handle:
        for line in handle:
            entry = json.loads(line)
            cases.append(SegmentCase(entry["file"], golden / "segments" / entry["file"],
                                     golden / "segments" / entry["expected"], entry["partition"]))
    for log in sorted((golden / "histories").rglob("*.log")):
        stem = log.name[:-len(".log")]
        expected = golden_path(log.with_name(stem + ".expected.jsonl"))
        match = re.search(r"-p(\d+)-\d{20}$", stem)
        cases.append(SegmentCase(log.name, log, expected, int(match.group(1)) if match else 0))
    return cases


def golden_dir() -> Path:
    """The golden folder, usable at collection time for parametrize."""
    return GOLDEN


def collected_cases() -> list[SegmentCase]:
    root = golden_dir()
    return segment_cases(root) if (root / "segments").is_dir() else []


def batch_extents(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte positions of each record batch of a segment's bytes (the batch length at byte 8
    counts what follows the 12-byte offset and length prefix)."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append((pos, pos + 12 + length))
        pos += 12 + length
    return out
