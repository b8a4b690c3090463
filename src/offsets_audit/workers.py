"""What the stages' Python bodies share inside Spark's Python workers (every stage may use it; it imports none)."""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: CPython's collection threshold for its youngest generation inside ``fewer_collections`` (700 by default).
GEN0_THRESHOLD = 20_000
#: Bodies inside ``fewer_collections`` now, and the thresholds the first of them found.
_open = 0
_saved: tuple = gc.get_threshold()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with CPython's cyclic collector triggered far less often, then restore its thresholds.

    The group fold, the audit's walk and the assignor re-runs build a few dicts per record, event or member, and
    the collector ran every 700 of them (allocations less deallocations), scanning the young objects and, every
    100 such runs, the worker's whole heap: a noticeable share of those stages' time (``gc.callbacks`` shows it). Cycles
    are still collected, in fewer, larger runs; the workers are reused between tasks, so
    the thresholds they had come back when the last body open ends (or a generator around it is closed), in
    whatever order bodies nested or interleaved end."""
    global _open, _saved
    if _open == 0:
        _saved = gc.get_threshold()
        gc.set_threshold(max(GEN0_THRESHOLD, _saved[0]), *_saved[1:])
    _open += 1
    try:
        yield
    finally:
        _open -= 1
        if _open == 0:
            gc.set_threshold(*_saved)

