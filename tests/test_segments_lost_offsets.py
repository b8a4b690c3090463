"""Lost offsets are counted exactly when batches sit out of offset order or a bogus file follows a segment.

Regressions of ``bench/fuzz.py --damages 10000 --seed 13`` (inputs 2271, 3359, 7247, 9023, 9647): each had two or
three damages at once and came out 1-11 records short (or one over) of ``read + records_lost == records on disk``.
"""

from __future__ import annotations

import pytest

from offsets_audit.sources.segment_writer import encode_batch
from offsets_audit.sources.segments import iter_batches

TIMESTAMP = 1754000000000


def batch(base_offset: int, records: int = 1) -> bytes:
    return encode_batch([(b"k%d" % i, b"v") for i in range(records)], base_offset, TIMESTAMP)


def crc_damaged(data: bytes) -> bytes:
    """The batch with one payload bit flipped: its header (offsets, count) intact, its CRC32C wrong."""
    damaged = bytearray(data)
    damaged[-1] ^= 0x01
    return bytes(damaged)


def read(tmp_path, data: bytes, name: str = "00000000000000000000.log", **kwargs):
    path = tmp_path / name
    path.write_bytes(data)
    quarantine: list[dict] = []
    offsets = [record[0] for b in iter_batches(path, quarantine, **kwargs) for record in b.records]
    return offsets, quarantine


def lost(quarantine) -> list[tuple]:
    return [(q["lost_from"], q["lost_to"], q["records_lost"]) for q in quarantine if q["records_lost"]]


@pytest.mark.parametrize("order", [(0, 2, 1, 3), (0, 1, 3, 2, 4)], ids=["damaged-second", "damaged-first"])
def test_a_swapped_batch_that_is_also_damaged_counts_its_own_offsets(tmp_path, order):
    """Two neighbours swapped, then one of them damaged (fuzz inputs 2271, 7247): the stretch between its file
    neighbours costs nothing, but its claimed offsets are a hole no read batch fills, so they are the loss."""
    damaged = 1 if order == (0, 2, 1, 3) else 3
    data = b"".join(crc_damaged(batch(o)) if o == damaged else batch(o) for o in order)
    offsets, quarantine = read(tmp_path, data)
    assert damaged not in offsets
    assert [q["error_code"] for q in quarantine] == ["crc_mismatch"]
    assert lost(quarantine) == [(damaged, damaged, 1)]
    assert len(offsets) + quarantine[0]["records_lost"] == len(order)
    assert "out of offset order" in quarantine[0]["message"]


def test_a_compacted_hole_is_not_counted_for_a_damaged_batch_that_claims_other_offsets(tmp_path):
    """Offsets 3-4 were compacted away (a gap between good batches, no damage there); a damaged batch later in the
    file claims offset 1, which was read: the hole is not its loss and it costs nothing."""
    data = batch(0) + batch(1) + batch(2) + batch(5) + crc_damaged(batch(1)) + batch(6)
    offsets, quarantine = read(tmp_path, data)
    assert offsets == [0, 1, 2, 5, 6]
    assert [q["error_code"] for q in quarantine] == ["crc_mismatch"]
    assert lost(quarantine) == []


def test_swapped_batches_do_not_move_the_counted_offsets_backwards(tmp_path):
    """Fuzz input 9647: batches 3 and 2 swapped, then the segment cut inside batch 4 (a rolled segment, the next
    starting at 6): offsets 4-5 are lost, not 3-5 (3 was read)."""
    data = batch(0) + batch(1) + batch(3) + batch(2) + batch(4, records=2)[:40]
    offsets, quarantine = read(tmp_path, data, next_base_offset=6)
    assert offsets == [0, 1, 3, 2]
    assert lost(quarantine) == [(4, 5, 2)]


def test_a_bogus_next_segment_does_not_turn_a_truncated_tail_into_an_unknown_loss(tmp_path):
    """Fuzz inputs 3359, 9023: a garbage file named as a segment far past the end (base offset 10^12) follows a
    segment cut inside its final batch. The offsets up to 10^12 are not believed; the cut batch's header (its
    offsets and count survive) says what was lost."""
    data = batch(0) + batch(1) + batch(2, records=3)[:65]
    offsets, quarantine = read(tmp_path, data, next_base_offset=10 ** 12)
    assert offsets == [0, 1]
    assert lost(quarantine) == [(2, 4, 3)]
    assert "too far apart to believe" in quarantine[0]["message"]
    assert "header's own claim" in quarantine[0]["message"]
