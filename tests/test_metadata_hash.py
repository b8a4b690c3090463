"""KIP-1101 metadata hash against every golden line made by Kafka's ``Utils.computeTopicHash`` /
``computeGroupHash`` (``tests/golden/README.md``)."""

from __future__ import annotations

import json

import pytest
from golden_files import GOLDEN as GOLDEN_ROOT, open_golden

from offsets_audit.assignors.metadata_hash import (
    compute_group_hash,
    compute_metadata_hash,
    compute_topic_hash,
    topic_hash_input,
    uuid_bits,
)
from offsets_audit.assignors.java_order import java_uuid_hash

GOLDEN_DIR = GOLDEN_ROOT / "metadata_hash"


def _lines(name):
    with open_golden(GOLDEN_DIR / name) as handle:
        return [json.loads(line) for line in handle if line.strip()]


TOPIC_CASES = _lines("topic_hash.jsonl")
GROUP_CASES = _lines("group_hash.jsonl")


@pytest.mark.parametrize("case", TOPIC_CASES, ids=[c["case_id"] for c in TOPIC_CASES])
def test_topic_hash_matches_kafka(case):
    if case.get("missing"):
        assert compute_topic_hash(None, case["name"], None) == case["topic_hash"] == 0
        return
    assert uuid_bits(case["topic_id"]) == (case["topic_id_msb"], case["topic_id_lsb"])
    stream = topic_hash_input(case["topic_id"], case["name"], case["partitions"], case["partition_racks"])
    assert len(stream) == case["hash_input_len"]
    if case.get("hash_input_hex") is not None:
        assert stream.hex() == case["hash_input_hex"]
    got = compute_topic_hash(case["topic_id"], case["name"], case["partitions"], case["partition_racks"])
    assert got == case["topic_hash"]
    assert (got & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex() == case["topic_hash_hex"]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c["case_id"] for c in GROUP_CASES])
def test_group_hash_matches_kafka(case):
    topics = {t["name"]: t for t in case["topics"]}
    for name, expected in case["topic_hashes"].items():
        t = topics[name]
        assert compute_topic_hash(t["topic_id"], name, t["partitions"], t["partition_racks"]) == expected
    assert compute_group_hash(case["topic_hashes"]) == case["group_hash"]
    assert compute_metadata_hash(case["subscribed_topic_names"], case["topics"]) == case["group_hash"]


def test_group_without_topics_hashes_to_zero():
    assert compute_group_hash({}) == 0


def test_missing_topic_hashes_to_zero():
    assert compute_topic_hash(None, "gone", None) == 0


def test_topic_id_string_and_bits_hash_alike():
    case = next(c for c in TOPIC_CASES if not c.get("missing"))
    bits = (case["topic_id_msb"], case["topic_id_lsb"])
    assert compute_topic_hash(bits, case["name"], case["partitions"], case["partition_racks"]) == case["topic_hash"]


def test_java_uuid_hash_folds_xor_of_longs():
    # Uuid.hashCode: (int)(xor >> 32) ^ (int) xor, with xor = msb ^ lsb.
    assert java_uuid_hash(0, 0) == 0
    assert java_uuid_hash(1 << 32, 1) == 0
    assert java_uuid_hash(-1, 0) == 0
    assert java_uuid_hash(0x7FFFFFFF00000000, 0) == 0x7FFFFFFF
