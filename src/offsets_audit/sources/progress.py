"""Progress lines for long Spark jobs, printed to stderr every few seconds (records, records/s, tasks).

On a classic session task counts come from ``SparkContext.statusTracker()`` and record counts from Spark's
status store (the same numbers the Spark UI shows as input/output records, updated as tasks finish). A Spark
Connect session has neither; its server reports each operation's stages to the client's progress handlers
(``SparkSession.registerProgressHandler``): tasks and bytes read, no record counts.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

from offsets_audit.spark_api import is_connect, spark_context, status_store


@dataclass
class StageSnapshot:
    stage_id: int
    tasks: int
    completed: int
    active: int
    records: int | None


def format_line(label: str, elapsed_s: float, records: int | None, stages: list[StageSnapshot],
                bytes_read: int | None = None) -> str:
    """``dump: 12,000 records (3,000 records/s) | stage 3: 5/9 tasks, 2 running | 4s``; where records are not
    counted (Spark Connect), the bytes read: ``dump: 12.5 MiB read (3.1 MiB/s) | ...``."""
    parts = [f"{label}:"]
    if records is not None:
        rate = records / elapsed_s if elapsed_s > 0 else 0.0
        parts.append(f"{records:,} records ({rate:,.0f} records/s)")
    elif bytes_read is not None:
        mib = bytes_read / 2**20
        parts.append(f"{mib:,.1f} MiB read ({mib / elapsed_s if elapsed_s > 0 else 0.0:,.1f} MiB/s)")
    for stage in stages:
        parts.append(f"| stage {stage.stage_id}: {stage.completed}/{stage.tasks} tasks, {stage.active} running")
    parts.append(f"| {elapsed_s:.0f}s")
    return " ".join(parts)


class SparkProgress:
    """Context manager: while the body runs, print a progress line to ``stream`` every ``interval_s`` seconds.

    Nothing is printed for a body that ends within the first interval, so short jobs stay quiet.
    """

    def __init__(self, spark, label: str, interval_s: float = 5.0, stream: TextIO | None = None):
        self.label = label
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        self._spark = spark
        self._tracker = None
        self._store = None
        self._context = spark_context(spark)
        self._connect_stages: dict[tuple, Any] | None = None
        found = status_store(spark)
        if found is not None:
            self._tracker, self._store = found
        elif is_connect(spark):
            self._connect_stages = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._job_group = f"offsets-audit-{label}-{id(self):x}"
        self._previous_group: str | None = None
        self._seen_stages: set[int] = set()
        self._start = 0.0
        self.lines_printed = 0

    def __enter__(self) -> SparkProgress:
        self._start = time.monotonic()
        if self._context is not None:
            # Jobs started by this thread join the group, so stages that start and end between polls count too.
            self._previous_group = self._context.getLocalProperty("spark.jobGroup.id")
            self._context.setLocalProperty("spark.jobGroup.id", self._job_group)
        if self._connect_stages is not None:
            self._spark.registerProgressHandler(self._on_connect_progress)
        if self._tracker is not None or self._connect_stages is not None:
            self._thread = threading.Thread(target=self._run, name=f"progress-{self.label}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
        if self._context is not None:
            self._context.setLocalProperty("spark.jobGroup.id", self._previous_group)
        if self._connect_stages is not None:
            self._spark.removeProgressHandler(self._on_connect_progress)
        if self.lines_printed and exc_info[0] is None:
            self._print(self._line(final=True))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._print(self._line(final=False))
            except Exception:  # the session went away under us; the job itself reports that
                return

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
        self.lines_printed += 1

    def _on_connect_progress(self, stages, inflight_tasks: int, operation_id, done: bool) -> None:
        """A Connect server's report on one operation: its stages so far (``StageInfo``), kept by stage."""
        kept = self._connect_stages
        if kept is None:
            return
        for stage in stages or ():
            kept[(operation_id, stage.stage_id)] = stage

    def _line(self, final: bool) -> str:
        if self._connect_stages is not None:
            return self._connect_line(self._connect_stages, final)
        tracker = self._tracker
        if tracker is None:
            raise RuntimeError("no status tracker to report from")
        for job_id in tracker.getJobIdsForGroup(self._job_group):
            job = tracker.getJobInfo(job_id)
            if job is not None:
                self._seen_stages.update(job.stageIds)
        active = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            self._seen_stages.add(stage_id)
            info = tracker.getStageInfo(stage_id)
            if info is not None and not final:
                active.append(StageSnapshot(stage_id, info.numTasks, info.numCompletedTasks,
                                            info.numActiveTasks, None))
        label = f"{self.label} done" if final else self.label
        return format_line(label, time.monotonic() - self._start, self._records(), active)

    def _connect_line(self, kept: dict[tuple, Any], final: bool) -> str:
        stages = list(kept.values())
        active = [] if final else [StageSnapshot(stage.stage_id, stage.num_tasks, stage.num_completed_tasks,
                                                 0, None) for stage in stages if not stage.done]
        label = f"{self.label} done" if final else self.label
        return format_line(label, time.monotonic() - self._start, None, active,
                           bytes_read=sum(stage.num_bytes_read for stage in stages))

    def _records(self) -> int | None:
        """Input or output records of every stage seen so far, whichever is larger per stage."""
        if self._store is None:
            return None
        total = 0
        for stage_id in self._seen_stages:
            try:
                data = self._store.lastStageAttempt(stage_id)
            except Exception:  # not submitted yet, or skipped
                continue
            total += max(data.inputRecords(), data.outputRecords())
        return total
