"""Comments and docstrings say why, never how fast or when: no issue numbers, dates, README-section references,
machine loads, A/B timings or notes to a duplicate checker in the package's code or in the jobs and notebooks.
Measurements live in ``bench/results`` (``bench/results.py``)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from script_modules import REPO

ROOTS = ("src/offsets_audit", "jobs", "notebooks")
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b"),
    "a README section": re.compile(r"\bREADME[,:]? ?[\"'(]|\(README\b|README \"|README, \""),
    "a machine's load": re.compile(r"\bload (average )?~?\d"),
    "an A/B timing": re.compile(r"\d(\.\d+)? ?(s|ms) (against|vs\.?|->|→) \d|\balternated\b.*\d ?s\b", re.I),
    "a note to a duplicate checker": re.compile(r"\bon purpose\b|nothing shared|alike in shape", re.I),
    "a file:line reference": re.compile(r"\b[\w/]+\.py:\d+"),
}


def _texts(path: Path):
    """(line, text) of every comment and string literal that is a docstring or stands alone."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.string.lstrip("rbuRBU")
                                              .startswith(('"""', "'''"))):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def _files() -> list[Path]:
    return sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py"))


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(REPO)))
def test_comments_say_why(path):
    found = [f"{path.relative_to(REPO)}:{line}: {what}: {text.strip()[:100]}"
             for line, text in _texts(path) for what, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert not found, "\n".join(found)
