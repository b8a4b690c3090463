"""A run's stages: the one timer the batch job (``job.run_job``) and the incremental run
(``incremental.run_incremental``) share, and the caches a run frees when it ends.

An orchestrator declares a stage as a block, ``with stages.stage("replay"): ...``: its wall time becomes
``timings_s["replay"]`` of the run's summary, and it is announced on stderr when the run shows progress. A step
inside a stage is timed with ``stages.part("replay:commit_digest")`` (no announcement), or recorded with
``stages.record`` when it was timed elsewhere (``plans.side_by_side`` returns each callable's seconds).

Spark is lazy: a stage's time is the work it did only when it ends at a boundary (its results persisted and
counted). What a stage persists is registered with ``on_release`` (or ``kept``) and freed by ``release`` when
the run ends, failed or not: a long-lived session (a notebook, a nightly driver, the tests) must not keep a
run's caches, whose plans are large.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class RunStages:
    """The timings (``timings``: stage or ``stage:part`` -> seconds, in the order they ended) and the releases of
    one run."""

    def __init__(self, *, progress: bool = True) -> None:
        self.progress = progress
        self.timings: dict[str, float] = {}
        self._releases: list[Callable[[], Any]] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as the stage ``name``, announced on stderr when the run shows progress."""
        if self.progress:
            print(f"[offsets-audit] {name} ...", file=sys.stderr, flush=True)
        with self.part(name):
            yield

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time the block as ``name`` (a step of a stage: ``"<stage>:<step>"``), unannounced."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, time.perf_counter() - began)

    def record(self, name: str, seconds: float) -> None:
        """``seconds`` as the time of ``name`` (a step timed elsewhere)."""
        self.timings[name] = round(seconds, 3)

    def on_release(self, release: Callable[[], Any]) -> None:
        """Call ``release`` (``DataFrame.unpersist``, ``StageTables.release``) when the run ends."""
        self._releases.append(release)

    def kept(self, df):
        """``df`` persisted until the run ends."""
        df = df.persist()
        self.on_release(df.unpersist)
        return df

    def release(self) -> None:
        """Free what the run persisted, in the order it was registered."""
        releases, self._releases = self._releases, []
        for release in releases:
            release()
