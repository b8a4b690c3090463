"""Golden segment cases shared by the segment reader, writer and Spark source tests."""

from __future__ import annotations

import base64
import json
import lzma
import re
from dataclasses import dataclass
from pathlib import Path

GOLDEN_FIELDS_DROPPED = ("dump_key", "dump_payload")


@dataclass(frozen=True)
class SegmentCase:
    name: str
    log: Path
    expected: Path
    partition: int

    def expected_records(self) -> list[dict]:
        """Golden lines as ``read_segment`` dicts: key/value bytes, no dump_* fields, no headers."""
        opener = lzma.open if self.expected.suffix == ".xz" else open
        with opener(self.expected, "rt", encoding="utf-8") as handle:
            return [to_record(json.loads(line)) for line in handle]


def to_record(line: dict) -> dict:
    record = {k: v for k, v in line.items() if k not in GOLDEN_FIELDS_DROPPED + ("key_b64", "value_b64")}
    record["key"] = None if line["key_b64"] is None else base64.b64decode(line["key_b64"])
    record["value"] = None if line["value_b64"] is None else base64.b64decode(line["value_b64"])
    return record


def segment_cases(golden: Path) -> list[SegmentCase]:
    """Every golden segment (segments/manifest.jsonl) and every history segment, including history-many-groups."""
    cases = []
    with open(golden / "segments" / "manifest.jsonl", encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            cases.append(SegmentCase(entry["file"], golden / "segments" / entry["file"],
                                     golden / "segments" / entry["expected"], entry["partition"]))
    for log in sorted((golden / "histories").rglob("*.log")):
        stem = log.name[:-len(".log")]
        expected = log.with_name(stem + ".expected.jsonl")
        if not expected.exists():
            expected = log.with_name(stem + ".expected.jsonl.xz")
        match = re.search(r"-p(\d+)-\d{20}$", stem)
        cases.append(SegmentCase(log.name, log, expected, int(match.group(1)) if match else 0))
    return cases


def golden_dir() -> Path:
    """Same resolution as conftest's ``golden`` fixture, usable at collection time for parametrize."""
    import os

    return Path(os.environ.get("OFFSETS_AUDIT_GOLDEN", Path(__file__).resolve().parents[2] / "shared" / "golden"))


def collected_cases() -> list[SegmentCase]:
    root = golden_dir()
    return segment_cases(root) if (root / "segments").is_dir() else []
