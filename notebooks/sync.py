"""Writes notebooks/explore.ipynb from notebooks/explore.py (the Databricks source is the one to edit).

    python notebooks/sync.py

Cells are split at ``# COMMAND ----------``; a cell whose lines all start with ``# MAGIC`` and whose first
line is ``# MAGIC %md`` becomes a markdown cell, every other cell a code cell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
HERE = Path(__file__).resolve().parent


def databricks_cells(source: str) -> list[tuple[str, str]]:
    """(kind, text) of each cell of a Databricks notebook source file; kind is ``markdown`` or ``code``."""
    lines = source.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"not a Databricks notebook source: the first line must be {HEADER!r}")
    cells, current = [], []
    for line in lines[1:] + [SEPARATOR]:
        if line.strip() != SEPARATOR:
            current.append(line)
            continue
        text = "\n".join(current).strip("\n")
        current = []
        if not text:
            continue
        body = text.splitlines()
        if body[0].strip() == "# MAGIC %md" and all(b.startswith("# MAGIC") for b in body):
            markdown = [b[len("# MAGIC "):] if b.startswith("# MAGIC ") else "" for b in body[1:]]
            cells.append(("markdown", "\n".join(markdown).strip("\n")))
        else:
            cells.append(("code", text))
    return cells


def to_notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text)
                for kind, text in cells]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nb


def main() -> int:
    cells = databricks_cells((HERE / "explore.py").read_text(encoding="utf-8"))
    nbformat.write(to_notebook(cells), HERE / "explore.ipynb")
    print(f"wrote {HERE / 'explore.ipynb'} ({len(cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
