"""Loads golden assignor cases at collection time so each case is its own parametrized test."""

from __future__ import annotations

import json
import pytest

from golden_files import GOLDEN, open_golden


def golden_cases(assignor_file: str) -> list:
    """``pytest.param`` per line of ``golden/assignors/<assignor_file>.jsonl``, named by case_id."""
    path = GOLDEN / "assignors" / f"{assignor_file}.jsonl"
    with open_golden(path) as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    return [pytest.param(case, id=case["case_id"]) for case in cases]
