"""Loads golden assignor cases at collection time so each case is its own parametrized test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(os.environ.get("OFFSETS_AUDIT_GOLDEN", Path(__file__).resolve().parents[1].parent / "shared" / "golden"))


def golden_cases(assignor_file: str) -> list:
    """``pytest.param`` per line of ``golden/assignors/<assignor_file>.jsonl``, named by case_id."""
    path = GOLDEN / "assignors" / f"{assignor_file}.jsonl"
    if not path.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{path} missing"), id="no-golden")]
    with path.open(encoding="utf-8") as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    return [pytest.param(case, id=case["case_id"]) for case in cases]
