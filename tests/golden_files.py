"""The golden data: Kafka's own output, vendored under ``tests/golden/`` so a bare clone tests itself.

Large JSON Lines files are stored xz-compressed (``name.jsonl.xz``); every test opens golden files
through these helpers, which find the plain or the compressed file under the plain name. A golden
file a test names and cannot find is an error, never a skip.
"""
from __future__ import annotations

import lzma
from pathlib import Path
from typing import TextIO

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden_path(path: Path | str) -> Path:
    """The file on disk for a golden name: ``path`` itself or ``path.xz``."""
    path = Path(path)
    if path.exists():
        return path
    compressed = path.with_name(path.name + ".xz")
    if compressed.exists():
        return compressed
    raise FileNotFoundError(f"golden file {path} (or {compressed.name}) is missing: tests/golden/ is part of "
                            "the repository; restore it with git checkout -- tests/golden")


def open_golden(path: Path | str) -> TextIO:
    """Open a golden text file (plain or xz) for reading as UTF-8."""
    real = golden_path(path)
    if real.suffix == ".xz":
        return lzma.open(real, "rt", encoding="utf-8")
    return open(real, encoding="utf-8")


def read_golden(path: Path | str) -> str:
    with open_golden(path) as handle:
        return handle.read()


def golden_glob(folder: Path, pattern: str) -> list[Path]:
    """Files of ``folder`` matching ``pattern``, plain or xz-compressed, sorted by their plain name."""
    found = {p.name: p for p in folder.glob(pattern)}
    for p in folder.glob(pattern + ".xz"):
        found.setdefault(p.name[:-3], p)
    return [found[name] for name in sorted(found)]
