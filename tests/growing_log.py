"""A ``__consumer_offsets`` log that grows the way a broker's does, for incremental runs night after night.

A history's segment folders are cut at complete batch boundaries; ``grow`` makes a live folder hold the first i of
k slices of every partition's log, appending to the active segment file and adding new files, never rewriting
what an earlier slice wrote, so each incremental run reads exactly what a broker would have appended since the last.
Shared by the incremental parity tests and the benches that kill or damage incremental runs.
"""
from __future__ import annotations

from pathlib import Path


def damaged_history(root: Path, seed: int, hours: float) -> Path:
    """A small simulated history as segments under ``root/history``, one segment with a zeroed block in its middle
    (so the runs quarantine rows as well as decode them); returns its segments folder."""
    from offsets_audit.simulate import simulate

    simulate(str(root / "history"), groups=5, hours=hours, partitions=2, seed=seed, formats=("segments",),
             segment_bytes=64 * 1024)
    segments = sorted((root / "history" / "segments").rglob("*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(segments[-1].read_bytes())
    middle = len(data) // 2
    data[middle:middle + 2048] = bytes(min(2048, len(data) - middle))
    segments[-1].write_bytes(bytes(data))
    return root / "history" / "segments"


def batch_cuts(segments: Path) -> dict[Path, list[tuple[Path, int]]]:
    """Per partition folder, every (segment file, end position) of a complete batch, in log order."""
    from offsets_audit.sources.segments_stream import batch_ends

    return {folder: [(f, end) for f in sorted(folder.glob("*.log")) for end in batch_ends(str(f), 0, f.stat().st_size)]
            for folder in sorted(p for p in segments.iterdir() if p.is_dir())}


def grow(cuts: dict[Path, list[tuple[Path, int]]], live: Path, i: int, k: int, only=None) -> None:
    """Make ``live`` hold slices 1..i of k of every partition's log (files only ever grow or appear); with
    ``only``, of those partition folders only (the others are left as they are)."""
    for folder, ends in cuts.items():
        if not ends or (only is not None and folder not in only):
            continue
        last_file, last_end = ends[max(-(-len(ends) * i // k) - 1, 0)]
        target = live / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for f in sorted(folder.glob("*.log")):
            if f.name > last_file.name:
                break
            data = f.read_bytes()
            (target / f.name).write_bytes(data if f != last_file else data[:last_end])
