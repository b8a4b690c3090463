"""A fixed-seed slice of ``bench/fuzz.py``: random damage to segment files never raises anything but a one-line
``UserError``, and ``read + records_lost`` equals the records on disk (see the bench's docstring)."""

from __future__ import annotations


import pytest
from script_modules import load_script

@pytest.fixture(scope="module")
def fuzz():
    return load_script("bench/fuzz.py", "offsets_audit_bench_fuzz")


@pytest.fixture(scope="module")
def histories(fuzz, tmp_path_factory):
    return fuzz.make_histories(tmp_path_factory.mktemp("histories"))


def test_a_fixed_seed_slice_of_the_fuzz_campaign(fuzz, histories, tmp_path):
    result = fuzz.pure_campaign(histories, damages=160, seed=2026, scratch=tmp_path / "scratch", decode_every=4)
    figures = result["figures"]
    assert result["failures"] == []
    assert figures["traceback"] == 0 and figures["count mismatch"] == 0
    assert figures["exact"] >= 120  # the rest: duplicates refused (exit 2), a destroyed final header
    assert all(figures[f"kind:{kind}"] == 20 for kind in fuzz.KINDS)


#: Inputs of ``bench/fuzz.py --damages 10000 --seed 13`` that once did not balance (two or three damages at once:
#: swapped batches with one of them damaged or cut, a garbage file named as a later segment); the reader's part of
#: each is in tests/test_segments_lost_offsets.py.
ONCE_UNBALANCED = {2271, 3359, 7247, 9023, 9647}


def test_the_inputs_that_once_did_not_balance_now_balance_exactly(fuzz, histories, tmp_path):
    result = fuzz.pure_campaign(histories, damages=0, seed=13, scratch=tmp_path / "scratch", only=ONCE_UNBALANCED)
    assert result["failures"] == []
    assert result["figures"]["exact"] == len(ONCE_UNBALANCED)
