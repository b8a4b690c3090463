"""A fixed-seed slice of ``bench/fuzz.py``: random damage to segment files never raises anything but a one-line
``UserError``, and ``read + records_lost`` equals the records on disk (see the bench's docstring)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fuzz.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("offsets_audit_bench_fuzz", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_fixed_seed_slice_of_the_fuzz_campaign(fuzz, tmp_path):
    histories = fuzz.make_histories(tmp_path / "histories")
    result = fuzz.pure_campaign(histories, damages=160, seed=2026, scratch=tmp_path / "scratch", decode_every=4)
    figures = result["figures"]
    assert result["failures"] == []
    assert figures["traceback"] == 0 and figures["count mismatch"] == 0
    assert figures["exact"] >= 120  # the rest: duplicates refused (exit 2), a destroyed final header
    assert all(figures[f"kind:{kind}"] == 20 for kind in fuzz.KINDS)
